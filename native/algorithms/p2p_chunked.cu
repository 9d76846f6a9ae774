#include <algorithm>

#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/p2p.h"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"
#include "native/primitives/chunk_primitives.cuh"
#include "native/primitives/packet_primitives.cuh"

namespace mscclpp_nccl {
namespace {

// Block b serves parts b, b + gridDim.x, ... in lock step: at step s, first the sends of all its
// parts, then the receives. A send of chunk s waits for the receiver to free chunk s - 2 (two slots
// per channel), which it does in the receive part of its step s - 2, so no wait can close a cycle.
template <typename T>
__global__ void __launch_bounds__(kChunkThreads)
    sendRecvChunkedKernel(ChunkComm comm, P2pParts parts, bool early) {
  enterKernel(early);
  __shared__ ChunkSlots slots;
  const size_t chunkBytes = comm.slotBytes;
  int steps = 0;
  for (int l = blockIdx.x; l < parts.count; l += gridDim.x) {
    const P2pPart& t = parts.part[l];
    const size_t chunks = divCeil(t.bytes, chunkBytes);
    if (chunks > t.part) steps = max(steps, static_cast<int>(divCeil(chunks - t.part, t.parts)));
  }

  for (int step = 0; step < steps; ++step) {
    for (int sending = 1; sending >= 0; --sending) {
      for (int l = blockIdx.x; l < parts.count; l += gridDim.x) {
        const P2pPart& t = parts.part[l];
        if (t.isSend != sending) continue;
        const size_t first = (static_cast<size_t>(step) * t.parts + t.part) * chunkBytes;
        if (first >= t.bytes) continue;
        const size_t n = min(chunkBytes, t.bytes - first);
        ChunkBlock channel(comm, slots, t.part);
        auto onlyPeer = [&](int rank) { return rank == t.peer; };
        if (sending) {
          if (!channel.acquireSend(onlyPeer)) return;
          copyChunk<T>(slotChunk(channel.sendSlot(t.peer), n), userChunk(t.buffer + first, n), n, false, 1);
          channel.postSend(onlyPeer);
        } else {
          if (!channel.acquireRecv(onlyPeer)) return;
          copyChunk<T>(userChunk(t.buffer + first, n), slotChunk(channel.recvSlot(t.peer), n), n, false, 1);
          channel.releaseRecv(onlyPeer);
        }
      }
    }
  }
}

// Parts per transfer depend on its size only (two chunks per part at least), like the packet path's.
int chunkPartsFor(size_t bytes, size_t chunkBytes) {
  return static_cast<int>(std::clamp<size_t>(divCeil(bytes, 2 * chunkBytes), 1, kMaxP2pChunkParts));
}

}  // namespace

Status launchP2pChunked(const ChunkComm& comm, const std::vector<P2pOp>& ops, int maxBlocks,
                        int earlyLaunchBlocks, cudaStream_t stream) {
  if (comm.slotBytes != kP2pChunkSlotBytes || comm.blocks < kMaxP2pChunkParts)
    return fail(Status::kInternalError, "send/recv (chunked): chunk channels not set up for point-to-point");
  for (const P2pOp& op : ops)
    if (op.bytes > 0 && op.peer == comm.rank)
      return fail(Status::kInternalError, "send/recv (chunked): transfer to self");
  P2pParts parts{};
  size_t elementBytes = 8;
  MSCCLPP_TRY(cutIntoParts(ops, comm.rank, chunkPartsFor, comm.slotBytes, &parts, &elementBytes));
  if (parts.count == 0) return Status::kSuccess;
  const LaunchShape shape =
      withEarlyLaunch({std::min(parts.count, maxBlocks), kChunkThreads, 0, false, false}, earlyLaunchBlocks);
  auto launch = [&](auto type, auto) {
    return launchKernel(sendRecvChunkedKernel<Tagged<decltype(type)>>, shape.blocks, shape.threads,
                        shape.earlyLaunch, shape.programmatic, stream, comm, parts);
  };
  return launched(dispatchCopy(elementBytes, launch), "send/recv (chunked)");
}

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
