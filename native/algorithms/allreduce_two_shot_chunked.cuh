// The two-shot chunked all-reduce's schedule as a device function: its own kernel
// (allreduce_two_shot_chunked.cu) runs it, and so does the mapped zero-copy kernel
// (allreduce_mapped.cu) when its ranks agree on scratch. Included by .cu files only.
#pragma once

#include "native/algorithms/allreduce.h"
#include "native/algorithms/lane_kernel.cuh"
#include "native/algorithms/packet_kernel.cuh"

namespace mscclpp_nccl {

// The input is cut into nranks segments of `segmentBytes` (a multiple of 16, so every segment keeps
// the buffers' alignment); rank r owns segment r. Each round, block b handles bytes
// [first, first + chunkBytes) of every segment:
//   reduce-scatter: write that chunk of segment p into peer p's slot;
//   reduce: combine this rank's chunk with the peers' in rank order, store it, and write it into
//           every peer's next slot in the same pass;
//   all-gather: store the peers' reduced chunks.
// Every rank's result is the one its owner computed, so all ranks hold the same bits.
// Blocks from schedule.blocks on take no part (a mapped kernel's grid may be larger).
template <typename T, typename Op>
__device__ __forceinline__ void allReduceTwoShotChunked(const LaneComm& comm, const AllReduceArgs& args,
                                                        size_t segmentBytes, const LaneSchedule& schedule) {
  if (static_cast<int>(blockIdx.x) >= schedule.blocks) return;
  const size_t chunkBytes = schedule.chunkBytes;
  __shared__ LaneSlots slots;
  LaneBlock lane(comm, slots);
  const int me = comm.rank;
  const size_t bytes = args.count * sizeof(T);
  const bool scale = args.op.scaling.preMultiply;
  const auto scalar = scale ? loadScalar<T>(args.op.scaling) : typename ElementTraits<T>::Acc(1);
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  auto everyPeer = [](int) { return true; };
  auto lengthIn = [&](int segment, size_t first) -> size_t {
    size_t start = segment * segmentBytes + first;
    size_t end = min(bytes, (segment + 1) * segmentBytes);
    return start < end ? min(end - start, chunkBytes) : 0;
  };

  for (int round = 0; round < schedule.rounds; ++round) {
    const size_t first = (static_cast<size_t>(round) * schedule.blocks + blockIdx.x) * chunkBytes;
    if (first >= segmentBytes) break;  // the same on every rank: lanes stay in step

    if (!lane.acquireSend(everyPeer)) return;
    for (int k = 1; k < comm.nranks; ++k) {
      const int peer = peerAfter(me, k, comm.nranks);
      const size_t n = lengthIn(peer, first);
      copyChunk<T>(slotChunk(lane.sendSlot(peer), n), userChunk(send + peer * segmentBytes + first, n), n,
                   scale, scalar);
    }
    lane.postSend(everyPeer);

    if (!lane.acquireRecv(everyPeer) || !lane.acquireSend(everyPeer)) return;
    const size_t offset = me * segmentBytes + first;
    reduceChunk<T, Op>(lane, send + offset, recv + offset, lengthIn(me, first), scale, scalar,
                       args.op.scaling.postDivisor, true);
    lane.releaseRecv(everyPeer);
    lane.postSend(everyPeer);

    if (!lane.acquireRecv(everyPeer)) return;
    for (int k = 1; k < comm.nranks; ++k) {
      const int peer = peerBefore(me, k, comm.nranks);
      const size_t n = lengthIn(peer, first);
      copyChunk<T>(userChunk(recv + peer * segmentBytes + first, n), slotChunk(lane.recvSlot(peer), n), n,
                   false, scalar);
    }
    lane.releaseRecv(everyPeer);
  }
}

}  // namespace mscclpp_nccl
