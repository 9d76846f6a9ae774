// The verbs of the packet protocol, which every packet algorithm is a schedule of: PacketStep (send,
// receive, receive-reduce a word, over every peer of a collective's step), PacketRounds (the same over
// a round's pieces of the users' buffers, as the chunk protocol's ChunkRounds offers them) and
// PacketChannel (one acknowledged point-to-point direction). Kernels reach packets and slots only
// through these.
#pragma once

#include <cstdint>

#include "native/common/arithmetic.h"
#include "native/device/bounded_wait.cuh"
#include "native/device/packet.cuh"
#include "native/device/rank_order.cuh"
#include "native/device/reduce.cuh"
#include "native/primitives/packet_layout.h"
#include "native/primitives/peers.h"

namespace mscclpp_nccl {

__device__ __forceinline__ LLPacket* packetSlot(const PacketComm& comm, void* scratch, uint32_t flag,
                                                int sender) {
  return static_cast<LLPacket*>(scratch) + packetSlotOffset(comm, flag & 1, blockIdx.x, sender);
}

// The flag of step `step` (1-based) of a kernel whose counter base is `base`.
__device__ __forceinline__ uint32_t stepFlag(uint64_t base, int step) {
  return static_cast<uint32_t>(base + step);
}

// One step of a packet kernel as one block sees it: word i of this block's slot from each sender, in
// every rank's scratch, tagged with the step's flag (LL packets: data and flag land together, so a
// receiver needs no other signal). Each word is sent and received by the same thread index on every
// rank, so a step needs no barrier inside; a kernel's __syncthreads between steps makes each packet
// certify that the whole block finished the step before.
class PacketStep {
 public:
  // Senders whose words one sweep of receiveEach polls together, in registers.
  static constexpr int kSweepRanks = 4;

  __device__ PacketStep(const PacketComm& comm, BoundedWait& wait, uint32_t flag)
      : comm_(comm), wait_(wait), flag_(flag) {}

  // Word i of this rank's slot in `peer`'s scratch.
  __device__ __forceinline__ void send(int peer, size_t i, uint2 bits) const {
    llStore(packetSlot(comm_, comm_.peerScratch[peer], flag_, comm_.rank) + i, bits, flag_);
  }

  // Word i to every peer, nearest first.
  __device__ __forceinline__ void sendToPeers(size_t i, uint2 bits) const {
    for (int k = 1; k < comm_.nranks; ++k) send(peerAfter(comm_.rank, k, comm_.nranks), i, bits);
  }

  // Word i from `peer`; false when it never came (the bounded wait gave up and recorded why).
  __device__ __forceinline__ bool receive(int peer, size_t i, uint2* bits) {
    return wait_.load(packetSlot(comm_, comm_.localScratch, flag_, peer) + i, flag_, bits, peer);
  }

  // Word i from each sender in `senders` (bit k: rank first + k, k < n), into words[k]; false when one
  // never came. Each sweep loads every word not there yet before it tests any, so the words that have
  // landed cost one memory round trip together, where waiting for one sender after another pays one each.
  // The loops stop at the window's n ranks, so that a small communicator's sweep stays short.
  __device__ __forceinline__ bool receiveEach(int first, int n, unsigned senders, size_t i,
                                              uint2 (&words)[kSweepRanks]) {
    const LLPacket* slot = packetSlot(comm_, comm_.localScratch, flag_, first) + i;
    while (senders != 0) {
      uint32_t flags[kSweepRanks][2];
#pragma unroll
      for (int k = 0; k < kSweepRanks && k < n; ++k)
        if (senders & (1u << k)) llLoad(slot + k * comm_.slotPackets, &words[k], flags[k]);
#pragma unroll
      for (int k = 0; k < kSweepRanks && k < n; ++k)
        if ((senders & (1u << k)) && llCarries(flags[k], flag_)) senders &= ~(1u << k);
      if (senders != 0 && wait_.giveUp(first + __ffs(senders) - 1)) return false;
    }
    wait_.progressed();
    return true;
  }

