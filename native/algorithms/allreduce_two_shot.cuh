// The two-shot all-reduce's schedule, written once for both protocols (PacketRounds and ChunkRounds).
// The input is cut into nranks segments of `segmentBytes` (a multiple of the protocol's unit, so every
// segment keeps the buffers' alignment); rank r owns segment r. Each round, block b takes bytes
// [first, first + chunkBytes) of every segment:
//   scatter: send that piece of segment p to rank p;
//   reduce and forward: reduce this rank's piece in rank order, store it, and send it on to every peer
//     in the same pass;
//   gather: store the peers' reduced pieces.
// Every rank's result is the one its owner computed, so all ranks hold the same bits. A reduce to
// `root` (kRooted, packets only) forwards each reduced piece to the root alone, and only the root
// gathers; its ranks then exchange no data with some peers in a step, so they send those peers tokens
// (PacketRounds' kTokens). Included by .cu files only.
#pragma once

#include "native/algorithms/allreduce.h"
#include "native/primitives/peers.h"

namespace mscclpp_nccl {

template <typename Op, bool kRooted, typename Rounds>
__device__ __forceinline__ void twoShotRounds(Rounds& rounds, const AllReduceArgs& args, size_t bytes, int me,
                                              int root, size_t segmentBytes, size_t chunkBytes, int count,
                                              int blocks) {
  const char* send = static_cast<const char*>(args.send);
  char* recv = static_cast<char*>(args.recv);
  const int postDivisor = args.op.scaling.postDivisor;
  for (int round = 0; round < count; ++round) {
    const size_t first = (static_cast<size_t>(round) * blocks + blockIdx.x) * chunkBytes;
    // This round's piece of segment s, trimmed to the segment's and the buffer's end.
    auto pieceOf = [&](int segment) {
      const size_t start = segment * segmentBytes + first;
      const size_t end = min(bytes, (segment + 1) * segmentBytes);
      return Piece{start, start < end ? min(end - start, chunkBytes) : 0, bytes};
    };
    const Piece ofSegment{first, first < segmentBytes ? min(segmentBytes - first, chunkBytes) : 0,
                          segmentBytes};
    if (!rounds.begin(round, ofSegment)) return;
    if (!rounds.template sendEach<kRooted>(send, pieceOf)) return;
    if constexpr (!kRooted) {
      if (!rounds.template reduceForward<Op>(send, recv, pieceOf(me), AllPeers{}, true, postDivisor)) return;
      if (!rounds.template receiveEach<false>(AllPeers{}, recv, pieceOf, chunkBytes)) return;
    } else {
      // The root stores its reduced piece and gathers the others'; the rest forward theirs to it.
      rounds.template reduceForward<Op>(send, recv, pieceOf(me), OneRank{root}, me == root, postDivisor);
      rounds.template receiveEach<true>([&](int) { return me == root; }, recv, pieceOf, chunkBytes);
    }
  }
}

}  // namespace mscclpp_nccl
