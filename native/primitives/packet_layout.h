// What every packet kernel needs to reach its peers, and how the scratch buffers are laid out.
//
// Each rank owns one scratch buffer that its peers write LL packets into. It has two halves, used by
// alternate steps (flag parity), and each half holds one region per block index and, inside it, one
// slot per sending rank:  scratch[half][block][sender][slotPackets].
// Each block index counts its own steps (step_sequence.cuh), the same on every rank. Why this is
// race-free: block b of a rank starts its step s only after it received every peer's block-b packets of
// step s-1, which each peer sent only after it finished reading step s-2 in the same block region; so
// the half that step s writes is no longer read by anyone. Block regions never move, so kernels that
// use different numbers of blocks never overlap a region another block still reads.
#pragma once

#include <cstddef>
#include <cstdint>

#include "native/device/device_types.h"
#include "native/device/grid_limits.h"

namespace mscclpp_nccl {

constexpr int kPacketBytes = 16;
constexpr int kPacketPayloadBytes = 8;
constexpr int kPacketThreads = 512;
// Blocks of packet kernels one SM must hold at once. Grids fit a rank's running kernel and the one parked
// beside it in its share of the SMs at one block an SM, but two communicators of the same ranks may run
// kernels at once (the all-reduce suite's two_comms), which takes two: at most 64 registers a thread.
// Every packet kernel declares it, so that a kernel spills rather than deadlocks
// (perf/ptxas_usage.py shows what each uses).
constexpr int kPacketBlocksPerSm = 2;

struct PacketComm {
  int rank;
  int nranks;
  void* localScratch;        // this rank's scratch
  void* const* peerScratch;  // device array: every rank's scratch as mapped here (own entry too)
  size_t slotPackets;        // packets per (half, block, sender) slot
  StepCounter steps;
  WaitControl wait;
};

__host__ __device__ inline size_t packetSlotOffset(const PacketComm& comm, int half, int block, int sender) {
  return ((static_cast<size_t>(half) * kMaxPacketBlocks + block) * comm.nranks + sender) * comm.slotPackets;
}

// Bytes of scratch a rank needs for `nranks` ranks and `slotPackets` packets per slot.
inline size_t packetScratchBytes(int nranks, size_t slotPackets) {
  return 2ull * kMaxPacketBlocks * nranks * slotPackets * kPacketBytes;
}

// Point-to-point packet channels. Collectives advance communicator-wide step counters (one per block
// index), which works because every rank takes part in every step. A send or receive involves two
// ranks, so each (peer, direction, channel) has its own step counter and its own slots (a scratch of
// the collectives' layout, channel c in block region c), and the receiver acknowledges each step, so
// that the sender never overwrites a slot still being read: two steps of packets in flight.
struct P2pComm {
  PacketComm packets;     // p2p scratch: [half][channel][sender] slots, own step counter unused
  void* localAcks;        // this rank's ack packets: [half][channel][peer]
  void* const* peerAcks;  // device array: every rank's ack area as mapped here
  uint64_t* sendSteps;    // [peer][channel]
  uint64_t* recvSteps;    // [peer][channel]
};

// Bytes of the ack area a rank needs.
inline size_t p2pAckBytes(int nranks) { return 2ull * kMaxPacketBlocks * nranks * kPacketBytes; }

// The ack packet of (half, channel, peer) in an ack area.
__host__ __device__ inline size_t p2pAckOffset(int nranks, int half, int channel, int peer) {
  return (static_cast<size_t>(half) * kMaxPacketBlocks + channel) * nranks + peer;
}

}  // namespace mscclpp_nccl
