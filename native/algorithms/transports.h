// What a communicator's kernels reach their peers through: one value per protocol, filled in at setup
// (Communicator::connect) and passed to every launch.
#pragma once

#include "native/algorithms/lanes.h"
#include "native/algorithms/p2p.h"
#include "native/algorithms/packet_layout.h"
#include "native/algorithms/zero_copy.h"

namespace mscclpp_nccl {

struct Transports {
  PacketComm packets;
  LaneComm lanes;
  ZeroCopyComm direct;
  P2pComm p2p;
  LaneComm p2pLanes;  // lanes of large send/recv transfers, apart from the collectives'
};

// The buffers of an all-reduce on every rank, when they lie in mapped windows.
struct DirectBuffers {
  PeerBuffers send;
  PeerBuffers recv;
};

}  // namespace mscclpp_nccl
