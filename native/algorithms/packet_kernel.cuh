// Pieces shared by the packet kernels: scratch addressing, per-call constants, and PacketStep, the
// send / receive / receive-reduce operations every packet algorithm is a schedule of.
#pragma once

#include <cstdint>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/packet_layout.h"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/device/bounded_wait.cuh"
#include "native/device/packet.cuh"
#include "native/device/rank_order.cuh"
#include "native/device/reduce.cuh"
#include "native/device/step_sequence.cuh"

namespace mscclpp_nccl {

__device__ __forceinline__ LLPacket* packetSlot(const PacketComm& comm, void* scratch, uint32_t flag,
                                                int sender) {
  return static_cast<LLPacket*>(scratch) + packetSlotOffset(comm, flag & 1, blockIdx.x, sender);
}

// The flag of step `step` (1-based) of a kernel whose counter base is `base`.
__device__ __forceinline__ uint32_t stepFlag(uint64_t base, int step) {
  return static_cast<uint32_t>(base + step);
}

__host__ __device__ inline size_t divCeil(size_t a, size_t b) { return (a + b - 1) / b; }

// An all-reduce's buffers as packet words (8 bytes; the last one trimmed to the buffer's end).
template <typename T>
class AllReduceWords {
 public:
  __device__ explicit AllReduceWords(const AllReduceArgs& args)
      : args_(args),
        bytes_(args.count * sizeof(T)),
        sendAligned_((reinterpret_cast<uintptr_t>(args.send) & 7) == 0),
        recvAligned_((reinterpret_cast<uintptr_t>(args.recv) & 7) == 0),
        scalar_(args.op.scaling.preMultiply ? loadScalar<T>(args.op.scaling)
                                            : typename ElementTraits<T>::Acc(1)) {}

  __device__ __forceinline__ size_t count() const { return divCeil(bytes_, kPacketPayloadBytes); }

  // Word i of this rank's input, times this rank's PreMulSum scalar if any.
  __device__ __forceinline__ uint2 contribution(size_t i) const {
    const uint2 bits = loadWord<T>(static_cast<const char*>(args_.send), i, bytes_, sendAligned_);
    return args_.op.scaling.preMultiply ? Word<T>::scale(bits, scalar_) : bits;
  }

  // Stores word i of the output.
  __device__ __forceinline__ void store(size_t i, uint2 bits) const {
    storeWord<T>(static_cast<char*>(args_.recv), i, bytes_, recvAligned_, bits);
  }

  __device__ __forceinline__ int postDivisor() const { return args_.op.scaling.postDivisor; }

 private:
  const AllReduceArgs& args_;
  size_t bytes_;
  bool sendAligned_, recvAligned_;
  typename ElementTraits<T>::Acc scalar_;
};

// One step of a packet kernel as one block sees it: word i of this block's slot from each sender, in
// every rank's scratch, tagged with the step's flag (LL packets: data and flag land together, so a
// receiver needs no other signal). Each word is sent and received by the same thread index on every
// rank, so a step needs no barrier inside; a kernel's __syncthreads between steps makes each packet
// certify that the whole block finished the step before.
class PacketStep {
 public:
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

  // Word i reduced over every rank in rank order (so every rank computes the same bits): `mine` for
  // this rank, each peer's received. False when a peer's word never came; *out is then unset.
  template <typename T, typename Op>
  __device__ __forceinline__ bool receiveReduce(size_t i, uint2 mine, int postDivisor, uint2* out) {
    WordReduction<T, Op> reduction;
    for (int sender = 0; sender < comm_.nranks; ++sender) {
      uint2 bits = mine;
      if (sender != comm_.rank && !receive(sender, i, &bits)) return false;
      if (sender == 0)
        reduction.first(bits);
      else
        reduction.add(bits);
    }
    *out = reduction.result(postDivisor);
    return true;
  }

 private:
  const PacketComm& comm_;
  BoundedWait& wait_;
  uint32_t flag_;
};

}  // namespace mscclpp_nccl
