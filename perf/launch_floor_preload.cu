// The harness's floor for a small collective: preloaded ahead of a real libnccl.so.2, this replaces
// ncclAllReduce with the launch of an empty one-block kernel on the caller's stream and leaves every
// other function to the library behind it. nccl-tests all_reduce then times nothing but its own loop,
// the launches and the stream's drain, eager and in graphs, which no library's all_reduce can beat.
// The kernel enters as the library's kernels do (enterKernel) and is launched early (programmatic
// dependent launch), as they are; with LAUNCH_FLOOR_EARLY=0 it is launched plainly, as stock NCCL's are.
// LAUNCH_FLOOR_THREADS sets its block's threads (32 unless set): the library's packet kernels take 512.
// LAUNCH_FLOOR_SPIN_NS makes the kernel busy for that long after it entered (0 unless set): whether a
// kernel's own time adds to the harness's period or hides behind the launches.
// Build: nvcc -O2 -arch=sm_90 -cudart shared -shared -Xcompiler -fPIC -I. -I include \
//        -o build/launch_floor.so perf/launch_floor_preload.cu
// Run:   LD_PRELOAD=build/launch_floor.so:LIB all_reduce_perf -b 8 -e 8 ...
#include <cuda_runtime.h>

#include <cstdlib>

#include "native/device/dependent_launch.cuh"
#include "nccl.h"

namespace {

__global__ void emptyCollective(bool early, unsigned spinNs) {
  mscclpp_nccl::enterKernel(early);
  if (spinNs == 0) return;
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  while (now - start < spinNs);
}

int setting(const char* name, int unset) {
  const char* value = std::getenv(name);
  return value == nullptr ? unset : std::atoi(value);
}

}  // namespace

extern "C" __attribute__((visibility("default"))) ncclResult_t ncclAllReduce(const void*, void*, size_t,
                                                                             ncclDataType_t, ncclRedOp_t,
                                                                             ncclComm_t,
                                                                             cudaStream_t stream) {
  static const bool early = setting("LAUNCH_FLOOR_EARLY", 1) != 0;
  static const int threads = setting("LAUNCH_FLOOR_THREADS", 32);
  static const unsigned spinNs = static_cast<unsigned>(setting("LAUNCH_FLOOR_SPIN_NS", 0));
  cudaLaunchAttribute attribute = {};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(1);
  config.blockDim = dim3(threads);
  config.stream = stream;
  config.attrs = early ? &attribute : nullptr;
  config.numAttrs = early ? 1 : 0;
  return cudaLaunchKernelEx(&config, emptyCollective, early, spinNs) == cudaSuccess ? ncclSuccess
                                                                                    : ncclUnhandledCudaError;
}
