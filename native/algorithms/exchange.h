// The packet exchange: one kernel shape that serves every collective whose ranks move equal-sized
// ranges between each other (all-gather, reduce-scatter, alltoall, broadcast, reduce, gather,
// scatter). Each rank sends range p of its source to peer p and receives peer q's range into range
// q of its destination, or, when reducing, combines every contribution to its own range in rank
// order. Which peers send and receive is a PeerSet, so rooted collectives are the same code.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/collective.h"
#include "native/common/data_type.h"
#include "native/common/status.h"
#include "native/primitives/packet_layout.h"

namespace mscclpp_nccl {

struct DirectBuffers;

enum class PeerSet : int { kNone = 0, kAll = 1, kRoot = 2 };

__host__ __device__ inline bool peerSetHas(PeerSet set, int rank, int root) {
  return set == PeerSet::kAll || (set == PeerSet::kRoot && rank == root);
}

// Who a rank sends to and takes data from, per collective and whether the rank is the root: the one
// table that collective_plans.cc plans calls by and exchange_packet.cu compiles its kernels for.
struct ExchangeFlow {
  PeerSet sendTo;
  PeerSet recvFrom;
  bool oneRange;  // every receiver gets the same range of the sender's source (srcStride 0)
};

__host__ __device__ constexpr bool isRooted(Collective collective) {
  return collective == Collective::kBroadcast || collective == Collective::kReduce ||
         collective == Collective::kGather || collective == Collective::kScatter;
}

__host__ __device__ constexpr ExchangeFlow exchangeFlow(Collective collective, bool root) {
  const PeerSet rootOnly = root ? PeerSet::kAll : PeerSet::kNone;  // the root's side of a rooted flow
  switch (collective) {
    case Collective::kBroadcast:
      return {rootOnly, PeerSet::kRoot, true};
    case Collective::kScatter:
      return {rootOnly, PeerSet::kRoot, false};
    case Collective::kGather:
      return {PeerSet::kRoot, rootOnly, true};  // the root sends to itself too
    case Collective::kReduce:
      return {root ? PeerSet::kNone : PeerSet::kRoot, rootOnly, true};
    case Collective::kAllGather:
      return {PeerSet::kAll, PeerSet::kAll, true};
    default:  // reduce_scatter, alltoall
      return {PeerSet::kAll, PeerSet::kAll, false};
  }
}

struct ExchangeArgs {
  const void* src;   // range sent to peer p: src + p * srcStride, rangeBytes long
  size_t srcStride;  // 0 when every peer gets the same range
  void* dst;         // range received from peer q: dst + q * dstStride
  size_t dstStride;  // 0 when reducing into one range
  size_t rangeBytes;
  PeerSet sendTo;    // peers this rank sends to
  PeerSet recvFrom;  // peers this rank receives from
  int root;
  bool reduce;  // combine the contributions (in rank order) instead of copying them
  DataType type;
  ReduceOp op;
  uint64_t ticket = 0;  // nonzero: the packet kernel publishes it when done (native/device/step_sequence.cuh)
  Collective collective = Collective::kAllGather;  // its flow; names the packet kernel (collective_names.cuh)
};

Status launchExchange(const PacketComm& comm, const ExchangeArgs& args, LaunchShape shape,
                      cudaStream_t stream);

// A reduce (args as planReduce plans them) on the two-shot all-reduce's schedule: rank r reduces segment
// r of every rank's input, then sends it to the root alone, in LL packets. Two steps per chunk, where the
// exchange's one step has the root take every rank's whole input.
Status launchReduceTwoShotPacket(const PacketComm& comm, const ExchangeArgs& args, LaunchShape shape,
                                 cudaStream_t stream);

// The same exchange in chunks (plain stores and semaphores): for large ranges.
Status launchExchangeChunked(const ChunkComm& comm, const ExchangeArgs& args, LaunchShape shape,
                             cudaStream_t stream);
// Its schedule for a grid of `shape`.
Status exchangeChunkSchedule(const ExchangeArgs& args, LaunchShape shape, ChunkSchedule* schedule);

// How the zero-copy exchange below moves a call's data. By default each rank pulls what its peers send
// it from their sources into its own destination. Where one range goes to every rank (all_gather,
// broadcast) it is pushed instead: read once and stored into every rank's destination, half a pull's
// reads. Spread: rank r takes segment r of the range, so that every rank's share of the GPU works on a
// rooted call, not the root's alone (a spread reduce writes into the root's destination).
struct MappedFlow {
  bool spread;
  bool push;
};

__host__ __device__ inline MappedFlow mappedFlow(const ExchangeArgs& args) {
  const bool broadcast = args.collective == Collective::kBroadcast;
  return {broadcast || (args.reduce && args.collective == Collective::kReduce),
          broadcast || args.collective == Collective::kAllGather};
}

// Whether the peers of `rank` read its source, or write into its destination, in the zero-copy exchange:
// what it must map for them (and, for destinations, which ranks' the kernel writes into).
inline bool peersReadSource(const ExchangeArgs& args, int rank) {
  const MappedFlow flow = mappedFlow(args);
  if (flow.spread) return args.reduce || rank == args.root;  // every source, or the root's
  if (flow.push) return false;                               // each rank pushes its own
  return args.sendTo == PeerSet::kAll || (args.sendTo == PeerSet::kRoot && rank != args.root);
}

__host__ __device__ inline bool peersWriteDestination(const ExchangeArgs& args, int rank) {
  const MappedFlow flow = mappedFlow(args);
  return flow.push || (flow.spread && args.reduce && rank == args.root);
}

// Whether a zero-copy exchange would overwrite ranges of its source that peers still read: an alltoall
// in place (its first srcBytes / dstBytes overlap), which therefore goes through scratch.
inline bool overwritesPeersSource(const ExchangeArgs& args, size_t srcBytes, size_t dstBytes) {
  const char* src = static_cast<const char*>(args.src);
  const char* dst = static_cast<const char*>(args.dst);
  return args.collective == Collective::kAlltoAll && src < dst + dstBytes && dst < src + srcBytes;
}

// Whether an exchange whose buffers lie in symmetric windows may find its peers' buffers there without
// posting them (launchExchangeMapped). Only where every rank passes both buffers: not a rooted call, whose
// ranks may pass buffers they do not use. Not where it must go through scratch (overwritesPeersSource).
inline bool exchangeMayUseWindows(const ExchangeArgs& args, size_t srcBytes, size_t dstBytes) {
  return !isRooted(args.collective) && !overwritesPeersSource(args, srcBytes, dstBytes);
}

// The same exchange with no scratch, on buffers anywhere (transport/mapped_allocations.h), as above:
// where every rank's are mapped by every peer, straight between the ranks' buffers; else none does, and
// the same kernel runs the chunked exchange's schedule over `chunks` for a grid of `scratch`. One kernel
// on `shape`, whose grid is at least scratch's. Not for PreMulSum. `windows` (or null): the buffers lie in
// symmetric windows (exchangeMayUseWindows), and the ranks skip posting and checking their descriptions.
Status launchExchangeMapped(const ZeroCopyComm& comm, const ChunkComm& chunks, const ExchangeArgs& args,
                            const MappedCall& mine, const DirectBuffers* windows, LaunchShape shape,
                            LaunchShape scratch, cudaStream_t stream);

}  // namespace mscclpp_nccl
