// Device side of zero-copy calls on mapped buffers (transport/mapped_allocations.h): every rank posts
// how its peers find its buffers with its arrival at the first barrier, and all blocks of all ranks
// read the same posts, so they all go zero-copy or all run the call's chunked (scratch) schedule in the
// same kernel. Included by .cu files only.
#pragma once

#include <cstring>
#include <type_traits>

#include "native/algorithms/zero_copy.h"
#include "native/device/peer_barrier.cuh"

namespace mscclpp_nccl {

enum class MappedAgreement { kZeroCopy, kScratch, kAbandoned };

__device__ __forceinline__ MappedCall loadMappedCall(const MappedCall* slot) {
  const volatile uint64_t* words = reinterpret_cast<const volatile uint64_t*>(slot);
  uint64_t value[sizeof(MappedCall) / sizeof(uint64_t)];
  for (size_t i = 0; i < sizeof(MappedCall) / sizeof(uint64_t); ++i) value[i] = words[i];
  MappedCall call;
  memcpy(&call, value, sizeof(call));
  return call;
}

// Rank r's buffer as mapped here. The table entry was written before r learned that it is mapped, so
// it is in place whenever r's description says ready.
__device__ __forceinline__ char* mappedBuffer(const ZeroCopyComm& comm, int r, const MappedBuffer& buffer) {
  const volatile uint64_t* base = reinterpret_cast<const volatile uint64_t*>(
      &comm.mappedTable[static_cast<size_t>(r) * kMaxMappedAllocations + buffer.index].base);
  return reinterpret_cast<char*>(*base) + buffer.offset;
}

// Posts `mine` to every peer and arrives at call `call`'s first barrier; then, if every rank's buffers
// are mapped by every peer, calls see(r, theirs) for every rank (own: `mine`) and returns kZeroCopy.
template <typename See>
__device__ __forceinline__ MappedAgreement agreeOnMappedCall(const ZeroCopyComm& comm, const MappedCall& mine,
                                                             uint64_t call, BoundedWait& wait, See see) {
  const int me = comm.rank, nranks = comm.nranks;
  for (int peer = threadIdx.x; peer < nranks; peer += blockDim.x)
    if (peer != me) *mappedCallSlot(comm.peerFlags[peer], nranks, blockIdx.x, me) = mine;
  if (!peerBarrier(comm.localFlags, comm.peerFlags, 0, me, nranks, call, wait))
    return MappedAgreement::kAbandoned;
  bool ready = true;
  for (int r = threadIdx.x; r < nranks; r += blockDim.x) {
    const MappedCall theirs =
        r == me ? mine : loadMappedCall(mappedCallSlot(comm.localFlags, nranks, blockIdx.x, r));
    ready = ready && theirs.send.ready && theirs.recv.ready;
    if (ready) see(r, theirs);
  }
  return __syncthreads_and(ready) ? MappedAgreement::kZeroCopy : MappedAgreement::kScratch;
}

// Runs run(std::true_type{}) when every thread of the block says `aligned` (each buffer of the block's part
// takes whole 16-byte accesses), else run(std::false_type{}): the reduce loop is compiled once for each,
// the aligned form as plain vector loads and stores. Every thread of the block calls it.
template <typename Run>
__device__ __forceinline__ void withUnitAlignment(bool aligned, Run run) {
  if (__syncthreads_and(aligned))
    run(std::true_type{});
  else
    run(std::false_type{});
}

// The second barrier: no peer touches this rank's buffers any more.
__device__ __forceinline__ bool finishZeroCopyCall(const ZeroCopyComm& comm, uint64_t call,
                                                   BoundedWait& wait) {
  return peerBarrier(comm.localFlags, comm.peerFlags, zeroCopyFinishedAt(comm.nranks), comm.rank, comm.nranks,
                     call, wait);
}

// Counts call `call` as done on this block (the next call's barriers wait for call + 1).
__device__ __forceinline__ void endZeroCopyCall(const ZeroCopyComm& comm, uint64_t call) {
  if (threadIdx.x == 0) comm.calls[blockIdx.x] = call;
}

}  // namespace mscclpp_nccl
