// The per-communicator step counter that makes packet flags unique and graph replays correct.
//
// Each kernel reads the counter when it starts, uses flags base+1 .. base+steps, and its last block to
// finish advances the counter by `steps`. The counter lives in device memory and only kernels touch
// it, so a captured CUDA graph replays with fresh flags every time. Kernels of one communicator run in
// stream order, so the next kernel always sees the advanced value.
#pragma once

#include <cstdint>

#include "native/device/device_types.h"

namespace mscclpp_nccl {

// Called by every thread at kernel start; returns the base step (uniform across the grid).
__device__ __forceinline__ uint64_t beginSteps(const StepCounter& counter) {
  return *const_cast<volatile uint64_t*>(counter.value);
}

// Called by every thread at kernel end.
__device__ __forceinline__ void endSteps(const StepCounter& counter, uint64_t base, uint64_t steps) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  __threadfence();
  if (atomicAdd(counter.blocksDone, 1u) == gridDim.x - 1) {
    *counter.blocksDone = 0;
    *const_cast<volatile uint64_t*>(counter.value) = base + steps;
    __threadfence();
  }
}

}  // namespace mscclpp_nccl
