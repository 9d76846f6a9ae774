// The exchange's schedule, written once for both protocols (PacketRounds and ChunkRounds): each round,
// block b takes bytes [first, first + chunkBytes) of every range. It sends range p's piece to peer p (or
// its one range's to every receiver), then reduces what every rank sent into its own range, or stores
// each sender's piece into the sender's range, copying its own where it sends to itself. Included by
// .cu files only.
#pragma once

#include "native/algorithms/exchange.h"
#include "native/primitives/peers.h"

namespace mscclpp_nccl {

// A flow fixed when the kernel is compiled (packet kernels are compiled per collective and role, so that
// each holds only its own loops): the peers of each PeerSet as AllPeers, OneRank or NoPeers.
template <Collective kCollective, bool kRoot, bool kReduce>
struct CompiledFlow {
  static constexpr ExchangeFlow kFlow = exchangeFlow(kCollective, kRoot);
  static constexpr bool kOneRange = kFlow.oneRange;
  static constexpr bool kMayReduce = kReduce && kFlow.recvFrom == PeerSet::kAll;
  template <PeerSet kSet>  // this rank's own membership needs no peer: it is kRoot
  using Peers = std::conditional_t<kSet == PeerSet::kAll, AllPeers,
                                   std::conditional_t<kSet == PeerSet::kRoot && !kRoot, OneRank, NoPeers>>;
  int root;

  __device__ constexpr bool reducesHere() const { return kMayReduce; }
  __device__ constexpr bool copiesOwn(int) const {
    return !kMayReduce && holdsSelf(kFlow.sendTo) && holdsSelf(kFlow.recvFrom);
  }
  __device__ Peers<kFlow.sendTo> sendTo() const { return make<Peers<kFlow.sendTo>>(); }
  __device__ Peers<kFlow.recvFrom> recvFrom() const { return make<Peers<kFlow.recvFrom>>(); }

 private:
  static constexpr bool holdsSelf(PeerSet set) {
    return set == PeerSet::kAll || (set == PeerSet::kRoot && kRoot);
  }
  template <typename P>
  __device__ P make() const {
    if constexpr (kOneRank<P>)
      return P{root};
    else
      return P{};
  }
};

// A flow read from the call's arguments at run time (one chunked kernel serves every collective).
template <bool kReduce>
struct ArgumentFlow {
  static constexpr bool kOneRange = false;
  static constexpr bool kMayReduce = kReduce;
  struct Members {
    PeerSet set;
    int root;
    __device__ bool operator()(int rank) const { return peerSetHas(set, rank, root); }
  };
  const ExchangeArgs& args;

  __device__ bool reducesHere() const { return kReduce && args.recvFrom == PeerSet::kAll; }
  __device__ bool copiesOwn(int me) const { return !reducesHere() && sendTo()(me) && recvFrom()(me); }
  __device__ Members sendTo() const { return {args.sendTo, args.root}; }
  __device__ Members recvFrom() const { return {args.recvFrom, args.root}; }
};

// The schedule over `count` rounds of a protocol, on grids of `blocks` blocks taking `chunkBytes` of each
// range a round (a multiple of the protocol's unit).
template <typename Op, typename Rounds, typename Flow>
__device__ __forceinline__ void exchangeRounds(Rounds& rounds, const Flow& flow, const ExchangeArgs& args,
                                               int me, size_t chunkBytes, int count, int blocks) {
  const char* src = static_cast<const char*>(args.src);
  char* dst = static_cast<char*>(args.dst);
  auto source = [&](int rank) { return src + rank * args.srcStride; };
  auto destination = [&](int rank) { return dst + rank * args.dstStride; };
  for (int round = 0; round < count; ++round) {
    const size_t first = (static_cast<size_t>(round) * blocks + blockIdx.x) * chunkBytes;
    const Piece piece{first, first < args.rangeBytes ? min(args.rangeBytes - first, chunkBytes) : 0,
                      args.rangeBytes};
    if (!rounds.begin(round, piece)) return;
    bool sent;
    if constexpr (Flow::kOneRange)
      sent = rounds.sendPiece(flow.sendTo(), src, piece);
    else
      sent = rounds.sendPieces(flow.sendTo(), source, piece);
    if (!sent) return;
    if constexpr (Flow::kMayReduce) {
      if (flow.reducesHere()) {
        if (!rounds.template receiveReduce<Op>(source(me), destination(me), piece,
                                               args.op.scaling.postDivisor))
          return;
        continue;
      }
    }
    if (!rounds.receivePieces(flow.recvFrom(), destination, flow.copiesOwn(me) ? source(me) : nullptr,
                              destination(me), piece))
      return;
  }
}

}  // namespace mscclpp_nccl
