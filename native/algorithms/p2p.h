// Point-to-point transfers (ncclSend/ncclRecv), all those of one group fused into one kernel.
//
// Each transfer is cut into parts by its size alone, so both ends cut it alike; part k of a transfer
// moves on channel k to its peer (packet_layout.h's acknowledged packet channels for small transfers,
// chunk_layout.h's chunk channels of their own scratch for large ones). A large transfer on chunks, where
// the communicator maps users' buffers (transport/mapped_allocations.h), opens with a descriptor of the
// sender's buffer on each of its channels: when the receiver has it mapped, each part pulls its share
// straight from the sender's buffer and hands the descriptor's slot back, which ends the sender's part;
// otherwise its chunks follow as usual.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "native/algorithms/allreduce.h"
#include "native/common/status.h"
#include "native/primitives/chunk_layout.h"
#include "native/primitives/packet_layout.h"
#include "native/transport/mapped_buffers.h"

namespace mscclpp_nccl {

struct P2pOp {
  bool isSend;
  int peer;
  void* buffer;  // source of a send, destination of a receive
  size_t bytes;
  size_t elementBytes;
  MappedBuffer source{};  // a send's buffer as the receiver finds it (ready: it is mapped there)
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
  uint8_t opening;  // 0: none; else opens with a descriptor (a send's: openings.send[opening - 1])
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

// Chunked transfers from this size open with a descriptor of the sender's buffer (both ends decide by
// size, on a communicator that maps buffers): below it the two extra signals cost more than the copy
// through scratch saves.
constexpr size_t kP2pZeroCopyMinBytes = 1 << 20;

// The descriptors of one chunked kernel's sends that open with one, in the order of their parts. A kernel
// holds at most one send per distance (send_recv.cc), so few.
constexpr int kMaxP2pOpenedSends = 8;
struct P2pOpenings {
  MappedBuffer send[kMaxP2pOpenedSends];
};

// Point-to-point chunk channels: a chunk scratch of their own (transfers need not line up with
// collectives' kernels), kMaxP2pChunkParts channels per ordered pair of ranks, chunks of kP2pChunkSlotBytes.
constexpr size_t kP2pChunkSlotBytes = 64 * 1024;

// Whether a chunked transfer of `bytes` opens with a descriptor: `mappedTable` (this rank's table of the
// peers' mapped allocations) is set alike on every rank of a communicator that maps buffers.
inline bool p2pOpensWithDescriptor(size_t bytes, const MappedRegion* mappedTable) {
  return mappedTable != nullptr && bytes >= kP2pZeroCopyMinBytes;
}

// The same transfers in chunks (plain stores and semaphores): for large ones. Each transfer is cut
// into parts by its size alone, so both ends agree whatever else their groups hold. No transfers to self.
// `mappedTable`: see p2pOpensWithDescriptor (null: no transfer opens with a descriptor).
Status launchP2pChunked(const ChunkComm& chunks, const MappedRegion* mappedTable,
                        const std::vector<P2pOp>& ops, int maxBlocks, int earlyLaunchBlocks,
                        cudaStream_t stream);

}  // namespace mscclpp_nccl
