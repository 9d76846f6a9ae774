// Communicator queries, teardown, split and shrink, and error reporting.
#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "shim/arg_checks.h"
#include "shim/comm_handle.h"

using mscclpp_nccl::Communicator;
using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

namespace {

// Frees the native communicator; the handle stays as a tombstone (see comm_handle.h).
void release(ncclComm* comm, bool abort) {
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point from, Clock::time_point to) {
    return std::chrono::duration<double, std::milli>(to - from).count();
  };
  const Clock::time_point start = Clock::now();
  if (abort) {
    // Waiting kernels exit, and calls blocked in other threads (split, shrink, window registration)
    // return, so that neither the exclusive lock nor the frees below wait long.
    std::shared_lock<std::shared_mutex> lock(comm->implMutex);
    if (comm->impl) comm->impl->abort();
  }
  const Clock::time_point raised = Clock::now();
  std::unique_ptr<Communicator> impl;
  std::thread worker;  // taken by one caller only: a concurrent abort and destroy find it gone
  {
    std::unique_lock<std::shared_mutex> lock(comm->implMutex);
    impl = std::move(comm->impl);
    worker = std::move(comm->worker);
    comm->state = abort ? CommState::kAborted : CommState::kDestroyed;
  }
  const Clock::time_point locked = Clock::now();
  if (worker.joinable()) {
    // An initialisation still in the rendezvous may wait for ranks that never come: leave it to
    // finish (or time out) on its own; runJob drops what it built once it sees the new state. That
    // thread holds a CommUse, so the quarantine keeps `comm` until it is done.
    if (abort)
      worker.detach();
    else
      worker.join();
  }
  impl.reset();
  comm->state = CommState::kDestroyed;
  if (abort)
    MSCCLPP_INFO(kInit,
                 "ncclCommAbort: rank %d: returned after %.1f ms: abort raised %.1f ms, other threads' "
                 "calls left %.1f ms, teardown %.1f ms",
                 comm->rank, ms(start, Clock::now()), ms(start, raised), ms(raised, locked),
                 ms(locked, Clock::now()));
  if (!comm->retired.exchange(true)) retireHandle(comm);
}

// A revoked communicator's state: ncclInProgress until every call issued before the revoke has left the
// GPU, then ncclSuccess (NCCL's: it is then quiescent, and split, shrink and destroy proceed safely).
ncclResult_t revokeProgress(ncclComm* comm) {
  std::shared_lock<std::shared_mutex> lock(comm->implMutex);
  if (!comm->impl) return ncclInvalidUsage;
  return comm->impl->revokedWorkEnded() ? ncclSuccess : ncclInProgress;
}

ncclResult_t newChildHandle(ncclComm_t parent, ncclConfig_t* config, ncclComm** out) {
  CommConfig parsed;
  NCCL_TRY(readCommConfig(config, parent, &parsed));
  ncclComm* child = new ncclComm();
  child->blocking = parsed.blocking;
  child->maxCtas = parsed.maxCtas;
  child->device = parent->device;
  *out = child;
  return ncclSuccess;
}

}  // namespace

