// The one way the algorithms launch their kernels: a grid, and whether the kernel may start while the
// previous kernel of the stream still runs (programmatic dependent launch, see
// native/device/dependent_launch.cuh). Included by .cu files only.
#pragma once

#include <cuda_runtime.h>

#include <atomic>

namespace mscclpp_nccl {

// False once a launch with the early-launch attribute failed: a driver or an MPS server that does not
// support it then gets plain launches from every communicator of the process.
inline std::atomic<bool>& earlyLaunchWorks() {
  static std::atomic<bool> works{true};
  return works;
}

// Launches kernel<<<blocks, threads, 0, stream>>>(args...), early when `early`; returns the launch's error.
template <typename... Params, typename... Args>
cudaError_t launchKernel(void (*kernel)(Params...), int blocks, int threads, bool early, cudaStream_t stream,
                         const Args&... args) {
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(blocks);
  config.blockDim = dim3(threads);
  config.stream = stream;
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  if (early && earlyLaunchWorks().load(std::memory_order_relaxed)) {
    config.attrs = &attribute;
    config.numAttrs = 1;
    if (cudaLaunchKernelEx(&config, kernel, args...) == cudaSuccess) return cudaSuccess;
    cudaGetLastError();  // not sticky: clear it and fall back to a plain launch for good
    earlyLaunchWorks().store(false, std::memory_order_relaxed);
    config.attrs = nullptr;
    config.numAttrs = 0;
  }
  return cudaLaunchKernelEx(&config, kernel, args...);
}

}  // namespace mscclpp_nccl
