#include <algorithm>

#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/p2p.h"
#include "native/algorithms/p2p_schedule.cuh"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"
#include "native/primitives/chunk_primitives.cuh"

namespace mscclpp_nccl {
namespace {

// p2p_schedule.cuh on chunk channels of their own, a chunk a piece.
template <typename T>
__global__ void __launch_bounds__(kChunkThreads)
    sendRecvChunkedKernel(ChunkComm comm, P2pParts parts, bool early) {
  enterKernel(early);
  __shared__ ChunkSlots slots;
  ChunkTransfers<T> transfers(comm, slots);
  p2pRounds(transfers, parts, comm.slotBytes);
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
