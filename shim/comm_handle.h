// What an ncclComm_t points at: the native communicator plus the C API's bookkeeping (init state,
// blocking mode, PreMulSum ops). A destroyed handle stays as a tombstone for the next
// kDestroyedHandlesKept destroys (shim/handle_quarantine.h), so that a stale handle is reported as an
// error instead of touching freed memory, and is freed after that, but never while the library still
// uses it (CommUse).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

#include "native/communicator.h"
#include "shim/api.h"
#include "shim/live_handles.h"

enum class CommState : int { kInitializing, kReady, kFailed, kAborted, kDestroyed };

struct PreMulSumOp {
  bool live = false;
  ncclDataType_t type = ncclFloat32;
  mscclpp_nccl::ReduceScaling scaling{};
};

struct ncclComm {
  static constexpr uint64_t kMagic = 0x6d7363636c707063ull;  // "msccl++c"
  ncclComm();                                                // enters allocatedComms()
  ~ncclComm();  // leaves it; a handle used after it was freed is less likely to pass as live
  uint64_t magic = kMagic;
  std::atomic<CommState> state{CommState::kInitializing};
  std::atomic<bool> retired{false};    // handed to the quarantine (by exactly one of abort and destroy)
  std::atomic<bool> revoked{false};    // ncclCommRevoke: only split, shrink, destroy and abort are left
  std::atomic<bool> suspended{false};  // ncclCommSuspend: calls wait for ncclCommResume
  std::atomic<int> users{0};           // CommUse objects alive: initialisation work queued or running
  // Non-blocking splits and shrinks of this communicator still queued or running (ChildJob): until they
  // end it reports ncclInProgress, as stock NCCL's parent does, for callers wait on the parent.
  std::atomic<int> childJobs{0};
  bool inUse() const { return users.load(std::memory_order_acquire) != 0; }
  std::atomic<ncclResult_t> initResult{ncclInProgress};
  std::string initError;  // ncclGetLastError text of a failed initialisation
  bool blocking = true;
  int maxCtas = 0;  // ncclConfig_t maxCTAs (0: unset); split and shrink children inherit it
  // The handle of an NCCL_SPLIT_NOCOLOR rank: the caller never sees it, so it is retired as soon as its
  // initialisation ends (or is cancelled).
  bool hidden = false;
  int device = 0;
  int rank = 0;
  int nranks = 0;
  // Calls that use `impl` hold this shared; abort and destroy take it exclusively before freeing it,
  // so that a watchdog thread's ncclCommAbort never frees what another thread is using.
  std::shared_mutex implMutex;
  std::unique_ptr<mscclpp_nccl::Communicator> impl;
  // Runs a non-blocking initialisation. Set and taken under `implMutex` held exclusively, so that
  // concurrent abort and destroy never both join or detach it.
  std::thread worker;

  std::mutex opsMutex;
  std::vector<PreMulSumOp> preMulSumOps;  // op value = ncclNumOps + index

  // The last stream found to belong to `device`: callers reuse one stream, and checking it again on
  // every call would add two CUDA calls to the per-call cost.
  std::atomic<cudaStream_t> checkedStream{nullptr};
};

// Marks `comm` in use for its lifetime, by work that holds the handle without the caller (an
// initialisation queued for ncclGroupEnd or running on its own thread, which may outlive an abort).
class CommUse {
 public:
  explicit CommUse(ncclComm* comm) : comm_(comm) { comm_->users.fetch_add(1, std::memory_order_relaxed); }
  ~CommUse() { comm_->users.fetch_sub(1, std::memory_order_release); }  // the work's last touch of comm
  CommUse(const CommUse&) = delete;
  CommUse& operator=(const CommUse&) = delete;

 private:
  ncclComm* comm_;
};

// Every handle allocated and not yet freed (live, initialising, or in the quarantine): where a call
// that stock NCCL lets take any pointer (ncclGetLastError) looks a handle up before reading it.
LiveHandles& allocatedComms();

// Marks a non-blocking split or shrink of `parent` for its lifetime: the job that makes the child holds
// one, so the parent reports ncclInProgress until the job and every copy of it are gone.
class ChildJob {
 public:
  explicit ChildJob(ncclComm* parent) : use_(parent), parent_(parent) { parent_->childJobs.fetch_add(1); }
  ~ChildJob() { parent_->childJobs.fetch_sub(1, std::memory_order_release); }
  ChildJob(const ChildJob&) = delete;
  ChildJob& operator=(const ChildJob&) = delete;

 private:
  CommUse use_;  // the parent outlives the job's last touch of it
  ncclComm* parent_;
};

constexpr size_t kDestroyedHandlesKept = 1024;
// Hands a destroyed handle to the quarantine, which frees it after kDestroyedHandlesKept later ones,
// once nothing uses it.
void retireHandle(ncclComm* comm);

// Runs fn(Communicator&) -> Status under the shared lock that keeps `impl` alive (abort and destroy
// take it exclusively); fails with `goneMessage` when the native communicator is already gone.
template <typename Fn>
mscclpp_nccl::Status withImpl(ncclComm* comm, const char* goneMessage, Fn fn) {
  std::shared_lock<std::shared_mutex> lock(comm->implMutex);
  if (!comm->impl) return mscclpp_nccl::fail(mscclpp_nccl::Status::kInvalidUsage, "%s", goneMessage);
  return fn(*comm->impl);
}

// Creates the native communicator of `comm` by running `job` now, at ncclGroupEnd when a group is
// open, or on a worker thread for a non-blocking communicator. Returns what the init call returns.
using CommJob = std::function<mscclpp_nccl::Status(std::unique_ptr<mscclpp_nccl::Communicator>*)>;
ncclResult_t startCommJob(ncclComm* comm, CommJob job);

// Parsed ncclConfig_t, read by its `size` so that older and newer callers both work.
struct CommConfig {
  bool blocking = true;
  int maxCtas = 0;  // maxCTAs: no kernel of the communicator takes more blocks (0: unset)
};
// No config: the defaults, or those of `parent` (a child of split, shrink or grow), as NCCL's children
// inherit them.
ncclResult_t readCommConfig(const ncclConfig_t* config, const ncclComm* parent, CommConfig* out);

// Makes `device` current for the lifetime of the guard.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();

 private:
  int previous_ = -1;
  int device_;
};
