#include <algorithm>

#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/lane_kernel.cuh"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/p2p.h"
#include "native/algorithms/packet_kernel.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// Block b serves lanes b, b + gridDim.x, ... in lock step: at step s, first the sends of all its
// lanes, then the receives. A send of chunk s waits for the receiver to free chunk s - 2 (two slots
// per lane), which it does in the receive part of its step s - 2, so no wait can close a cycle.
template <typename T>
__global__ void __launch_bounds__(kLaneThreads)
    sendRecvChunkedKernel(LaneComm comm, P2pLanes lanes, bool early) {
  enterKernel(early);
  __shared__ LaneSlots slots;
  const size_t chunkBytes = comm.slotBytes;
  int steps = 0;
  for (int l = blockIdx.x; l < lanes.count; l += gridDim.x) {
    const P2pLane& t = lanes.lane[l];
    const size_t chunks = divCeil(t.bytes, chunkBytes);
    if (chunks > t.lane) steps = max(steps, static_cast<int>(divCeil(chunks - t.lane, t.lanes)));
  }

  for (int step = 0; step < steps; ++step) {
    for (int sending = 1; sending >= 0; --sending) {
      for (int l = blockIdx.x; l < lanes.count; l += gridDim.x) {
        const P2pLane& t = lanes.lane[l];
        if (t.isSend != sending) continue;
        const size_t first = (static_cast<size_t>(step) * t.lanes + t.lane) * chunkBytes;
        if (first >= t.bytes) continue;
        const size_t n = min(chunkBytes, t.bytes - first);
        LaneBlock lane(comm, slots, t.lane);
        auto onlyPeer = [&](int rank) { return rank == t.peer; };
        if (sending) {
          if (!lane.acquireSend(onlyPeer)) return;
          copyChunk<T>(slotChunk(lane.sendSlot(t.peer), n), userChunk(t.buffer + first, n), n, false, 1);
          lane.postSend(onlyPeer);
        } else {
          if (!lane.acquireRecv(onlyPeer)) return;
          copyChunk<T>(userChunk(t.buffer + first, n), slotChunk(lane.recvSlot(t.peer), n), n, false, 1);
          lane.releaseRecv(onlyPeer);
        }
      }
    }
  }
}

// Lanes per transfer depend on its size only (two chunks per lane at least), like the packet path's.
int lanesFor(size_t bytes, size_t chunkBytes) {
  return static_cast<int>(std::clamp<size_t>(divCeil(bytes, 2 * chunkBytes), 1, kMaxP2pChunkLanes));
}

}  // namespace

Status launchP2pChunked(const LaneComm& comm, const std::vector<P2pOp>& ops, int maxBlocks,
                        int earlyLaunchBlocks, cudaStream_t stream) {
  if (comm.slotBytes != kP2pLaneSlotBytes || comm.blocks < kMaxP2pChunkLanes)
    return fail(Status::kInternalError, "send/recv (chunked): lanes not set up for point-to-point");
  for (const P2pOp& op : ops)
    if (op.bytes > 0 && op.peer == comm.rank)
      return fail(Status::kInternalError, "send/recv (chunked): transfer to self");
  P2pLanes lanes{};
  size_t elementBytes = 8;
  MSCCLPP_TRY(cutIntoLanes(ops, comm.rank, lanesFor, comm.slotBytes, &lanes, &elementBytes));
  if (lanes.count == 0) return Status::kSuccess;
  const LaunchShape shape =
      withEarlyLaunch({std::min(lanes.count, maxBlocks), kLaneThreads, 0, false, false}, earlyLaunchBlocks);
  auto launch = [&](auto type, auto) {
    return launchKernel(sendRecvChunkedKernel<Tagged<decltype(type)>>, shape.blocks, shape.threads,
                        shape.earlyLaunch, shape.programmatic, stream, comm, lanes);
  };
  return launched(dispatchCopy(elementBytes, launch), "send/recv (chunked)");
}

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
