#include "native/stall_monitor.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "native/common/env.h"
#include "native/common/logging.h"
#include "native/common/parameters.h"
#include "native/common/threads.h"
#include "native/transport/cuda_check.h"

namespace mscclpp_nccl {
namespace {

constexpr auto kLookEvery = std::chrono::milliseconds(500);
// CUDA gives a context 8 hardware work queues; an MPS client gets 2 unless CUDA_DEVICE_MAX_CONNECTIONS
// asks for more (measured with perf/mps_stream_probe.cu, 8 clients on one H100).
constexpr int kQueuesWithoutMps = 8;
constexpr int kQueuesUnderMps = 2;

// The process's watches, looked at by one thread that starts with the first watch and never ends (it
// holds nothing but this list; leaked, so that the process's exit does not wait for it).
struct Monitor {
  std::mutex mutex;
  std::vector<StallWatch*> watches;
  bool started = false;
};

Monitor& monitor() {
  static Monitor* instance = new Monitor();
  return *instance;
}

// Under MPS, the hardware work queues this process's streams share; 0 where the device is not shared
// through MPS. Streams beyond the queues share them: a call waiting for its peers at the head of one
// queue holds back the calls of every stream behind it, which those peers may need first.
int queuesUnderMps() {
  int device = 0, mps = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&mps, cudaDevAttrMpsEnabled, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return mps ? static_cast<int>(envInt("CUDA_DEVICE_MAX_CONNECTIONS", kQueuesUnderMps)) : 0;
}

// Printed once per process with its first stall report, where few queues may be the cause.
void hintAtFewQueues(int queues) {
  static std::once_flag once;
  if (queues <= 0 || queues >= kQueuesWithoutMps) return;
  std::call_once(once, [queues] {
    logWarnAlways(
        "this process shares the GPU through MPS with %d hardware work queue%s (CUDA_DEVICE_MAX_CONNECTIONS; "
        "%d when unset). Its streams beyond them share queues, so a call waiting on one stream can hold back "
        "a call on another that a peer needs first. Give each process as many as the streams that carry "
        "its calls (python -m mscclpp_nccl.run --mps sets %d)",
        queues, queues == 1 ? "" : "s", kQueuesUnderMps, kQueuesWithoutMps);
  });
}

void lookForever() {
  for (;;) {
    std::this_thread::sleep_for(kLookEvery);
    Monitor& m = monitor();
    std::lock_guard<std::mutex> lock(m.mutex);
    for (StallWatch* watch : m.watches) watch->poll();
  }
}

}  // namespace

Status StallWatch::create(int rank, int nranks, uint64_t commHash, std::unique_ptr<StallWatch>* out) {
  out->reset();
  const uint64_t stallNs = readNanoseconds(Param::kStallReport);
  if (stallNs == 0) return Status::kSuccess;
  std::unique_ptr<StallWatch> watch(new StallWatch());
  watch->rank_ = rank;
  watch->nranks_ = nranks;
  watch->commHash_ = commHash;
  watch->stallNs_ = stallNs;
  watch->mpsQueues_ = queuesUnderMps();
  const size_t bytes = offsetof(StallReport, waitingFor) + static_cast<size_t>(nranks);
  MSCCLPP_CUDA_TRY(cudaHostAlloc(reinterpret_cast<void**>(&watch->hostReport_), bytes,
                                 cudaHostAllocMapped | cudaHostAllocPortable));
  memset(const_cast<StallReport*>(watch->hostReport_), 0, bytes);
  MSCCLPP_CUDA_TRY(
      cudaHostGetDevicePointer(reinterpret_cast<void**>(&watch->deviceReport_), watch->hostReport_, 0));
  Monitor& m = monitor();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    if (!m.started) {
      std::thread thread;
      if (!ok(startThread(&thread, lookForever, "the stall monitor", "StallWatch"))) {
        logWarn("stall reports are off: %s", lastError());
        return Status::kSuccess;  // the watch is dropped: kernels get no report to write
      }
      thread.detach();
      m.started = true;
    }
    m.watches.push_back(watch.get());
  }
  *out = std::move(watch);
  return Status::kSuccess;
}

StallWatch::~StallWatch() {
  {
    Monitor& m = monitor();
    std::lock_guard<std::mutex> lock(m.mutex);
    m.watches.erase(std::remove(m.watches.begin(), m.watches.end(), this), m.watches.end());
  }
  // The communicator's kernels are drained by now (its destructor waits for them).
  if (hostReport_) cudaFreeHost(hostReport_);
  cudaGetLastError();
}

uint64_t StallWatch::beginCall(const char* what, size_t bytes) {
  std::lock_guard<std::mutex> lock(callsMutex_);
  const uint64_t number = ++calls_;
  recent_[number % kRemembered] = {number, what, bytes};
  return number;
}

void StallWatch::poll() {
  const uint64_t call = hostReport_->call;
  if (call == 0 || call == reportedCall_) return;
  // Peers are named by each waiting thread as its own wait passes the limit: give them one more look.
  if (call != seenCall_) {
    seenCall_ = call;
    return;
  }
  std::string peers;
  for (int peer = 0; peer < nranks_; ++peer) {
    if (!hostReport_->waitingFor[peer]) continue;
    hostReport_->waitingFor[peer] = 0;
    peers += (peers.empty() ? "" : ", ") + std::to_string(peer);
  }
  Call named;
  {
    std::lock_guard<std::mutex> lock(callsMutex_);
    if (recent_[call % kRemembered].number == call) named = recent_[call % kRemembered];
  }
  const double seconds = static_cast<double>(stallNs_) / 1e9;
  if (named.number == call)
    logWarnAlways(
        "commHash 0x%016llx rank %d: %s #%llu (%zu bytes) has made no progress for %.0f s; no data yet from "
        "rank%s %s. Still waiting (MSCCLPP_NCCL_STALL_REPORT)",
        static_cast<unsigned long long>(commHash_), rank_, named.what, static_cast<unsigned long long>(call),
        named.bytes, seconds, peers.find(',') == std::string::npos ? "" : "s", peers.c_str());
  else
    logWarnAlways(
        "commHash 0x%016llx rank %d: call #%llu has made no progress for %.0f s; no data yet from rank%s %s. "
        "Still waiting (MSCCLPP_NCCL_STALL_REPORT)",
        static_cast<unsigned long long>(commHash_), rank_, static_cast<unsigned long long>(call), seconds,
        peers.find(',') == std::string::npos ? "" : "s", peers.c_str());
  reportedCall_ = call;
  hintAtFewQueues(mpsQueues_);
}

}  // namespace mscclpp_nccl
