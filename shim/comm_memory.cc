// The communicator's own device memory: ncclCommSuspend releases it and ncclCommResume restores it (RL
// frameworks switch a GPU between training and inference between the two), and ncclCommMemStats says
// how much there is. Both are collective here: every rank's scratch is mapped by its peers, and an
// owner's memory returns to the driver only once every mapping of it is closed.
#include "native/common/status.h"
#include "shim/arg_checks.h"
#include "shim/comm_handle.h"

using mscclpp_nccl::Communicator;
using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

NCCL_API(ncclResult_t, ncclCommSuspend, (ncclComm_t comm, int flags), comm, flags) {
  NCCL_TRY(checkReadyComm(comm, "ncclCommSuspend"));
  if ((flags & ~NCCL_SUSPEND_MEM) != 0)
    return toNccl(fail(Status::kInvalidArgument,
                       "ncclCommSuspend: unknown flags 0x%x (NCCL_SUSPEND_MEM is the only one)", flags));
  const bool releaseMemory = (flags & NCCL_SUSPEND_MEM) != 0;
  if (releaseMemory) {
    DeviceGuard guard(comm->device);
    NCCL_TRY(toNccl(withImpl(comm, "ncclCommSuspend: comm is gone", [&](Communicator& c) {
      const Status status = c.suspend();
      // A suspend that failed after its scratch was freed (a peer lost at the last barrier) still
      // leaves the comm suspended: no call may reach the freed scratch.
      if (c.suspended()) comm->suspended.store(true);
      return status;
    })));
  }
  // Without NCCL_SUSPEND_MEM nothing is released; calls wait for ncclCommResume all the same.
  comm->suspended.store(true);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommResume, (ncclComm_t comm), comm) {
  NCCL_TRY(checkManageableComm(comm, "ncclCommResume"));
  if (!comm->suspended.load())
    return toNccl(fail(Status::kInvalidUsage, "ncclCommResume: comm is not suspended"));
  DeviceGuard guard(comm->device);
  NCCL_TRY(toNccl(withImpl(comm, "ncclCommResume: comm is gone",
                           [](Communicator& c) { return c.suspended() ? c.resume() : Status::kSuccess; })));
  comm->suspended.store(false);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommMemStats, (ncclComm_t comm, ncclCommMemStat_t stat, uint64_t* value), comm,
         stat, value) {
  NCCL_TRY(checkManageableComm(comm, "ncclCommMemStats"));
  if (value == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclCommMemStats: value is NULL"));
  std::shared_lock<std::shared_mutex> lock(comm->implMutex);
  const Communicator* impl = comm->impl.get();
  const uint64_t total = impl ? impl->deviceBytes() : 0;
  const uint64_t releasable = impl && !impl->suspended() ? impl->releasableBytes() : 0;
  switch (stat) {
    case ncclStatGpuMemSuspend:
      *value = releasable;
      return ncclSuccess;
    case ncclStatGpuMemSuspended:
      *value = comm->suspended.load() ? 1 : 0;
      return ncclSuccess;
    case ncclStatGpuMemPersist:
      *value = total - releasable;
      return ncclSuccess;
    case ncclStatGpuMemTotal:
      *value = total;
      return ncclSuccess;
    default:
      return toNccl(
          fail(Status::kInvalidArgument, "ncclCommMemStats: unknown stat %d", static_cast<int>(stat)));
  }
}
