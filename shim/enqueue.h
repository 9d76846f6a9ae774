// The path every collective and point-to-point call takes after its own argument checks (which
// include checkReadyComm): the stream check, group deferral, device selection, then the native call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <shared_mutex>

#include "native/algorithms/launch_completion.h"
#include "native/common/data_type.h"
#include "shim/arg_checks.h"
#include "shim/comm_handle.h"
#include "shim/group.h"

// Runs one call of `comm` in its call order: `body(Communicator&, cudaStream_t launch)` issues the
// work on streams[0], after the comm's previous call (whatever its stream), with streams[1..count)
// joined before and after it (NCCL's rule for a group that spans several streams).
template <typename Body>
ncclResult_t runInOrder(ncclComm* comm, const cudaStream_t* streams, size_t count, Body body) {
  // The comm may be aborted or destroyed before queued work runs: `impl` is checked under the lock.
  return toNccl(withImpl(comm, "comm was aborted or destroyed", [&](mscclpp_nccl::Communicator& impl) {
    MSCCLPP_TRY(impl.asyncError());
    // Work queued in a group before an ncclCommSuspend must not reach the freed scratch.
    if (impl.suspended())
      return mscclpp_nccl::fail(mscclpp_nccl::Status::kInvalidUsage, "comm is suspended (ncclCommSuspend)");
    DeviceGuard guard(comm->device);
    MSCCLPP_TRY(impl.beginCall(streams, count));
    const mscclpp_nccl::Status status = body(impl, streams[0]);
    const mscclpp_nccl::Status ended = impl.endCall(streams, count);  // even after a failure: keeps the order
    return mscclpp_nccl::ok(status) ? ended : status;
  }));
}

// What `model(const Communicator&)` says a queued call of `comm` would take (ncclGroupSimulateEnd), asked
// under the lock that keeps the native communicator alive; 0 where it is gone (aborted, destroyed).
template <typename Model>
double modeledOn(ncclComm* comm, const Model& model) {
  std::shared_lock<std::shared_mutex> lock(comm->implMutex);
  return comm->impl ? model(*comm->impl) : 0.0;
}

// Runs `launch(Communicator&, cudaStream_t)` now, or at ncclGroupEnd inside a group (then on the
// stream that the comm's group work is issued on). `launch` must capture everything by value.
// `launchEvent`: the call's ncclCollConfig_t launch-completion event, or null: recorded before the call's
// work (recordLaunchEvent), then carried by its kernels (native/algorithms/launch_completion.h), in a group
// when the group's work is launched.
// `model(const Communicator&)`: what the call would take, for a group that ncclGroupSimulateEnd ends
// (nullptr: nothing); a template parameter, so that a call outside a group builds no std::function.
template <typename Launch, typename Model = std::nullptr_t>
ncclResult_t enqueue(ncclComm* comm, cudaStream_t stream, const char* function, Launch launch,
                     cudaEvent_t launchEvent = nullptr, Model model = nullptr) {
  NCCL_TRY(checkStream(comm, stream, function));
  if (launchEvent != nullptr) NCCL_TRY(recordLaunchEvent(launchEvent, stream, function));
  auto launchWithEvent = [launch = std::move(launch), launchEvent](mscclpp_nccl::Communicator& impl,
                                                                   cudaStream_t on) {
    const mscclpp_nccl::LaunchCompletion completion(launchEvent, on);
    return launch(impl, on);
  };
  if (groupDepth() > 0) {
    deferToGroupEnd(comm, stream, std::move(launchWithEvent), std::move(model));
    return ncclSuccess;
  }
  return runInOrder(comm, &stream, 1, launchWithEvent);
}
