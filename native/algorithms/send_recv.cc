#include "native/algorithms/send_recv.h"

#include <algorithm>

#include "native/common/logging.h"

namespace mscclpp_nccl {

// A kernel's transfer parts travel as one parameter of at most kMaxP2pParts, so each path runs a pass as
// kernels of the transfers with peers in consecutive ranges of distance (a send to rank + d, a receive from
// rank - d), as many distances per kernel as a send and a receive cut into the most parts allow. Both ends
// see a transfer at the same distance and on the same path (chosen by its size), so each kernel's transfers
// pair up across the ranks; every rank launches the packet kernels, then the chunked ones, in distance
// order, so none waits on a kernel that is not running.
constexpr int kPacketDistancesPerKernel = kMaxP2pParts / (2 * kMaxP2pPacketParts);
constexpr int kChunkDistancesPerKernel = kMaxP2pParts / (2 * kMaxP2pChunkParts);
static_assert(kChunkDistancesPerKernel >= 1 && kPacketDistancesPerKernel >= 1,
              "a kernel must hold a send and a receive cut into the most parts");
static_assert(kChunkDistancesPerKernel <= kMaxP2pOpenedSends,
              "a chunked kernel's sends may all open zero-copy");

namespace {

// What the tuning log calls a transfer's path; a zero-copy send says whether its receiver has its buffer
// mapped (the receiver learns it on the device).
const char* pathName(const P2pOp& op, bool chunked, const MappedRegion* mappedTable) {
  if (!chunked) return "p2p_packet";
  if (!p2pOpensWithDescriptor(op.bytes, mappedTable)) return "p2p_chunked";
  if (!op.isSend) return "p2p_chunked, zero-copy where the sender's buffer is mapped";
  return op.source.ready ? "p2p_chunked, zero-copy (mapped, ready)"
                         : "p2p_chunked, zero-copy (mapped, not ready)";
}

}  // namespace

Status runSendRecv(const Transports& transports, const AlgorithmSelector& selector,
                   const std::vector<P2pOp>& ops, uint64_t ticket, cudaStream_t stream, SendSources* sources,
                   uint64_t* published) {
  *published = 0;
  const int rank = transports.p2p.packets.rank, nranks = transports.p2p.packets.nranks;
  // Kernel k of a path holds the distances in (k * perKernel, (k + 1) * perKernel]; self, kernel 0.
  auto kernelOf = [](int distance, int perKernel) { return distance == 0 ? 0 : (distance - 1) / perKernel; };
  // The thread keeps the per-kernel lists, with their capacity: an eager group allocates nothing here.
  thread_local std::vector<std::vector<P2pOp>> packets, chunks;
  auto reset = [](std::vector<std::vector<P2pOp>>& kernels, size_t count) {
    kernels.resize(count);
    for (std::vector<P2pOp>& kernel : kernels) kernel.clear();
  };
  reset(packets, kernelOf(nranks - 1, kPacketDistancesPerKernel) + 1);
  reset(chunks, kernelOf(nranks - 1, kChunkDistancesPerKernel) + 1);
  for (const P2pOp& op : ops) {
    const int distance = ((op.isSend ? op.peer - rank : rank - op.peer) + nranks) % nranks;
    const Choice choice = selector.choose(Collective::kSendRecv, op.elementBytes, op.bytes);
    const bool chunked = choice.algorithm->id == AlgorithmId::kP2pChunked && op.peer != rank &&
                         transports.p2pChunks.localScratch != nullptr;
    P2pOp& planned = chunked ? chunks[kernelOf(distance, kChunkDistancesPerKernel)].emplace_back(op)
                             : packets[kernelOf(distance, kPacketDistancesPerKernel)].emplace_back(op);
    if (chunked && op.isSend && sources && p2pOpensWithDescriptor(op.bytes, transports.direct.mappedTable))
      planned.source = sources->describe(op);
    MSCCLPP_INFO(kTuning, "sendrecv %zu bytes %s peer %d: %s (%s)", op.bytes, op.isSend ? "to" : "from",
                 op.peer, pathName(planned, chunked, transports.direct.mappedTable), choice.source);
  }
  // The chunked kernels publish no ticket: the last packet kernel publishes it when no chunked one follows.
  auto launches = [rank](const std::vector<P2pOp>& kernel) { return p2pLaunchesKernel(kernel, rank); };
  size_t publisher = packets.size();  // none
  if (std::none_of(chunks.begin(), chunks.end(), launches))
    for (size_t k = 0; k < packets.size(); ++k)
      if (launches(packets[k])) publisher = k;
  for (size_t k = 0; k < packets.size(); ++k)
    if (!packets[k].empty())  // transfers to self only still copy
      MSCCLPP_TRY(launchP2p(transports.p2p, packets[k], selector.maxBlocks(), selector.earlyLaunchBlocks(),
                            k == publisher ? ticket : 0, stream));
  if (publisher < packets.size()) *published = ticket;
  for (const std::vector<P2pOp>& kernel : chunks)
    if (launches(kernel))
      MSCCLPP_TRY(launchP2pChunked(transports.p2pChunks, transports.direct.mappedTable, kernel,
                                   selector.chunkBlocks(), selector.earlyLaunchBlocks(), stream));
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
