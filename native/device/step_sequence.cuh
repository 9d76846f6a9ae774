// The per-communicator step counter that makes packet flags unique and graph replays correct.
//
// Each kernel reads the counter when it starts, uses flags base+1 .. base+steps, and its last block to
// finish advances the counter by `steps`. The counter lives in device memory and only kernels touch
// it, so a captured CUDA graph replays with fresh flags every time. Kernels of one communicator run in
// stream order, so the next kernel always sees the advanced value.
//
// The same last block also publishes the call's ticket (nonzero for eager calls): a call of the
// communicator on another stream waits for it with one stream memory operation, where an event
// recorded after every call would cost host time and break early launch between kernels.
#pragma once

#include <cstdint>

#include "native/device/device_types.h"

namespace mscclpp_nccl {

// Called by every thread at kernel start; returns the base step (uniform across the grid).
__device__ __forceinline__ uint64_t beginSteps(const StepCounter& counter) {
  return *const_cast<volatile uint64_t*>(counter.value);
}

// Called by every thread at kernel end: true in thread 0 of the last block to finish, once every block's
// writes are visible (the blocks-done count is then reset for the next kernel).
__device__ __forceinline__ bool lastBlockToFinish(const StepCounter& counter) {
  __syncthreads();
  if (threadIdx.x != 0) return false;
  __threadfence();
  if (atomicAdd(counter.blocksDone, 1u) != gridDim.x - 1) return false;
  *counter.blocksDone = 0;
  return true;
}

// Releases a call on another stream that waits for `ticket` (0: none waits): after everything before.
__device__ __forceinline__ void publishTicket(const StepCounter& counter, uint64_t ticket) {
  __threadfence();
  if (ticket != 0) *const_cast<volatile uint64_t*>(counter.ticket) = ticket;
}

// Called by every thread at kernel end, on every path (an abandoned wait included): a call on another
// stream may be waiting for `ticket`.
__device__ __forceinline__ void endSteps(const StepCounter& counter, uint64_t base, uint64_t steps,
                                         uint64_t ticket) {
  if (!lastBlockToFinish(counter)) return;
  *const_cast<volatile uint64_t*>(counter.value) = base + steps;
  publishTicket(counter, ticket);  // after the new step count too
}

// The same for a kernel that takes no steps of the counter (point-to-point channels count their own).
__device__ __forceinline__ void endCall(const StepCounter& counter, uint64_t ticket) {
  if (lastBlockToFinish(counter)) publishTicket(counter, ticket);
}

}  // namespace mscclpp_nccl