NCCL_API(ncclResult_t, ncclCommFinalize, (ncclComm_t comm), comm) {
  // Work is only ever enqueued on the caller's streams, so there is nothing left to flush here. As in
  // stock NCCL, the communicator's asynchronous error (a lost peer) is reported.
  NCCL_TRY(checkKnownComm(comm, "ncclCommFinalize"));
  if (comm->state.load() == CommState::kInitializing)  // as stock NCCL, which waits for nothing here
    return toNccl(fail(Status::kInvalidArgument, "ncclCommFinalize: comm is still initializing"));
  if (comm->revoked.load())
    return toNccl(fail(Status::kInvalidUsage, "ncclCommFinalize: comm was revoked: destroy or abort it"));
  std::shared_lock<std::shared_mutex> lock(comm->implMutex);
  return comm->impl ? toNccl(comm->impl->asyncError()) : ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDestroy, (ncclComm_t comm), comm) {
  if (comm == nullptr) return ncclSuccess;
  NCCL_TRY(checkKnownComm(comm, "ncclCommDestroy"));
  // As in stock NCCL: waiting for an initialisation that waits for absent ranks could take the whole
  // bootstrap timeout; abort is what ends one.
  if (comm->state.load() == CommState::kInitializing)
    return toNccl(fail(Status::kInvalidArgument,
                       "ncclCommDestroy: comm is still initializing: wait until ncclCommGetAsyncError gives "
                       "ncclSuccess, or end it with ncclCommAbort"));
  release(comm, /*abort=*/false);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommAbort, (ncclComm_t comm), comm) {
  if (comm == nullptr) return ncclSuccess;
  NCCL_TRY(checkKnownComm(comm, "ncclCommAbort"));
  release(comm, /*abort=*/true);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommRevoke, (ncclComm_t comm, int revokeFlags), comm, revokeFlags) {
  if (comm == nullptr) return ncclSuccess;  // as stock NCCL
  NCCL_TRY(checkManageableComm(comm, "ncclCommRevoke"));
  if (revokeFlags != NCCL_REVOKE_DEFAULT)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommRevoke: unknown flags 0x%x", revokeFlags));
  if (!comm->revoked.exchange(true)) {
    DeviceGuard guard(comm->device);  // the mark goes on the communicator's own stream
    const Status revoked =
        withImpl(comm, "ncclCommRevoke: comm was aborted", [](Communicator& impl) { return impl.revoke(); });
    if (!mscclpp_nccl::ok(revoked)) return toNccl(revoked);
  }
  if (!comm->blocking) return revokeProgress(comm);
  // The calls' kernels give up within microseconds of the revoke; what they wait behind on the callers'
  // streams is the callers' own work.
  const auto start = std::chrono::steady_clock::now();
  bool warned = false;
  ncclResult_t progress;
  while ((progress = revokeProgress(comm)) == ncclInProgress) {
    if (!warned && std::chrono::steady_clock::now() - start > std::chrono::seconds(10)) {
      mscclpp_nccl::logWarn(
          "ncclCommRevoke: rank %d: revoked calls still queued after 10 s, behind work on "
          "their streams; still waiting",
          comm->rank);
      warned = true;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  return progress;
}

NCCL_API(ncclResult_t, ncclCommCount, (const ncclComm_t comm, int* count), comm, count) {
  NCCL_TRY(checkManageableComm(comm, "ncclCommCount"));
  if (count == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclCommCount: count is NULL"));
  *count = comm->nranks;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommCuDevice, (const ncclComm_t comm, int* device), comm, device) {
  NCCL_TRY(checkManageableComm(comm, "ncclCommCuDevice"));
  if (device == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclCommCuDevice: device is NULL"));
  *device = comm->device;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommUserRank, (const ncclComm_t comm, int* rank), comm, rank) {
  NCCL_TRY(checkManageableComm(comm, "ncclCommUserRank"));
  if (rank == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclCommUserRank: rank is NULL"));
  *rank = comm->rank;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommGetAsyncError, (ncclComm_t comm, ncclResult_t* asyncError), comm, asyncError) {
  NCCL_TRY(checkKnownComm(comm, "ncclCommGetAsyncError"));
  if (asyncError == nullptr)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommGetAsyncError: asyncError is NULL"));
  switch (comm->state.load()) {
    case CommState::kInitializing:
      *asyncError = ncclInProgress;
      break;
    case CommState::kReady: {
      if (comm->childJobs.load(std::memory_order_acquire) > 0) {  // a non-blocking split or shrink runs
        *asyncError = ncclInProgress;
        break;
      }
      if (comm->revoked.load()) {  // the revoked calls' failures are the revoke's, not errors
        *asyncError = revokeProgress(comm);
        break;
      }
      std::shared_lock<std::shared_mutex> lock(comm->implMutex);
      *asyncError = comm->impl ? toNccl(comm->impl->asyncError()) : ncclInvalidUsage;
      break;
    }
    case CommState::kFailed:
      *asyncError = comm->initResult;
      break;
    default:
      *asyncError = ncclInvalidUsage;
  }
  return ncclSuccess;
}

NCCL_GROUP_API(ncclResult_t, ncclCommSplit,
               (ncclComm_t comm, int color, int key, ncclComm_t* newcomm, ncclConfig_t* config), comm, color,
               key, newcomm, config) {
  NCCL_TRY(checkManageableComm(comm, "ncclCommSplit"));
  if (newcomm == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclCommSplit: newcomm is NULL"));
  *newcomm = nullptr;
  if (color < 0 && color != NCCL_SPLIT_NOCOLOR)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommSplit: color %d is negative", color));
  ncclComm* child = nullptr;
  NCCL_TRY(newChildHandle(comm, config, &child));
  // A rank without a color still takes part in the exchange, through a handle the caller never sees
  // and that is retired once the exchange ends.
  child->hidden = color == NCCL_SPLIT_NOCOLOR;
  if (!child->hidden) *newcomm = child;
  const auto running = child->blocking ? nullptr : std::make_shared<ChildJob>(comm);
  return startCommJob(child, [comm, child, color, key, running](std::unique_ptr<Communicator>* impl) {
    (void)running;  // held, with every copy of this job, until the child is made
    return withImpl(comm, "ncclCommSplit: parent was destroyed", [&](Communicator& parent) {
      MSCCLPP_TRY(parent.split(color, key, child->maxCtas, impl));
      if (*impl) {
        child->rank = (*impl)->rank();
        child->nranks = (*impl)->size();
      }
      return Status::kSuccess;
    });
  });
}

NCCL_GROUP_API(ncclResult_t, ncclCommShrink,
               (ncclComm_t comm, int* excludeRanksList, int excludeRanksCount, ncclComm_t* newcomm,
                ncclConfig_t* config, int shrinkFlags),
               comm, excludeRanksList, excludeRanksCount, newcomm, config, shrinkFlags) {
  NCCL_TRY(checkManageableComm(comm, "ncclCommShrink"));
  if (newcomm == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclCommShrink: newcomm is NULL"));
  *newcomm = nullptr;
  // As in stock NCCL, a shrink excludes someone: an empty list is refused, not taken as a copy.
  if (excludeRanksList == nullptr || excludeRanksCount <= 0)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommShrink: the exclude list is NULL or empty"));
  if (shrinkFlags != NCCL_SHRINK_DEFAULT && shrinkFlags != NCCL_SHRINK_ABORT)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommShrink: unknown flags 0x%x", shrinkFlags));
  std::vector<int> excluded(excludeRanksList, excludeRanksList + excludeRanksCount);
  for (int r : excluded) {
    if (r < 0 || r >= comm->nranks)
      return toNccl(fail(Status::kInvalidArgument, "ncclCommShrink: excluded rank %d out of range", r));
    if (r == comm->rank)
      return toNccl(fail(Status::kInvalidArgument, "ncclCommShrink: rank %d excludes itself", r));
  }
  std::sort(excluded.begin(), excluded.end());  // a rank named twice is excluded once
  excluded.erase(std::unique(excluded.begin(), excluded.end()), excluded.end());
  if (static_cast<int>(excluded.size()) >= comm->nranks)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommShrink: no rank left"));
  ncclComm* child = nullptr;
  NCCL_TRY(newChildHandle(comm, config, &child));
  *newcomm = child;
  const auto running = child->blocking ? nullptr : std::make_shared<ChildJob>(comm);
  return startCommJob(
      child, [comm, child, excluded, shrinkFlags, running](std::unique_ptr<Communicator>* impl) {
        (void)running;  // held, with every copy of this job, until the child is made
        return withImpl(comm, "ncclCommShrink: parent was destroyed", [&](Communicator& parent) {
          if (shrinkFlags == NCCL_SHRINK_ABORT) parent.abortOutstandingWork();
          MSCCLPP_TRY(parent.shrink(excluded, child->maxCtas, impl));
          child->rank = (*impl)->rank();
          child->nranks = (*impl)->size();
          return Status::kSuccess;
        });
      });
}

NCCL_API(const char*, ncclGetErrorString, (ncclResult_t result), result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
    case ncclTimeout:
      return "timeout";
    default:
      return "unknown result code";
  }
}

// The calling thread's last error; failing that, the initialisation error of `comm` (a non-blocking
// initialisation fails on a thread of its own); failing that, the process's last warning, as stock NCCL
// gives. Stock ignores `comm`, so any pointer may come: it is read only if it is a handle of ours.
NCCL_API(const char*, ncclGetLastError, (ncclComm_t comm), comm) {
  const char* text = mscclpp_nccl::lastError();
  if (text[0] != '\0') return text;
  if (comm != nullptr)
    allocatedComms().read(comm, [&] {
      // initError is written before initResult turns to the error, and never after.
      const ncclResult_t init = comm->initResult.load();
      if (init != ncclSuccess && init != ncclInProgress) text = comm->initError.c_str();
    });
  return text[0] != '\0' ? text : mscclpp_nccl::lastWarning();
}
