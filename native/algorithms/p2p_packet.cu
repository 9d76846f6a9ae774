#include <algorithm>

#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/p2p.h"
#include "native/algorithms/packet_kernel.cuh"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"
#include "native/device/step_sequence.cuh"

namespace mscclpp_nccl {
namespace {

__device__ __forceinline__ LLPacket* ackSlot(void* acks, int nranks, uint32_t flag, int laneBlock, int peer) {
  return static_cast<LLPacket*>(acks) + ((flag & 1) * kMaxPacketBlocks + laneBlock) * nranks + peer;
}

// Block b serves lanes b, b + gridDim.x, ... in lock step: at each step, first the sends of all its
// lanes, then the receives. A send of step s waits for the ack of step s-2, which the peer gives in
// the receive part of its step s-2, so no wait can close a cycle. The last block to finish publishes
// `ticket` (step_sequence.cuh).
template <typename T>
__global__ void __launch_bounds__(kPacketThreads)
    sendRecvPacketKernel(P2pComm comm, P2pLanes lanes, uint64_t ticket, bool early) {
  enterKernel(early);
  const PacketComm& pc = comm.packets;
  const int me = pc.rank;
  BoundedWait wait(pc.wait);
  const size_t slotWords = pc.slotPackets;

  int steps = 0;
  for (int l = blockIdx.x; l < lanes.count; l += gridDim.x) {
    const P2pLane& t = lanes.lane[l];
    size_t words = divCeil(t.bytes, kPacketPayloadBytes);
    steps = max(steps, static_cast<int>(divCeil(words, slotWords * t.lanes)));
  }

  for (int step = 0; step < steps; ++step) {
    for (int l = blockIdx.x; l < lanes.count; l += gridDim.x) {
      const P2pLane& t = lanes.lane[l];
      if (!t.isSend) continue;
      const size_t words = divCeil(t.bytes, kPacketPayloadBytes);
      const size_t first = (static_cast<size_t>(step) * t.lanes + t.lane) * slotWords;
      if (first >= words) continue;
      const size_t n = min(words - first, slotWords);
      const uint64_t base = comm.sendSteps[t.peer * kMaxPacketBlocks + t.lane];
      const uint32_t flag = static_cast<uint32_t>(base + step + 1);
      if (base + step + 1 > 2) {
        uint2 ignored;
        if (threadIdx.x == 0)
          wait.load(ackSlot(comm.localAcks, pc.nranks, flag, t.lane, t.peer), flag - 2, &ignored, t.peer);
        __syncthreads();
      }
      LLPacket* dst =
          static_cast<LLPacket*>(pc.peerScratch[t.peer]) + packetSlotOffset(pc, flag & 1, t.lane, me);
      const bool aligned = (reinterpret_cast<uintptr_t>(t.buffer) & 7) == 0;
      for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        llStore(dst + i, loadWord<T>(t.buffer, first + i, t.bytes, aligned), flag);
    }
    for (int l = blockIdx.x; l < lanes.count; l += gridDim.x) {
      const P2pLane& t = lanes.lane[l];
      if (t.isSend) continue;
      const size_t words = divCeil(t.bytes, kPacketPayloadBytes);
      const size_t first = (static_cast<size_t>(step) * t.lanes + t.lane) * slotWords;
      if (first >= words) continue;
      const size_t n = min(words - first, slotWords);
      const uint64_t base = comm.recvSteps[t.peer * kMaxPacketBlocks + t.lane];
      const uint32_t flag = static_cast<uint32_t>(base + step + 1);
      const LLPacket* src =
          static_cast<const LLPacket*>(pc.localScratch) + packetSlotOffset(pc, flag & 1, t.lane, t.peer);
      const bool aligned = (reinterpret_cast<uintptr_t>(t.buffer) & 7) == 0;
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        uint2 bits;
        if (wait.load(src + i, flag, &bits, t.peer))
          storeWord<T>(t.buffer, first + i, t.bytes, aligned, bits);
      }
      __syncthreads();  // the whole step is read before the sender may reuse its slots
      if (threadIdx.x == 0)
        llStore(ackSlot(comm.peerAcks[t.peer], pc.nranks, flag, t.lane, me), make_uint2(0, 0), flag);
    }
  }

  __syncthreads();
  if (threadIdx.x == 0) {
    for (int l = blockIdx.x; l < lanes.count; l += gridDim.x) {
      const P2pLane& t = lanes.lane[l];
      // Only the steps in which this lane block moved data (and was acknowledged) count: a later
      // transfer waits for the ack of its step s-2, which must then exist.
      size_t words = divCeil(t.bytes, kPacketPayloadBytes);
      size_t skipped = static_cast<size_t>(t.lane) * slotWords;
      uint64_t laneSteps = words > skipped ? divCeil(words - skipped, slotWords * t.lanes) : 0;
      uint64_t* counter = (t.isSend ? comm.sendSteps : comm.recvSteps) + t.peer * kMaxPacketBlocks + t.lane;
      *counter += laneSteps;
    }
  }
  endCall(pc.steps, ticket);
}

// Lane blocks per transfer depend on its size only: both ends must cut a transfer the same way
// whatever else their groups hold.
int laneBlocksFor(size_t bytes, size_t slotPackets) {
  size_t words = divCeil(bytes, kPacketPayloadBytes);
  size_t wanted = divCeil(words, slotPackets);
  return static_cast<int>(std::clamp<size_t>(wanted, 1, kMaxP2pLaneBlocks));
}

}  // namespace

Status launchP2p(const P2pComm& comm, const std::vector<P2pOp>& ops, int maxBlocks, int earlyLaunchBlocks,
                 uint64_t ticket, cudaStream_t stream) {
  const int me = comm.packets.rank;
  P2pLanes lanes{};
  size_t elementBytes = 8;
  MSCCLPP_TRY(cutIntoLanes(ops, me, laneBlocksFor, comm.packets.slotPackets, &lanes, &elementBytes));
  // Transfers to self pair the k-th send with the k-th receive.
  std::vector<const P2pOp*> selfSends, selfRecvs;
  for (const P2pOp& op : ops)
    if (op.bytes > 0 && op.peer == me) (op.isSend ? selfSends : selfRecvs).push_back(&op);
  if (selfSends.size() != selfRecvs.size())
    return fail(Status::kInvalidUsage, "a send to self needs a matching receive from self in the same group");
  for (size_t i = 0; i < selfSends.size(); ++i) {
    if (selfSends[i]->bytes != selfRecvs[i]->bytes)
      return fail(Status::kInvalidUsage, "send to self of %zu bytes but receive of %zu", selfSends[i]->bytes,
                  selfRecvs[i]->bytes);
    if (selfSends[i]->buffer != selfRecvs[i]->buffer) {
      cudaError_t err = cudaMemcpyAsync(selfRecvs[i]->buffer, selfSends[i]->buffer, selfSends[i]->bytes,
                                        cudaMemcpyDeviceToDevice, stream);
      if (err != cudaSuccess) return fail(Status::kCudaError, "send to self: %s", cudaGetErrorString(err));
    }
  }
  if (lanes.count == 0) return Status::kSuccess;
  const LaunchShape shape =
      withEarlyLaunch({std::min(lanes.count, maxBlocks), kPacketThreads, 0, false, false}, earlyLaunchBlocks);
  auto launch = [&](auto type, auto) {
    return launchKernel(sendRecvPacketKernel<Tagged<decltype(type)>>, shape.blocks, shape.threads,
                        shape.earlyLaunch, shape.programmatic, stream, comm, lanes, ticket);
  };
  return launched(dispatchCopy(elementBytes, launch), "send/recv");
}

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