  // Word i from every peer for which sends(peer) holds, each handed to take(peer, bits) in rank order;
  // false when one never came.
  template <typename Sends, typename Take>
  __device__ __forceinline__ bool receiveFromPeers(size_t i, Sends sends, Take take) {
    if (comm_.nranks == 2) {  // one peer: nothing to overlap, and a plain wait polls fastest
      const int peer = 1 - comm_.rank;
      uint2 bits;
      if (!sends(peer)) return true;
      if (!receive(peer, i, &bits)) return false;
      take(peer, bits);
      return true;
    }
    for (int first = 0; first < comm_.nranks; first += kSweepRanks) {
      const int n = min(kSweepRanks, comm_.nranks - first);
      unsigned senders = 0;
#pragma unroll
      for (int k = 0; k < kSweepRanks && k < n; ++k)
        if (first + k != comm_.rank && sends(first + k)) senders |= 1u << k;
      uint2 words[kSweepRanks];
      if (!receiveEach(first, n, senders, i, words)) return false;
#pragma unroll
      for (int k = 0; k < kSweepRanks && k < n; ++k)
        if (senders & (1u << k)) take(first + k, words[k]);
    }
    return true;
  }

  // The tokens of the peers for which expects(peer) holds: thread t waits for rank t's, so that the
  // waits overlap without holding a word per peer in any thread. The block's next __syncthreads ends them.
  template <typename Expects>
  __device__ __forceinline__ void receiveTokens(Expects expects) {
    for (int peer = threadIdx.x; peer < comm_.nranks; peer += blockDim.x) {
      uint2 token;
      if (peer != comm_.rank && expects(peer)) receive(peer, 0, &token);
    }
  }

  // Word i reduced over every rank in rank order (so every rank computes the same bits): `mine` for
  // this rank, each peer's received. False when a peer's word never came; *out is then unset.
  template <typename T, typename Op>
  __device__ __forceinline__ bool receiveReduce(size_t i, uint2 mine, int postDivisor, uint2* out) {
    WordReduction<T, Op> reduction;
    if (comm_.nranks == 2) {  // see receiveFromPeers
      uint2 theirs;
      if (!receive(1 - comm_.rank, i, &theirs)) return false;
      reduction.first(comm_.rank == 0 ? mine : theirs);
      reduction.add(comm_.rank == 0 ? theirs : mine);
      *out = reduction.result(postDivisor);
      return true;
    }
    for (int first = 0; first < comm_.nranks; first += kSweepRanks) {
      const int n = min(kSweepRanks, comm_.nranks - first);
      unsigned senders = (1u << n) - 1;
      if (comm_.rank >= first && comm_.rank < first + n) senders &= ~(1u << (comm_.rank - first));
      uint2 words[kSweepRanks];
      if (!receiveEach(first, n, senders, i, words)) return false;
#pragma unroll
      for (int k = 0; k < kSweepRanks && k < n; ++k) {
        const int sender = first + k;
        const uint2 bits = sender == comm_.rank ? mine : words[k];
        if (sender == 0)
          reduction.first(bits);
        else
          reduction.add(bits);
      }
    }
    *out = reduction.result(postDivisor);
    return true;
  }

 private:
  const PacketComm& comm_;
  BoundedWait& wait_;
  uint32_t flag_;
};

// One block's packet verbs over the rounds of a kernel, one step a round, on a piece of the users'
// buffers (peers.h: Piece; its first byte is a multiple of 8). Word i of every piece moves between the
// same thread index on every rank, so in-place calls read a word before they overwrite it. Every block
// takes part in every round, with data or without: a peer that gets no data from a round gets a token,
// and every rank hears from every peer in every step (packet_layout.h's scratch reuse argument).
// Contributions are scaled by `scale` as they are sent or reduced.
template <typename T>
class PacketRounds {
 public:
  // `steps` steps a round: the exchange takes one, the two-shot all-reduce two (its scatter, then its
  // gather).
  __device__ PacketRounds(const PacketComm& comm, BoundedWait& wait, uint64_t base, PreMultiply<T> scale,
                          int steps = 1)
      : comm_(comm), wait_(wait), base_(base), scale_(scale), steps_(steps) {}

  // Starts round `round`; true (every round runs, with or without data).
  __device__ bool begin(int round, const Piece&) {
    // A token certifies its whole block: no thread may still read the previous step (the first round's
    // previous step was the previous kernel's, which has ended).
    if (round > 0) __syncthreads();
    flag_ = stepFlag(base_, steps_ * round + 1);
    return true;
  }

  // The piece of one buffer to every peer in `to`, tokens to the rest.
  template <typename To>
  __device__ __forceinline__ bool sendPiece(To to, const char* buffer, const Piece& piece) {
    if constexpr (kAllPeers<To>) {
      const PacketStep step(comm_, wait_, flag_);
      const Words words(piece);
      for (size_t i = threadIdx.x; i < words.count; i += blockDim.x)
        step.sendToPeers(i, contribution(buffer, words.first + i, piece));
      sendTokens(step, to, words.count);
      return true;
    } else {
      return sendPieces(to, [&](int) { return buffer; }, piece);
    }
  }

