// Programmatic dependent launch (sm_90 and later). Back-to-back collectives on one stream otherwise pay
// the GPU's kernel launch in full between them; with it, the next kernel is scheduled while this one
// still waits for its peers and parks in enterKernel() until this one has finished.
//
// Every kernel calls enterKernel() before it touches memory. Its wait returns only when the previous
// kernel of the stream has completed and its writes are visible, so early launch never lets a kernel
// read stale data (a previous kernel that does not opt in simply makes the wait return at once, after
// ordinary stream order). A kernel launched early (`early`, which launchKernel passes as every kernel's
// last parameter) also lets the next kernel start early; others do not, so that a running kernel and a
// parked one never hold more SMs than the rank's share (AlgorithmSelector::earlyLaunchBlocks). A larger
// grid may carry the attribute too, for its cheaper launch, only after a kernel that does not let it
// start early (kernel_launch.h). A caller's
// kernel that follows ours with the same launch attribute may start early too, and must then wait with
// cudaGridDependencySynchronize() before it reads our output, as CUDA requires of any such kernel.
#pragma once

#include "native/device/device_types.h"

namespace mscclpp_nccl {

__device__ __forceinline__ void enterKernel(bool early) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (early) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace mscclpp_nccl
