#include <algorithm>

#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/p2p.h"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"
#include "native/device/step_sequence.cuh"
#include "native/primitives/packet_primitives.cuh"

namespace mscclpp_nccl {
namespace {

// Block b serves parts b, b + gridDim.x, ... in lock step: at each step, first the sends of all its
// parts, then the receives. A send of step s waits for the ack of step s-2, which the peer gives in
// the receive part of its step s-2, so no wait can close a cycle. The last block to finish publishes
// `ticket` (step_sequence.cuh).
template <typename T>
__global__ void __launch_bounds__(kPacketThreads)
    sendRecvPacketKernel(P2pComm comm, P2pParts parts, uint64_t ticket, bool early) {
  enterKernel(early);
  BoundedWait wait(comm.packets.wait);
  const size_t slotWords = comm.packets.slotPackets;
  // Words of part t at step `step`: from *first, at most one slot's.
  auto wordsAt = [&](const P2pPart& t, int step, size_t* first) -> size_t {
    const size_t words = divCeil(t.bytes, kPacketPayloadBytes);
    *first = (static_cast<size_t>(step) * t.parts + t.part) * slotWords;
    return *first < words ? min(words - *first, slotWords) : 0;
  };

  int steps = 0;
  for (int l = blockIdx.x; l < parts.count; l += gridDim.x) {
    const P2pPart& t = parts.part[l];
    steps = max(steps, static_cast<int>(divCeil(divCeil(t.bytes, kPacketPayloadBytes), slotWords * t.parts)));
  }

  for (int step = 0; step < steps; ++step) {
    for (int sending = 1; sending >= 0; --sending) {
      for (int l = blockIdx.x; l < parts.count; l += gridDim.x) {
        const P2pPart& t = parts.part[l];
        size_t first = 0;
        const size_t n = t.isSend == sending ? wordsAt(t, step, &first) : 0;
        if (n == 0) continue;
        PacketChannel channel(comm, wait, t.peer, t.part, sending, step);
        const bool aligned = (reinterpret_cast<uintptr_t>(t.buffer) & 7) == 0;
        if (sending) {
          if (!channel.waitFree()) continue;
          for (size_t i = threadIdx.x; i < n; i += blockDim.x)
            channel.send(i, loadWord<T>(t.buffer, first + i, t.bytes, aligned));
        } else {
          for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
            uint2 bits;
            if (channel.receive(i, &bits)) storeWord<T>(t.buffer, first + i, t.bytes, aligned, bits);
          }
          channel.acknowledge();
        }
      }
    }
  }

  __syncthreads();
  if (threadIdx.x == 0) {
    for (int l = blockIdx.x; l < parts.count; l += gridDim.x) {
      const P2pPart& t = parts.part[l];
      // Only the steps in which this part moved data (and was acknowledged) count: a later transfer
      // waits for the ack of its step s-2, which must then exist.
      const size_t words = divCeil(t.bytes, kPacketPayloadBytes);
      const size_t skipped = static_cast<size_t>(t.part) * slotWords;
      PacketChannel::advance(comm, t.peer, t.part, t.isSend,
                             words > skipped ? divCeil(words - skipped, slotWords * t.parts) : 0);
    }
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
