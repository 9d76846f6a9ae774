// Point-to-point transfers (ncclSend/ncclRecv), all those of one group fused into one kernel.
//
// Each transfer is cut into parts by its size alone, so both ends cut it alike; part k of a transfer
// moves on channel k to its peer (packet_layout.h's acknowledged packet channels for small transfers,
// chunk_layout.h's chunk channels of their own scratch for large ones).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "native/algorithms/allreduce.h"
#include "native/common/status.h"
#include "native/primitives/chunk_layout.h"
#include "native/primitives/packet_layout.h"

namespace mscclpp_nccl {

struct P2pOp {
  bool isSend;
  int peer;
  void* buffer;  // source of a send, destination of a receive
  size_t bytes;
  size_t elementBytes;
};

// The parts of one group's kernel (they travel as a kernel parameter, kept under 4 KiB), and the most
// one transfer is cut into: 8 on packets (a block each, as many as a ring step of a collective), 16 on
// chunks (one block's stores to another GPU over NVLink go at about 12 GB/s). A group whose transfers
// need more parts than one kernel holds runs as several kernels (runSendRecv).
constexpr int kMaxP2pParts = 128;
constexpr int kMaxP2pPacketParts = 8;
constexpr int kMaxP2pChunkParts = 16;

// One part of one transfer in a fused kernel's parameters: part `part` of `parts`, on channel `part`.
struct P2pPart {
  char* buffer;
  size_t bytes;
  int peer;
  uint8_t isSend;
  uint8_t part;
  uint8_t parts;
};

struct P2pParts {
  P2pPart part[kMaxP2pParts];
  int count;
};
static_assert(sizeof(P2pParts) <= 4096, "kernel parameters past 4 KiB cost launch time");

// Cuts every transfer of `ops` to another rank (and not empty) into partsFor(bytes) parts, which must
// depend on the size alone so that both ends cut it alike; *elementBytes: the smallest element size.
Status cutIntoParts(const std::vector<P2pOp>& ops, int self, int (*partsFor)(size_t bytes, size_t param),
                    size_t param, P2pParts* out, size_t* elementBytes);

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

// Point-to-point chunk channels: a chunk scratch of their own (transfers need not line up with
// collectives' kernels), kMaxP2pChunkParts channels per ordered pair of ranks, chunks of kP2pChunkSlotBytes.
constexpr size_t kP2pChunkSlotBytes = 64 * 1024;

// The same transfers in chunks (plain stores and semaphores): for large ones. Each transfer is cut
// into parts by its size alone, so both ends agree whatever else their groups hold. No transfers to self.
Status launchP2pChunked(const ChunkComm& chunks, const std::vector<P2pOp>& ops, int maxBlocks,
                        int earlyLaunchBlocks, cudaStream_t stream);

}  // namespace mscclpp_nccl
