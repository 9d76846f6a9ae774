// The path every collective and point-to-point call takes after its own argument checks (which
// include checkReadyComm): the stream check, group deferral, device selection, then the native call.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <mutex>
#include <shared_mutex>

#include "native/common/data_type.h"
#include "shim/comm_handle.h"
#include "shim/group.h"

// Checks that `stream` belongs to the communicator's device.
ncclResult_t checkStream(ncclComm* comm, cudaStream_t stream, const char* function);

// Checks a datatype and that `count` elements of it fit in size_t bytes.
ncclResult_t checkTypeAndCount(ncclDataType_t type, size_t count, const char* function);

// Runs `launch(Communicator&)` on the comm now, or at ncclGroupEnd inside a group. `launch` must
// capture everything by value: it may run after the caller's arguments are gone.
template <typename Launch>
ncclResult_t enqueue(ncclComm* comm, cudaStream_t stream, const char* function, Launch launch) {
  NCCL_TRY(checkStream(comm, stream, function));
  // The comm may be aborted or destroyed before queued work runs: `impl` is checked under the lock.
  auto run = [comm, launch]() -> ncclResult_t {
    return toNccl(withImpl(comm, "comm was aborted or destroyed", [&](mscclpp_nccl::Communicator& impl) {
      MSCCLPP_TRY(impl.asyncError());
      DeviceGuard guard(comm->device);
      return launch(impl);
    }));
  };
  if (groupDepth() > 0) {
    deferToGroupEnd(run, /*concurrent=*/false);
    return ncclSuccess;
  }
  return run();
}
