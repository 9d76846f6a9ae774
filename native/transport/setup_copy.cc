#include "native/transport/setup_copy.h"

#include <cuda_runtime.h>

#include "native/transport/cuda_check.h"

namespace mscclpp_nccl {
namespace {

// Runs `issue` on a new non-blocking stream and waits for that stream only.
template <typename Issue>
Status onOwnStream(Issue issue) {
  cudaStream_t stream = nullptr;
  MSCCLPP_CUDA_TRY(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaError_t err = issue(stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);
  cudaStreamDestroy(stream);
  MSCCLPP_CUDA_TRY(err);
  return Status::kSuccess;
}

}  // namespace

Status zeroDeviceMemory(void* dst, size_t bytes) {
  return onOwnStream([&](cudaStream_t stream) { return cudaMemsetAsync(dst, 0, bytes, stream); });
}

Status copyToDevice(void* dst, const void* src, size_t bytes) {
  return onOwnStream(
      [&](cudaStream_t stream) { return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream); });
}

}  // namespace mscclpp_nccl
