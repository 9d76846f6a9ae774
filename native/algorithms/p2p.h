// Point-to-point transfers (ncclSend/ncclRecv), all those of one group fused into one kernel.
//
// Collectives advance communicator-wide step counters (one per block index), which only works because
// every rank takes part in every step. Sends and receives involve two ranks, so each (peer, direction, lane)
// has its own counter and its own scratch slots, and the receiver acknowledges each step so that the sender
// never overwrites a slot that is still being read (two steps of LL packets in flight).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/lanes.h"
#include "native/algorithms/packet_layout.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

struct P2pOp {
  bool isSend;
  int peer;
  void* buffer;  // source of a send, destination of a receive
  size_t bytes;
  size_t elementBytes;
};

// The device state of the point-to-point channels of a communicator.
struct P2pComm {
  PacketComm packets;     // p2p scratch: [half][lane block][sender] slots, own step counter unused
  void* localAcks;        // this rank's ack packets: [half][lane block][peer]
  void* const* peerAcks;  // device array: every rank's ack area as mapped here
  uint64_t* sendSteps;    // [peer][lane block]
  uint64_t* recvSteps;    // [peer][lane block]
};

// Lanes of one group's kernel (they travel as a kernel parameter, kept under 4 KiB), and the most one
// transfer is cut into: 8 packet lanes (a block each, as many as a ring step of a collective), 16
// chunk lanes (one block's stores to another GPU over NVLink go at about 12 GB/s). A group whose
// transfers need more lanes than one kernel holds runs as several kernels (runSendRecv).
constexpr int kMaxP2pLanes = 128;
constexpr int kMaxP2pLaneBlocks = 8;
constexpr int kMaxP2pChunkLanes = 16;

// Bytes of the ack area a rank needs.
inline size_t p2pAckBytes(int nranks) { return 2ull * kMaxPacketBlocks * nranks * kPacketBytes; }

// One lane of one transfer in a fused kernel's parameters: chunk set `lane` of `lanes`.
struct P2pLane {
  char* buffer;
  size_t bytes;
  int peer;
  uint8_t isSend;
  uint8_t lane;
  uint8_t lanes;
};

struct P2pLanes {
  P2pLane lane[kMaxP2pLanes];
  int count;
};
static_assert(sizeof(P2pLanes) <= 4096, "kernel parameters past 4 KiB cost launch time");

// Cuts every transfer of `ops` to another rank (and not empty) into lanesFor(bytes) lanes, which must
// depend on the size alone so that both ends cut it alike; *elementBytes: the smallest element size.
Status cutIntoLanes(const std::vector<P2pOp>& ops, int self, int (*lanesFor)(size_t bytes, size_t param),
                    size_t param, P2pLanes* out, size_t* elementBytes);

// Whether a transfer moves data to or from another rank (the rest are local copies or nothing).
inline bool crossesRanks(const P2pOp& op, int self) { return op.bytes > 0 && op.peer != self; }

// Whether launchP2p or launchP2pChunked launches a kernel for `ops`.
inline bool p2pLaunchesKernel(const std::vector<P2pOp>& ops, int self) {
  for (const P2pOp& op : ops)
    if (crossesRanks(op, self)) return true;
  return false;
}

// Runs `ops` (this rank's part of one group; no two for the same peer and direction) as one kernel,
// plus local copies for transfers to self. `maxBlocks` caps the grid (co-residency); a grid of at most
// `earlyLaunchBlocks` launches early (kernel_launch.h). The kernel publishes `ticket` when done (0: none).
Status launchP2p(const P2pComm& comm, const std::vector<P2pOp>& ops, int maxBlocks, int earlyLaunchBlocks,
                 uint64_t ticket, cudaStream_t stream);

// Point-to-point lanes: a lane scratch of their own (transfers need not line up with collectives'
// kernels), kMaxP2pChunkLanes lanes per ordered pair of ranks, chunks of kP2pLaneSlotBytes.
constexpr size_t kP2pLaneSlotBytes = 64 * 1024;

// The same transfers over lanes (plain chunks and semaphores): for large ones. Each transfer is cut
// into lanes by its size alone, so both ends agree whatever else their groups hold. No transfers to self.
Status launchP2pChunked(const LaneComm& lanes, const std::vector<P2pOp>& ops, int maxBlocks,
                        int earlyLaunchBlocks, cudaStream_t stream);

}  // namespace mscclpp_nccl
