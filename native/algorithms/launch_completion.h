// A call's launch-completion event (ncclCollConfig_t::launchCompletionEvent), which NCCL fires once the
// call's kernel has begun on every block, so that work waiting on it may run beside the collective.
// The shim records the event on the stream before the call's work (shim/arg_checks.h), which fires no
// later than NCCL's; while a LaunchCompletion lives, every kernel its thread launches outside a graph
// capture (kernel_launch.cc) also carries the event as CUDA's launch-completion attribute, whose record
// supersedes that one: the event then fires where NCCL's does.
#pragma once

#include <cuda_runtime.h>

namespace mscclpp_nccl {

class LaunchCompletion {
 public:
  // `event` null, or `stream` capturing: the kernels carry nothing (a capture keeps the shim's record).
  LaunchCompletion(cudaEvent_t event, cudaStream_t stream);
  ~LaunchCompletion();
  LaunchCompletion(const LaunchCompletion&) = delete;
  LaunchCompletion& operator=(const LaunchCompletion&) = delete;

  // For kernel_launch.cc: the event that the thread's next launch should carry (null: none, or one that
  // the attribute refused before: it takes only events with timing off).
  static cudaEvent_t eventToCarry();
  // The launch failed with that event and succeeded without it.
  static void refused();

 private:
  cudaEvent_t event_ = nullptr;
  LaunchCompletion* outer_;  // the scope that was active when this one opened
};

}  // namespace mscclpp_nccl
