// The verbs of the packet protocol, which every packet algorithm is a schedule of: PacketStep (send,
// receive, receive-reduce, over every peer of a collective's step) and PacketChannel (one acknowledged
// point-to-point direction). Kernels reach packets and slots only through these.
#pragma once

#include <cstdint>

#include "native/common/arithmetic.h"
#include "native/device/bounded_wait.cuh"
#include "native/device/packet.cuh"
#include "native/device/rank_order.cuh"
#include "native/device/reduce.cuh"
#include "native/primitives/packet_layout.h"

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
        flag_(static_cast<uint32_t>(number_)) {}

  // Sender: waits until this step's slot is free (the ack of the step two before); false: gave up.
  __device__ bool waitFree() {
    bool ok = true;
    if (number_ > 2 && threadIdx.x == 0) {
      uint2 ignored;
      ok = wait_.load(ackPacket(comm_.localAcks, peer_), flag_ - 2, &ignored, peer_);
    }
    return __syncthreads_and(ok);
  }

  // Sender: word i of this step.
  __device__ __forceinline__ void send(size_t i, uint2 bits) const {
    const PacketComm& packets = comm_.packets;
    llStore(slot(packets.peerScratch[peer_], packets.rank) + i, bits, flag_);
  }

  // Receiver: word i of this step; false when it never came.
  __device__ __forceinline__ bool receive(size_t i, uint2* bits) {
    return wait_.load(slot(comm_.packets.localScratch, peer_) + i, flag_, bits, peer_);
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
};

}  // namespace mscclpp_nccl
