// The per-communicator step counters that make packet flags unique and graph replays correct.
//
// Block b of each kernel reads counter b when it starts, uses flags base+1 .. base+steps in its own
// block region of the scratch (packet_layout.h), and advances counter b by `steps` when it ends. Every
// rank launches the same grid for each call, so block b's steps agree across the ranks; no block reads
// another's counter, so none has to wait for the grid to end. The counters live in device memory and
// only kernels touch them, so a captured CUDA graph replays with fresh flags every time. Kernels of one
// communicator run in stream order, so the next kernel always sees the advanced values.
//
// An eager call's last block to finish also publishes the call's ticket: a call of the communicator on
// another stream waits for it with one stream memory operation, where an event recorded after every
// call would cost host time and break early launch between kernels. Only then does the grid count its
// finished blocks and fence their writes (in graphs a grid-wide count cost about 0.7 us a kernel on an
// H200 at 4 ranks, perf/nccl_timer.cu).
#pragma once

#include <cstdint>

#include "native/device/device_types.h"

namespace mscclpp_nccl {

// Called by every thread at kernel start; returns this block's base step (uniform across the block).
__device__ __forceinline__ uint64_t beginSteps(const StepCounter& counter) {
  return *const_cast<volatile uint64_t*>(counter.value + blockIdx.x);
}

// Thread 0's part of a kernel's end, after the block's closing barrier. `ticket` nonzero: the last block
// to finish publishes it once every block's writes are visible.
__device__ __forceinline__ void publishTicket(const StepCounter& counter, uint64_t ticket) {
  if (ticket == 0) return;
  __threadfence();
  // A lone block is its grid's last: skipping the count takes 0.5 us off each one-block call's ticket,
  // which cost 0.8 on an H200 (perf/packet_kernel_bench.cu).
  if (gridDim.x > 1) {
    if (atomicAdd(counter.blocksDone, 1u) != gridDim.x - 1) return;
    *counter.blocksDone = 0;  // for the next kernel
    __threadfence();
  }
  *const_cast<volatile uint64_t*>(counter.ticket) = ticket;
}

// Called by every thread at kernel end, on every path (an abandoned wait included).
__device__ __forceinline__ void endCall(const StepCounter& counter, uint64_t ticket) {
  __syncthreads();
  if (threadIdx.x == 0) publishTicket(counter, ticket);
}

// The same for a kernel that took `steps` steps from `base` (beginSteps). The counter advances only after
// the barrier: packet kernels have none before their first step, so a thread may reach here before
// another has read the base.
__device__ __forceinline__ void endSteps(const StepCounter& counter, uint64_t base, uint64_t steps,
                                         uint64_t ticket) {
  __syncthreads();
  if (threadIdx.x != 0) return;
  *const_cast<volatile uint64_t*>(counter.value + blockIdx.x) = base + steps;
  publishTicket(counter, ticket);
}

}  // namespace mscclpp_nccl