  // The piece of buffer(peer) to every peer in `to`, tokens to the rest.
  template <typename To, typename BufferOf>
  __device__ __forceinline__ bool sendPieces(To to, BufferOf buffer, const Piece& piece) {
    const PacketStep step(comm_, wait_, flag_);
    const Words words(piece);
    const int me = comm_.rank, nranks = comm_.nranks;
    if constexpr (kOneRank<To>) {
      if (to.rank != me)
        for (size_t i = threadIdx.x; i < words.count; i += blockDim.x)
          step.send(to.rank, i, contribution(buffer(to.rank), words.first + i, piece));
    } else if constexpr (!kNoPeers<To>) {
      for (size_t i = threadIdx.x; i < words.count; i += blockDim.x)
        for (int k = 1; k < nranks; ++k) {
          const int peer = peerAfter(me, k, nranks);
          if (to(peer)) step.send(peer, i, contribution(buffer(peer), words.first + i, piece));
        }
    }
    sendTokens(step, to, words.count);
    return true;
  }

  // Each `from` peer's piece into buffer(peer), and this rank's own piece from `own` into `ownOut` where
  // `own` is set; tokens from the rest.
  template <typename From, typename BufferOf>
  __device__ __forceinline__ bool receivePieces(From from, BufferOf buffer, const char* own, char* ownOut,
                                                const Piece& piece) {
    PacketStep step(comm_, wait_, flag_);
    const Words words(piece);
    const bool copyOwn = own != nullptr && own != ownOut;  // in place: already there
    for (size_t i = threadIdx.x; i < words.count; i += blockDim.x) {
      const size_t word = words.first + i;
      if (copyOwn) store(ownOut, word, piece, loadWord<T>(own, word, piece.total, wordAligned(own)));
      if constexpr (kOneRank<From>) {
        uint2 bits;
        if (from.rank != comm_.rank && step.receive(from.rank, i, &bits))
          store(buffer(from.rank), word, piece, bits);
      } else if constexpr (!kNoPeers<From>) {
        step.receiveFromPeers(i, from,
                              [&](int sender, uint2 bits) { store(buffer(sender), word, piece, bits); });
      }
    }
    if (words.count == 0 || !kAllPeers<From>)
      step.receiveTokens([&](int peer) { return words.count == 0 || !from(peer); });
    return true;
  }

  // Scatter (the round's first step): the piece of `buffer` at pieceOf(peer) to each peer; with kTokens,
  // a token to each peer whose piece is empty.
  template <bool kTokens, typename PieceOf>
  __device__ __forceinline__ bool sendEach(const char* buffer, PieceOf pieceOf) {
    const PacketStep step(comm_, wait_, flag_);
    const int me = comm_.rank, nranks = comm_.nranks;
    for (int k = 1; k < nranks; ++k) {
      const int peer = peerAfter(me, k, nranks);
      const Piece piece = pieceOf(peer);
      const Words words(piece);
      for (size_t i = threadIdx.x; i < words.count; i += blockDim.x)
        step.send(peer, i, contribution(buffer, words.first + i, piece));
      if (kTokens && words.count == 0 && threadIdx.x == 0) step.send(peer, 0, make_uint2(0, 0));
    }
    return true;
  }

  // Every rank's piece reduced in rank order (the scatter's packets, this rank's own from `own`), stored
  // into `out` where `storeHere`, and sent on to every `to` peer in the round's second step. Where some
  // peer gets nothing (a reduce to one rank), every peer that gets no data from it gets a token, once the
  // whole block has its scatter packets.
  template <typename Op, typename To>
  __device__ __forceinline__ bool reduceForward(const char* own, char* out, const Piece& piece, To to,
                                                bool storeHere, int postDivisor) {
    __syncthreads();  // see the one-shot kernel: packets certify the whole block's progress
    PacketStep scatter(comm_, wait_, flag_);
    const PacketStep gather(comm_, wait_, flag_ + 1);
    const Words words(piece);
    for (size_t i = threadIdx.x; i < words.count; i += blockDim.x) {
      uint2 sum;
      if (!scatter.receiveReduce<T, Op>(i, contribution(own, words.first + i, piece), postDivisor, &sum))
        continue;
      if (storeHere) store(out, words.first + i, piece, sum);
      if constexpr (kAllPeers<To>)
        gather.sendToPeers(i, sum);
      else if constexpr (kOneRank<To>)
        if (to.rank != comm_.rank) gather.send(to.rank, i, sum);
    }
    if constexpr (!kAllPeers<To>) {
      if (words.count == 0) scatter.receiveTokens([](int) { return true; });
      __syncthreads();  // a token certifies the whole block's scatter
      sendTokens(gather, to, words.count);
    }
    return true;
  }

