// The chunked exchange's schedule as a device function: its own kernel (exchange_chunked.cu) runs it, and
// so does the mapped zero-copy kernel (exchange_zero_copy.cu) when its ranks agree on scratch. Included by
// .cu files only.
#pragma once

#include "native/algorithms/exchange.h"
#include "native/primitives/chunk_primitives.cuh"
#include "native/primitives/packet_primitives.cuh"

namespace mscclpp_nccl {

// The exchange of exchange_packet.cu in chunks: each round, block b moves bytes [first, first + n)
// of every range. It writes its chunk of range p into peer p's slot, then reads (or reduces) what the
// peers sent. Chunk channels carry their own flow control, so a rank only touches the channels it uses:
// no tokens.
// A block reads every range's chunk before it writes any, and no other block touches that chunk,
// so in-place calls are safe.
// Blocks from schedule.blocks on take no part (a mapped kernel's grid may be larger).
template <typename T, typename Op, bool kReduce>
__device__ __forceinline__ void exchangeChunked(const ChunkComm& comm, const ExchangeArgs& args,
                                                const ChunkSchedule& schedule) {
  if (static_cast<int>(blockIdx.x) >= schedule.blocks) return;
  const size_t chunkBytes = schedule.chunkBytes;
  __shared__ ChunkSlots slots;
  ChunkBlock channels(comm, slots);
  const int me = comm.rank;
  const bool scale = kReduce && args.op.scaling.preMultiply;
  const auto scalar = scale ? loadScalar<T>(args.op.scaling) : typename ElementTraits<T>::Acc(1);
  const char* src = static_cast<const char*>(args.src);
  char* dst = static_cast<char*>(args.dst);
  auto sendsTo = [&](int rank) { return peerSetHas(args.sendTo, rank, args.root); };
  auto receivesFrom = [&](int rank) { return peerSetHas(args.recvFrom, rank, args.root); };

  for (int round = 0; round < schedule.rounds; ++round) {
    const size_t first = (static_cast<size_t>(round) * schedule.blocks + blockIdx.x) * chunkBytes;
    if (first >= args.rangeBytes) break;  // the same on every rank: channels stay in step
    const size_t n = min(chunkBytes, args.rangeBytes - first);

    if (!channels.acquireSend(sendsTo)) return;
    for (int k = 1; k < comm.nranks; ++k) {
      const int peer = peerAfter(me, k, comm.nranks);
      if (sendsTo(peer))
        copyChunk<T>(slotChunk(channels.sendSlot(peer), n), userChunk(src + peer * args.srcStride + first, n),
                     n, scale, scalar);
    }
    channels.postSend(sendsTo);

    const bool reduceHere = kReduce && args.recvFrom == PeerSet::kAll;
    const bool selfCopy = !reduceHere && sendsTo(me) && receivesFrom(me);
    if (!channels.acquireRecv(receivesFrom)) return;
    if (reduceHere) {
      reduceChunk<T, Op>(channels, src + me * args.srcStride + first, dst + me * args.dstStride + first, n,
                         scale, scalar, args.op.scaling.postDivisor, false);
    } else {
      if (selfCopy)
        copyChunk<T>(userChunk(dst + me * args.dstStride + first, n),
                     userChunk(src + me * args.srcStride + first, n), n, false, scalar);
      for (int k = 1; k < comm.nranks; ++k) {
        const int peer = peerBefore(me, k, comm.nranks);
        if (receivesFrom(peer))
          copyChunk<T>(userChunk(dst + peer * args.dstStride + first, n),
                       slotChunk(channels.recvSlot(peer), n), n, false, scalar);
      }
    }
    channels.releaseRecv(receivesFrom);
  }
}

}  // namespace mscclpp_nccl
