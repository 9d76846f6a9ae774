// What a communicator's kernels reach their peers through: one value per protocol, filled in at setup
// (Communicator::connect) and passed to every launch.
#pragma once

#include "native/algorithms/p2p.h"
#include "native/algorithms/zero_copy.h"
#include "native/primitives/chunk_layout.h"
#include "native/primitives/packet_layout.h"

namespace mscclpp_nccl {

struct Transports {
  PacketComm packets;
  ChunkComm chunks;
  ZeroCopyComm direct;
  P2pComm p2p;
  ChunkComm p2pChunks;  // chunk channels of large send/recv transfers, apart from the collectives'
};

// A call's two buffers (an exchange's source and destination) on every rank, where they lie in mapped
// windows.
struct DirectBuffers {
  PeerBuffers send;
  PeerBuffers recv;
};

}  // namespace mscclpp_nccl
