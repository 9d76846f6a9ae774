// A barrier between the blocks of one index on every rank, over monotonic semaphores in each rank's
// memory: block b of rank s signals slot [b][s] of every peer's flags, then waits until its own slot
// [b][p] of every peer p reaches the same value. Every store the block made before it is visible to the
// peers after it (the semaphores' release/acquire, at system scope or, on one GPU, device scope).
#pragma once

#include <cstdint>

#include "native/device/bounded_wait.cuh"
#include "native/device/semaphore.cuh"

namespace mscclpp_nccl {

// `localFlags`/`peerFlags[r]`: this barrier's [block][sender] array here and as mapped for rank r;
// `scope`: kDevice where every rank runs on this GPU. Returns false (on every thread) when a wait was
// abandoned.
__device__ __forceinline__ bool peerBarrier(uint64_t* localFlags, uint64_t* const* peerFlags,
                                            size_t flagOffset, int rank, int nranks, uint64_t value,
                                            BoundedWait& wait, MemoryScope scope) {
  __syncthreads();
  const size_t row = static_cast<size_t>(blockIdx.x) * nranks;
  for (int peer = threadIdx.x; peer < nranks; peer += blockDim.x)
    if (peer != rank) semaphoreSignal(peerFlags[peer] + flagOffset + row + rank, value, scope);
  bool ok = true;
  for (int peer = threadIdx.x; peer < nranks; peer += blockDim.x)
    if (peer != rank && ok)
      ok = semaphoreWait(localFlags + flagOffset + row + peer, value, wait, peer, scope);
  return __syncthreads_and(ok);
}

}  // namespace mscclpp_nccl
