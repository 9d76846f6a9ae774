// The one way the algorithms launch their kernels: a grid, and whether the kernel may start while the
// previous kernel of the stream still runs (programmatic dependent launch, see
// native/device/dependent_launch.cuh). Included by the kernels' .cu files (and kernel_launch.cc).
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstddef>

#include "native/common/logging.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

// The rounds of a kernel's loop, which counts in int, for `work` units at `perRound` a round. A call that
// needs more fails: cut to int, the count could wrap to zero or below and the call return success
// having moved nothing.
inline Status kernelRounds(size_t work, size_t perRound, const char* algorithm, int* rounds) {
  if (perRound == 0) return fail(Status::kInternalError, "%s: a round moves nothing", algorithm);
  const size_t needed = work / perRound + (work % perRound != 0);
  if (needed > static_cast<size_t>(INT_MAX))
    return fail(Status::kInvalidArgument,
                "%s: the message needs %zu rounds, more than its kernel counts (%d): use a larger chunk, "
                "more blocks or another algorithm",
                algorithm, needed, INT_MAX);
  *rounds = static_cast<int>(needed);
  return Status::kSuccess;
}

// Launches `kernel` (a __global__ function's address) with its parameters packed as for
// cudaLaunchKernel: one pointer to each, in order. The body of launchKernel below, kept out of the
// template so that a kernel costs no code but its packing.
cudaError_t launchPacked(const void* kernel, int blocks, int threads, bool early, bool programmatic,
                         cudaStream_t stream, void** params);

// Launches kernel<<<blocks, threads, 0, stream>>>(args..., early), early when `early`, and with the
// early-launch attribute where `programmatic` and mayCarryEarlyAttribute allow; returns the launch's
// error. Every kernel takes `bool early` last and passes it to enterKernel(), which then lets the next
// kernel start early too.
template <typename... Params, typename... Args>
cudaError_t launchKernel(void (*kernel)(Params...), int blocks, int threads, bool early, bool programmatic,
                         cudaStream_t stream, const Args&... args) {
  // Each argument converted to its parameter's type first, as a <<<>>> launch converts it.
  return [&](Params... converted) {
    void* params[] = {&converted...};
    return launchPacked(reinterpret_cast<const void*>(kernel), blocks, threads, early, programmatic, stream,
                        params);
  }(args..., early);
}

// The Status of a launch of `algorithm`'s kernel that returned `err`.
inline Status launched(cudaError_t err, const char* algorithm) {
  if (err == cudaSuccess) return Status::kSuccess;
  return fail(Status::kCudaError, "%s launch failed: %s", algorithm, cudaGetErrorString(err));
}

}  // namespace mscclpp_nccl