  // Gather (the round's second step): each `from` peer's reduced piece into `buffer` at pieceOf(peer),
  // word i of every peer's piece together; with kTokens, the tokens of every other peer and of those
  // whose piece is empty. `chunkBytes`: the largest piece.
  template <bool kTokens, typename From, typename PieceOf>
  __device__ __forceinline__ bool receiveEach(From from, char* buffer, PieceOf pieceOf, size_t chunkBytes) {
    PacketStep gather(comm_, wait_, flag_ + 1);
    if constexpr (!kNoPeers<From>) {
      const size_t chunkWords = chunkBytes / kPacketPayloadBytes;
      for (size_t i = threadIdx.x; i < chunkWords; i += blockDim.x)
        gather.receiveFromPeers(
            i, [&](int peer) { return from(peer) && i * kPacketPayloadBytes < pieceOf(peer).bytes; },
            [&](int peer, uint2 bits) {
              const Piece piece = pieceOf(peer);
              store(buffer, piece.first / kPacketPayloadBytes + i, piece, bits);
            });
    }
    if constexpr (kTokens)
      gather.receiveTokens([&](int peer) { return !from(peer) || pieceOf(peer).bytes == 0; });
    return true;
  }

  // Every rank's contribution reduced in rank order into `out`: this rank's from `own`, each peer's
  // received.
  template <typename Op>
  __device__ __forceinline__ bool receiveReduce(const char* own, char* out, const Piece& piece,
                                                int postDivisor) {
    PacketStep step(comm_, wait_, flag_);
    const Words words(piece);
    for (size_t i = threadIdx.x; i < words.count; i += blockDim.x) {
      uint2 sum;
      if (step.receiveReduce<T, Op>(i, contribution(own, words.first + i, piece), postDivisor, &sum))
        store(out, words.first + i, piece, sum);
    }
    if (words.count == 0) step.receiveTokens([](int) { return true; });
    return true;
  }

 private:
  // A piece in packet words: from word `first`, `count` of them.
  struct Words {
    __device__ explicit Words(const Piece& piece)
        : first(piece.first / kPacketPayloadBytes), count(divCeil(piece.bytes, kPacketPayloadBytes)) {}
    size_t first, count;
  };
  __device__ __forceinline__ uint2 contribution(const char* buffer, size_t word, const Piece& piece) const {
    return scale_.apply(loadWord<T>(buffer, word, piece.total, wordAligned(buffer)));
  }
  static __device__ __forceinline__ void store(char* buffer, size_t word, const Piece& piece, uint2 bits) {
    storeWord<T>(buffer, word, piece.total, wordAligned(buffer), bits);
  }
  // A token to every peer that gets no data in this step (all of them when there is none).
  template <typename To>
  __device__ __forceinline__ void sendTokens(const PacketStep& step, To to, size_t words) const {
    if (threadIdx.x != 0 || (words > 0 && kAllPeers<To>)) return;
    for (int k = 1; k < comm_.nranks; ++k) {
      const int peer = peerAfter(comm_.rank, k, comm_.nranks);
      if (words == 0 || !to(peer)) step.send(peer, 0, make_uint2(0, 0));
    }
  }

  const PacketComm& comm_;
  BoundedWait& wait_;
  uint64_t base_;
  PreMultiply<T> scale_;
  int steps_;
  uint32_t flag_ = 0;
};

// Step `step` (0-based, within one kernel) of one direction of the point-to-point packet channel
// (peer, `channel`), as one block sees it (packet_layout.h: P2pComm). The sender may write a step's slot
// once the receiver acknowledged the step two before, which used the same half; the receiver
// acknowledges a step once the whole block has read it. Each word travels between the same thread
// index at both ends, as in PacketStep.
class PacketChannel {
 public:
  __device__ PacketChannel(const P2pComm& comm, BoundedWait& wait, int peer, int channel, bool sending,
                           int step)
      : comm_(comm),
        wait_(wait),
        peer_(peer),
        channel_(channel),
        number_(counter(comm, peer, channel, sending) + step + 1),
        flag_(static_cast<uint32_t>(number_)),
        slot_(sending ? slot(comm.packets.peerScratch[peer], comm.packets.rank)
                      : slot(comm.packets.localScratch, peer)) {}

