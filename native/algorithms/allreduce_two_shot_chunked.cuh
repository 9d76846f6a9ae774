// The two-shot chunked all-reduce's schedule as a device function: its own kernel
// (allreduce_two_shot_chunked.cu) runs it, and so does the mapped zero-copy kernel
// (allreduce_mapped.cu) when its ranks agree on scratch. Included by .cu files only.
#pragma once

#include "native/algorithms/allreduce.h"
#include "native/primitives/chunk_primitives.cuh"
#include "native/primitives/packet_primitives.cuh"

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
__device__ __forceinline__ void allReduceTwoShotChunked(const ChunkComm& comm, const AllReduceArgs& args,
                                                        size_t segmentBytes, const ChunkSchedule& schedule) {
  if (static_cast<int>(blockIdx.x) >= schedule.blocks) return;
  const size_t chunkBytes = schedule.chunkBytes;
  __shared__ ChunkSlots slots;
  ChunkBlock channels(comm, slots);
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
    if (first >= segmentBytes) break;  // the same on every rank: channels stay in step

    if (!channels.acquireSend(everyPeer)) return;
    for (int k = 1; k < comm.nranks; ++k) {
      const int peer = peerAfter(me, k, comm.nranks);
      const size_t n = lengthIn(peer, first);
      copyChunk<T>(slotChunk(channels.sendSlot(peer), n), userChunk(send + peer * segmentBytes + first, n), n,
                   scale, scalar);
    }
    channels.postSend(everyPeer);

    if (!channels.acquireRecv(everyPeer) || !channels.acquireSend(everyPeer)) return;
    const size_t offset = me * segmentBytes + first;
    reduceChunk<T, Op>(channels, send + offset, recv + offset, lengthIn(me, first), scale, scalar,
                       args.op.scaling.postDivisor, true);
    channels.releaseRecv(everyPeer);
    channels.postSend(everyPeer);

    if (!channels.acquireRecv(everyPeer)) return;
    for (int k = 1; k < comm.nranks; ++k) {
      const int peer = peerBefore(me, k, comm.nranks);
      const size_t n = lengthIn(peer, first);
      copyChunk<T>(userChunk(recv + peer * segmentBytes + first, n), slotChunk(channels.recvSlot(peer), n), n,
                   false, scalar);
    }
    channels.releaseRecv(everyPeer);
  }
}

}  // namespace mscclpp_nccl
