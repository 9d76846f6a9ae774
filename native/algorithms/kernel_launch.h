// The one way the algorithms launch their kernels: a grid, and whether the kernel may start while the
// previous kernel of the stream still runs (programmatic dependent launch, see
// native/device/dependent_launch.cuh). Included by the kernels' .cu files (and kernel_launch.cc).
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <climits>
#include <cstddef>
#include <mutex>

#include "native/common/logging.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

// False once a launch failed with the early-launch attribute and succeeded without it: a driver or an
// MPS server that does not support it then gets plain launches from every communicator of the process.
inline std::atomic<bool>& earlyLaunchWorks() {
  static std::atomic<bool> works{true};
  return works;
}

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

// The early-launch attribute on a launch lets the kernel start once the stream's previous kernel lets
// it (its enterKernel() still waits for that kernel to finish). It also makes the launch itself cheaper:
// under MPS with 8 ranks, grids that are not launched early took 20-35% less eager time with it at 64 KB-4
// MB (perf/results/2026-12-02-h200-s13, run 5). A grid too large to start beside a running kernel may
// carry it only where the stream's previous kernel does not let its successor start early: one launched
// early would, and the two together could hold more than the rank's share of SMs. The lock serialises
// the decision with the launch, so that two threads launching on one stream are recorded in the order
// their kernels are queued.
std::mutex& launchLock();
// Under launchLock(): whether a grid launched early (`early`) or not may carry the attribute on `stream`,
// which is then recorded as ending in such a kernel. The record is by stream and graph capture (a
// capture orders its own kernels); a stream it does not know, and the default streams (shared between
// threads or devices), may end in any kernel, so only early grids carry it there.
bool mayCarryEarlyAttribute(cudaStream_t stream, bool early);

// Launches kernel<<<blocks, threads, 0, stream>>>(args..., early), early when `early`, and with the
// early-launch attribute where `programmatic` and mayCarryEarlyAttribute allow; returns the launch's
// error. Every kernel takes `bool early` last and passes it to enterKernel(), which then lets the next
// kernel start early too.
template <typename... Params, typename... Args>
cudaError_t launchKernel(void (*kernel)(Params...), int blocks, int threads, bool early, bool programmatic,
                         cudaStream_t stream, const Args&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  std::lock_guard<std::mutex> lock(launchLock());
  const bool attributed = (early || programmatic) && mayCarryEarlyAttribute(stream, early);
  cudaError_t err = cudaSuccess;
  if (attributed && earlyLaunchWorks().load(std::memory_order_relaxed)) {
    config.attrs = &attribute;
    config.numAttrs = 1;
    if ((err = cudaLaunchKernelEx(&config, kernel, args..., early)) == cudaSuccess) return err;
    cudaGetLastError();  // a launch error is not sticky: clear it and try without the attribute
    config.attrs = nullptr;
    config.numAttrs = 0;
    err = cudaLaunchKernelEx(&config, kernel, args..., early);
    if (err == cudaSuccess) earlyLaunchWorks().store(false, std::memory_order_relaxed);  // only it failed
  } else {
    err = cudaLaunchKernelEx(&config, kernel, args..., early);
  }
  // A failed launch queued nothing, so the stream still ends in what ran before, perhaps a kernel
  // launched early: record it as such (only early grids carry the attribute there next).
  if (err != cudaSuccess) mayCarryEarlyAttribute(stream, true);
  return err;
}

// The Status of a launch of `algorithm`'s kernel that returned `err`.
inline Status launched(cudaError_t err, const char* algorithm) {
  if (err == cudaSuccess) return Status::kSuccess;
  return fail(Status::kCudaError, "%s launch failed: %s", algorithm, cudaGetErrorString(err));
}

}  // namespace mscclpp_nccl
