#include <algorithm>

#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/p2p.h"
#include "native/algorithms/p2p_schedule.cuh"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"
#include "native/device/step_sequence.cuh"
#include "native/primitives/packet_primitives.cuh"

namespace mscclpp_nccl {
namespace {

// p2p_schedule.cuh on packet channels, a slot's words a piece. Then each channel's step counter moves
// past the steps its part took (and were acknowledged: a later transfer waits for the ack of its step
// s-2, which must then exist), and the last block to finish publishes `ticket` (step_sequence.cuh).
template <typename T>
__global__ void __launch_bounds__(kPacketThreads, kPacketBlocksPerSm)
    sendRecvPacketKernel(P2pComm comm, P2pParts parts, uint64_t ticket, bool early) {
  enterKernel(early);
  BoundedWait wait(comm.packets.wait);
  PacketTransfers<T> transfers(comm, wait);
  const size_t pieceBytes = comm.packets.slotPackets * kPacketPayloadBytes;
  p2pRounds(transfers, parts, pieceBytes, [](int) { return false; });
  __syncthreads();
  if (threadIdx.x == 0)
    for (int l = blockIdx.x; l < parts.count; l += gridDim.x) {
      const P2pPart& t = parts.part[l];
      PacketChannel::advance(comm, t.peer, t.part, t.isSend, piecesOfPart(t, pieceBytes));
    }
  endCall(comm.packets.steps, ticket);
}

// Parts per transfer depend on its size only: both ends must cut a transfer the same way whatever else
// their groups hold.
int packetPartsFor(size_t bytes, size_t slotPackets) {
  size_t words = divCeil(bytes, kPacketPayloadBytes);
  size_t wanted = divCeil(words, slotPackets);
  return static_cast<int>(std::clamp<size_t>(wanted, 1, kMaxP2pPacketParts));
}

}  // namespace

Status launchP2p(const P2pComm& comm, const std::vector<P2pOp>& ops, int maxBlocks, int earlyLaunchBlocks,
                 uint64_t ticket, cudaStream_t stream) {
  const int me = comm.packets.rank;
  P2pParts parts{};
  size_t elementBytes = 8;
  MSCCLPP_TRY(cutIntoParts(ops, me, packetPartsFor, comm.packets.slotPackets, &parts, &elementBytes));
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
  if (parts.count == 0) return Status::kSuccess;
  const LaunchShape shape =
      withEarlyLaunch({std::min(parts.count, maxBlocks), kPacketThreads, 0, false, false}, earlyLaunchBlocks);
  auto launch = [&](auto type, auto) {
    return launchKernel(sendRecvPacketKernel<Tagged<decltype(type)>>, shape.blocks, shape.threads,
                        shape.earlyLaunch, shape.programmatic, stream, comm, parts, ticket);
  };
  return launched(dispatchCopy(elementBytes, launch), "send/recv");
}

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
