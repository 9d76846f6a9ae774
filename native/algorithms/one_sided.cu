// The kernels of one-sided signals (native/algorithms/one_sided.h): one thread publishes a count; one
// thread per source rank waits for its total.
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/one_sided.h"
#include "native/device/dependent_launch.cuh"
#include "native/device/semaphore.cuh"

namespace mscclpp_nccl {
namespace {

__global__ void signalPublishKernel(uint64_t* counter, uint64_t value, bool early) {
  enterKernel(early);  // the stream's earlier work (the put's copy) has completed
  semaphoreSignal(counter, value);
}

__global__ void signalWaitKernel(const uint64_t* counters, SignalTargets targets, int nranks,
                                 WaitControl control, bool early) {
  enterKernel(early);
  const int source = static_cast<int>(threadIdx.x);
  if (source >= nranks || targets.total[source] == 0) return;
  BoundedWait wait(control);
  semaphoreWait(counters + source, targets.total[source], wait, source);
}

}  // namespace

Status launchSignalPublish(uint64_t* counter, uint64_t value, cudaStream_t stream) {
  return launched(launchKernel(signalPublishKernel, 1, 1, false, false, stream, counter, value), "signal");
}

Status launchSignalWait(const uint64_t* counters, const SignalTargets& targets, int nranks,
                        const WaitControl& control, cudaStream_t stream) {
  const int threads = (nranks + 31) / 32 * 32;
  return launched(
      launchKernel(signalWaitKernel, 1, threads, false, false, stream, counters, targets, nranks, control),
      "signal wait");
}

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
