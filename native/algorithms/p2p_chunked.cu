#include <algorithm>

#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/p2p.h"
#include "native/algorithms/p2p_schedule.cuh"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/algorithms/zero_copy_kernel.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"
#include "native/primitives/chunk_primitives.cuh"

namespace mscclpp_nccl {
namespace {

// openings.send[k], read by constant indices: indexing the kernel parameter by a register would copy the
// whole array into every thread's local memory at the start of every chunked kernel.
__device__ __forceinline__ MappedBuffer openedSend(const P2pOpenings& openings, int k) {
  MappedBuffer descriptor{};
#pragma unroll
  for (int i = 0; i < kMaxP2pOpenedSends; ++i)
    if (i == k) descriptor = openings.send[i];
  return descriptor;
}

// A part that opens with a descriptor (p2p.h) posts or reads it before any wait on data: sends first,
// as in the rounds, so every descriptor a receiver waits for is posted without waiting on anything in
// this kernel. *opened[l]: part l's descriptor, ready where the part is pulled (none: not ready). A
// receiver hands a descriptor that is not ready back at once, so that the chunks follow. False when a
// wait gave up.
template <typename T>
__device__ bool openParts(ChunkTransfers<T>& transfers, const P2pParts& parts, const P2pOpenings& openings,
                          MappedBuffer* opened) {
  for (int sending = 1; sending >= 0; --sending)
    for (int l = blockIdx.x; l < parts.count; l += gridDim.x) {
      const P2pPart& t = parts.part[l];
      if (t.isSend != sending) continue;
      MappedBuffer descriptor{};
      if (t.opening && sending) {
        descriptor = openedSend(openings, t.opening - 1);
        if (!transfers.sendDescriptor(t.peer, t.part, descriptor)) return false;
      } else if (t.opening) {
        if (!transfers.receiveDescriptor(t.peer, t.part, &descriptor)) return false;
        if (!descriptor.ready) transfers.closeDescriptor(t.peer, t.part);
      }
      if (threadIdx.x == 0) opened[l] = descriptor;
    }
  __syncthreads();
  return true;
}

// Each pulled receive copies its part's share of the sender's buffer (contiguous, whole 16-byte units)
// and closes the descriptor; then each pulled send waits for that, so that its buffer is free when the
// kernel ends. A descriptor outside what is mapped here raises an error and is closed unread.
template <typename T>
__device__ void pullOpenedParts(ChunkTransfers<T>& transfers, const P2pParts& parts,
                                const MappedBuffer* opened, const MappedRegion* mappedTable,
                                const WaitControl& control, int me) {
  for (int l = blockIdx.x; l < parts.count; l += gridDim.x) {
    const P2pPart& t = parts.part[l];
    if (t.isSend || !opened[l].ready) continue;
    const size_t share = roundUp(divCeil(t.bytes, t.parts), 16), first = t.part * share;
    const size_t bytes = first < t.bytes ? min(share, t.bytes - first) : 0;
    if (const char* source = mappedBuffer(mappedTable, t.peer, opened[l], t.bytes))
      copyChunk<T>(userChunk(t.buffer + first, bytes), userChunk(source + first, bytes), bytes, false, 1);
    else if (threadIdx.x == 0 && raiseKernelError(control, kKernelBadPeerData))
      reportMappedError(MappedCheck::kOutOfBounds, me, t.peer, 0, 0);
    transfers.closeDescriptor(t.peer, t.part);
  }
  for (int l = blockIdx.x; l < parts.count; l += gridDim.x) {
    const P2pPart& t = parts.part[l];
    if (t.isSend && opened[l].ready && !transfers.awaitDescriptorClosed(t.peer, t.part)) return;
  }
}

// p2p_schedule.cuh on chunk channels of their own, a chunk a piece, for the parts not pulled.
static_assert(sizeof(ChunkComm) + sizeof(P2pParts) + sizeof(P2pOpenings) + sizeof(void*) + sizeof(bool) <=
                  4096,
              "kernel parameters past 4 KiB cost launch time");
template <typename T>
__global__ void __launch_bounds__(kChunkThreads)
    sendRecvChunkedKernel(ChunkComm comm, P2pParts parts, P2pOpenings openings,
                          const MappedRegion* mappedTable, bool early) {
  enterKernel(early);
  __shared__ ChunkSlots slots;
  __shared__ MappedBuffer opened[kMaxP2pParts];
  ChunkTransfers<T> transfers(comm, slots);
  if (!openParts(transfers, parts, openings, opened)) return;
  if (!p2pRounds(transfers, parts, comm.slotBytes, [&](int l) { return opened[l].ready != 0; })) return;
  pullOpenedParts(transfers, parts, opened, mappedTable, comm.wait, comm.rank);
}

// Parts per transfer depend on its size only (two chunks per part at least), like the packet path's.
int chunkPartsFor(size_t bytes, size_t chunkBytes) {
  return static_cast<int>(std::clamp<size_t>(divCeil(bytes, 2 * chunkBytes), 1, kMaxP2pChunkParts));
}

}  // namespace

Status launchP2pChunked(const ChunkComm& comm, const MappedRegion* mappedTable, const std::vector<P2pOp>& ops,
                        int maxBlocks, int earlyLaunchBlocks, cudaStream_t stream) {
  if (comm.slotBytes != kP2pChunkSlotBytes || comm.blocks < kMaxP2pChunkParts)
    return fail(Status::kInternalError, "send/recv (chunked): chunk channels not set up for point-to-point");
  for (const P2pOp& op : ops)
    if (op.bytes > 0 && op.peer == comm.rank)
      return fail(Status::kInternalError, "send/recv (chunked): transfer to self");
  P2pParts parts{};
  size_t elementBytes = 8;
  MSCCLPP_TRY(cutIntoParts(ops, comm.rank, chunkPartsFor, comm.slotBytes, &parts, &elementBytes));
  if (parts.count == 0) return Status::kSuccess;
  // cutIntoParts keeps the order of `ops`: each transfer's parts follow the previous transfer's.
  P2pOpenings openings{};
  int sends = 0, next = 0;
  for (const P2pOp& op : ops) {
    if (!crossesRanks(op, comm.rank)) continue;
    const int count = chunkPartsFor(op.bytes, comm.slotBytes);
    if (p2pOpensWithDescriptor(op.bytes, mappedTable)) {
      if (op.isSend && sends == kMaxP2pOpenedSends)
        return fail(Status::kInternalError, "send/recv (chunked): more than %d zero-copy sends in a kernel",
                    kMaxP2pOpenedSends);
      if (op.isSend) openings.send[sends++] = op.source;
      for (int k = 0; k < count; ++k)
        parts.part[next + k].opening = static_cast<uint8_t>(op.isSend ? sends : 1);
    }
    next += count;
  }
  const LaunchShape shape =
      withEarlyLaunch({std::min(parts.count, maxBlocks), kChunkThreads, 0, false, false}, earlyLaunchBlocks);
  auto launch = [&](auto type, auto) {
    return launchKernel(sendRecvChunkedKernel<Tagged<decltype(type)>>, shape.blocks, shape.threads,
                        shape.earlyLaunch, shape.programmatic, stream, comm, parts, openings, mappedTable);
  };
  return launched(dispatchCopy(elementBytes, launch), "send/recv (chunked)");
}

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
