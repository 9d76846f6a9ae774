// Device side of zero-copy calls on mapped buffers (transport/mapped_allocations.h): every rank posts
// how its peers find its buffers with its arrival at the first barrier, and all blocks of all ranks
// read the same posts, so they all go zero-copy or all run the call's chunked (scratch) schedule in the
// same kernel. No rank touches a peer's buffer before the posts pass the checks of mapped_bounds.h.
// Included by .cu files only.
#pragma once

#include <cstdio>
#include <type_traits>

#include "native/algorithms/collective.h"
#include "native/algorithms/mapped_bounds.h"
#include "native/algorithms/zero_copy.h"
#include "native/device/peer_barrier.cuh"
#include "native/device/posted_words.cuh"

namespace mscclpp_nccl {

// kFailed: the posts failed a check (agreeOnMappedCall), the call raised an error and moves nothing.
enum class MappedAgreement { kZeroCopy, kScratch, kAbandoned, kFailed };

// What this rank posts for the call: how its peers find its buffers (`mine`, from the host) and the call as
// it was made here.
__device__ __forceinline__ MappedCall postedCall(MappedCall mine, Collective collective, uint64_t bytes,
                                                 int root) {
  mine.bytes = bytes;
  mine.collective = static_cast<uint32_t>(collective);
  mine.root = root;
  return mine;
}

// Rank r's buffer as mapped here, which this rank touches up to `reach` bytes from its start (0: not at
// all); null where r's post does not allow that (mapped_bounds.h: checkMappedRange). The table entry was
// written before r learned that it is mapped, so it is in place whenever r's description says ready.
__device__ __forceinline__ char* mappedBuffer(const MappedRegion* mappedTable, int r,
                                              const MappedBuffer& buffer, uint64_t reach) {
  char* base = nullptr;
  const MappedRegion* row = mappedTable + static_cast<size_t>(r) * kMaxMappedAllocations;
  if (checkMappedRange(row, buffer.index, buffer.offset, reach, &base) != MappedCheck::kOk) return nullptr;
  return base + buffer.offset;
}
__device__ __forceinline__ char* mappedBuffer(const ZeroCopyComm& comm, int r, const MappedBuffer& buffer,
                                              uint64_t reach) {
  return mappedBuffer(comm.mappedTable, r, buffer, reach);
}

// Raises `error` for this rank's communicator as BoundedWait does (native/device/bounded_wait.cuh): the
// host reports the first error as the communicator's asynchronous error, and the communicator's later
// kernels give up at their first wait. True on the thread whose error came first.
__device__ __forceinline__ bool raiseKernelError(const WaitControl& control, KernelError error) {
  const bool first = atomicCAS(control.errorFlag, kKernelOk, error) == kKernelOk;
  if (first) __threadfence_system();
  *const_cast<volatile int*>(control.stopped) = 1;
  return first;
}

// What the thread that raised an error says about rank r's post (once per communicator): scalars only, so
// that the rare call keeps the posts out of local memory.
inline __device__ __noinline__ void reportMappedError(MappedCheck why, int me, int r, uint64_t theirBytes,
                                                      uint64_t myBytes) {
  if (why == MappedCheck::kCountsDiffer)
    printf(
        "mscclpp-nccl: rank %d: rank %d called this collective with %llu bytes, this rank with %llu: counts "
        "differ between ranks\n",
        me, r, static_cast<unsigned long long>(theirBytes), static_cast<unsigned long long>(myBytes));
  else if (why == MappedCheck::kCallsDiffer)
    printf("mscclpp-nccl: rank %d: rank %d called another collective, or gave another root\n", me, r);
  else
    printf(
        "mscclpp-nccl: rank %d: rank %d posted a buffer outside the allocation mapped for it here (or one "
        "not mapped): the call fails\n",
        me, r);
}

// The first barrier: every peer's kernel has started, so the stream work before it is done.
__device__ __forceinline__ bool arriveAtZeroCopyCall(const ZeroCopyComm& comm, uint64_t call,
                                                     BoundedWait& wait) {
  return peerBarrier(comm.localFlags, comm.peerFlags, 0, comm.rank, comm.nranks, call, wait,
                     peerScope(comm.oneGpu));
}

// The second barrier: no peer touches this rank's buffers any more.
__device__ __forceinline__ bool finishZeroCopyCall(const ZeroCopyComm& comm, uint64_t call,
                                                   BoundedWait& wait) {
  return peerBarrier(comm.localFlags, comm.peerFlags, zeroCopyFinishedAt(comm.nranks), comm.rank, comm.nranks,
                     call, wait, peerScope(comm.oneGpu));
}

// Posts `mine` (postedCall) to every peer and arrives at call `call`'s first barrier; then reads every
// rank's post (own: `mine`) and decides, alike on every rank since all read the same posts:
// - some rank was called otherwise (compareMappedCalls): raises kKernelCallsDiffer and returns kFailed;
//   no rank moves anything (the scratch schedule's counts would not match either);
// - some rank's buffers are not mapped by every peer yet: kScratch;
// - else kZeroCopy, once see(r, theirs) has set the block's pointers to every rank r's buffers.
// see() says whether r's post lets this rank touch what it will (mappedBuffer). The other ranks check what
// they touch against their own tables, so where a post fails here only, they may be running the call
// zero-copy: this rank touches nothing, waits at the second barrier until they are done with its
// buffers, raises kKernelBadPeerData and returns kFailed.
// `inWindows`: every rank's buffers lie in symmetric windows, where each rank found its peers' already (and
// the promise of such windows is that every rank's call is the same): the ranks only arrive, post nothing
// and agree on zero-copy. (One barrier in the kernel either way: two inlined copies cost the reduce loop
// registers.)
template <typename See>
__device__ __forceinline__ MappedAgreement agreeOnMappedCall(const ZeroCopyComm& comm, const MappedCall& mine,
                                                             uint64_t call, BoundedWait& wait, bool inWindows,
                                                             See see) {
  const int me = comm.rank, nranks = comm.nranks;
  for (int peer = threadIdx.x; peer < nranks && !inWindows; peer += blockDim.x)
    if (peer != me) *mappedCallSlot(comm.peerFlags[peer], nranks, blockIdx.x, me) = mine;
  if (!arriveAtZeroCopyCall(comm, call, wait)) return MappedAgreement::kAbandoned;
  if (inWindows) return MappedAgreement::kZeroCopy;
  bool same = true, ready = true, fits = true;
  int offender = -1;  // a rank whose post failed see() on this thread
  for (int r = threadIdx.x; r < nranks; r += blockDim.x) {
    const MappedCall theirs =
        r == me ? mine : loadPosted<MappedCall>(mappedCallSlot(comm.localFlags, nranks, blockIdx.x, r));
    const MappedCheck match = compareMappedCalls(mine, theirs);
    if (match != MappedCheck::kOk) {
      same = false;
      if (raiseKernelError(comm.wait, kKernelCallsDiffer))
        reportMappedError(match, me, r, theirs.bytes, mine.bytes);
    }
    ready = ready && theirs.send.ready && theirs.recv.ready;
    if (same && ready && !see(r, theirs)) {
      fits = false;
      offender = r;
    }
  }
  if (!__syncthreads_and(same)) return MappedAgreement::kFailed;
  if (!__syncthreads_and(ready)) return MappedAgreement::kScratch;
  if (__syncthreads_and(fits)) return MappedAgreement::kZeroCopy;
  finishZeroCopyCall(comm, call, wait);
  if (offender >= 0 && raiseKernelError(comm.wait, kKernelBadPeerData))
    reportMappedError(MappedCheck::kOutOfBounds, me, offender, 0, 0);
  return MappedAgreement::kFailed;
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

// Counts call `call` as done on this block (the next call's barriers wait for call + 1).
__device__ __forceinline__ void endZeroCopyCall(const ZeroCopyComm& comm, uint64_t call) {
  if (threadIdx.x == 0) comm.calls[blockIdx.x] = call;
}

}  // namespace mscclpp_nccl
