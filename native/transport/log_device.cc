// The [dev] field of log lines: the calling thread's current CUDA device, as stock NCCL prints it. Apart
// from native/common/logging.cc so that native/common builds without CUDA (the CPU test drivers).
#include <cuda_runtime_api.h>

namespace mscclpp_nccl {

int logCurrentDevice() {
  int device = 0;
  // No context is created; an error (no driver, no device, the runtime unloading at exit) prints 0.
  if (cudaGetDevice(&device) != cudaSuccess) return 0;
  return device;
}

}  // namespace mscclpp_nccl