  // Sender: waits until this step's slot is free (the ack of the step two before); false: gave up.
  __device__ bool waitFree() {
    if (number_ <= 2) return true;  // the channel's first two steps find their slots free
    bool ok = true;
    if (threadIdx.x == 0) {
      uint2 ignored;
      ok = wait_.load(ackPacket(comm_.localAcks, peer_), flag_ - 2, &ignored, peer_);
    }
    return __syncthreads_and(ok);
  }

  // Sender: word i of this step.
  __device__ __forceinline__ void send(size_t i, uint2 bits) const { llStore(slot_ + i, bits, flag_); }

  // Receiver: word i of this step; false when it never came.
  __device__ __forceinline__ bool receive(size_t i, uint2* bits) {
    return wait_.load(slot_ + i, flag_, bits, peer_);
  }

  // Receiver: hands the step's slot back once every thread of the block has read its words.
  __device__ void acknowledge() {
    __syncthreads();
    if (threadIdx.x == 0)
      llStore(ackPacket(comm_.peerAcks[peer_], comm_.packets.rank), make_uint2(0, 0), flag_);
  }

  // Moves the channel's step counter past `steps` steps of a finished kernel (one thread, after the
  // block's last step).
  static __device__ void advance(const P2pComm& comm, int peer, int channel, bool sending, uint64_t steps) {
    counter(comm, peer, channel, sending) += steps;
  }

 private:
  static __device__ uint64_t& counter(const P2pComm& comm, int peer, int channel, bool sending) {
    return (sending ? comm.sendSteps
                    : comm.recvSteps)[static_cast<size_t>(peer) * kMaxPacketBlocks + channel];
  }
  __device__ LLPacket* slot(void* scratch, int sender) const {
    return static_cast<LLPacket*>(scratch) + packetSlotOffset(comm_.packets, flag_ & 1, channel_, sender);
  }
  __device__ LLPacket* ackPacket(void* acks, int peer) const {
    return static_cast<LLPacket*>(acks) + p2pAckOffset(comm_.packets.nranks, flag_ & 1, channel_, peer);
  }

  const P2pComm& comm_;
  BoundedWait& wait_;
  int peer_;
  int channel_;
  uint64_t number_;  // the channel's steps so far, this one included
  uint32_t flag_;
  LLPacket* slot_;  // this step's slot: in the peer's scratch to send, in this rank's to receive
};

// One block's point-to-point verbs on packet channels: a piece of a transfer's buffer (its first byte a
// multiple of 8) sent or received as step `step` of channel (peer, channel), as ChunkTransfers offers
// them on chunk channels. A wait that gives up is not an early end: the kernel still advances the
// channels' counters and publishes its ticket, as every packet kernel does.
template <typename T>
class PacketTransfers {
 public:
  __device__ PacketTransfers(const P2pComm& comm, BoundedWait& wait) : comm_(comm), wait_(wait) {}

  __device__ __forceinline__ bool send(int peer, int channel, int step, const char* buffer,
                                       const Piece& piece) {
    PacketChannel to(comm_, wait_, peer, channel, true, step);
    if (!to.waitFree()) return true;
    const size_t first = piece.first / kPacketPayloadBytes, words = divCeil(piece.bytes, kPacketPayloadBytes);
    const bool aligned = wordAligned(buffer);
    for (size_t i = threadIdx.x; i < words; i += blockDim.x)
      to.send(i, loadWord<T>(buffer, first + i, piece.total, aligned));
    return true;
  }

  __device__ __forceinline__ bool receive(int peer, int channel, int step, char* buffer, const Piece& piece) {
    PacketChannel from(comm_, wait_, peer, channel, false, step);
    const size_t first = piece.first / kPacketPayloadBytes, words = divCeil(piece.bytes, kPacketPayloadBytes);
    const bool aligned = wordAligned(buffer);
    for (size_t i = threadIdx.x; i < words; i += blockDim.x) {
      uint2 bits;
      if (from.receive(i, &bits)) storeWord<T>(buffer, first + i, piece.total, aligned, bits);
    }
    from.acknowledge();
    return true;
  }

 private:
  const P2pComm& comm_;
  BoundedWait& wait_;
};

}  // namespace mscclpp_nccl
