#include "native/algorithms/collective_names.cuh"
#include "native/algorithms/exchange_chunked.cuh"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/transports.h"
#include "native/algorithms/type_shards.cuh"
#include "native/algorithms/zero_copy_kernel.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"
#include "native/primitives/chunk_primitives.cuh"
#include "native/primitives/packet_primitives.cuh"

namespace mscclpp_nccl {
namespace {

// Reduces `bytes` bytes of every rank's source into `out`, 2 units of 2 ranks in flight at once. Alone
// (perf/reduce_loop_bench.cu) 4 units did better, but in this kernel, beside the barriers and every rank's
// pointers, 4 units spill in every type and 2 in none (perf/ptxas-reduce-2x2-2026-12-06.csv); in
// nccl-tests 2 units took reduce_scatter and reduce at 4 MB from 27.6-29.6 us to 23.3-25.6 us
// (perf/reduce-schedule-2x2-2026-12-07.csv).
// kAligned: every buffer takes 16-byte accesses, so the loop compiles to plain vector loads and stores.
template <typename T, typename Op, bool kAligned>
__device__ __forceinline__ void reduceRanges(const char* const* sources, const int* sourceAlignment,
                                             const ChunkRef& out, size_t bytes, int nranks, int postDivisor) {
  reduceUnits<T, Op, 2, 2>(
      (bytes + 15) / 16, nranks, postDivisor,
      [&](int r, size_t i) { return loadUnit<T>(sources[r], i, bytes, kAligned ? 16 : sourceAlignment[r]); },
      [&](size_t i, Unit unit) {
        storeUnit<T>(out.base, i, out.bytes, kAligned ? 16 : out.alignment, unit);
      });
}

// Stores `bytes` bytes of `source` into every rank's destination, own first, then the peers in turn; not
// into the source itself (in place: the root's range of a broadcast, a rank's own of an all_gather),
// which would cost a write per byte for nothing.
template <typename T, bool kAligned>
__device__ __forceinline__ void pushRange(const char* source, int sourceAlignment, char* const* destinations,
                                          const int* destinationAlignment, size_t bytes, int me, int nranks) {
  forEachUnit<8>((bytes + 15) / 16,
                 [&](size_t i) { return loadUnit<T>(source, i, bytes, kAligned ? 16 : sourceAlignment); },
                 [&](size_t i, Unit unit) {
                   for (int k = 0; k < nranks; ++k) {
                     const int r = (me + k) % nranks;
                     if (destinations[r] == source) continue;
                     storeUnit<T>(destinations[r], i, bytes, kAligned ? 16 : destinationAlignment[r], unit);
                   }
                 });
}

// Copies `bytes` bytes of sources[r] into `destination` + r x `stride` for every rank r that `pulled`
// names, own range first, then the peers in turn; not where they are the same bytes (in place).
template <typename T, typename Pulled>
__device__ __forceinline__ void pullRanges(const char* const* sources, char* destination, size_t stride,
                                           size_t bytes, int me, int nranks, Pulled pulled) {
  for (int k = 0; k < nranks; ++k) {
    const int r = (me + k) % nranks;
    char* to = destination + r * stride;
    if (!pulled(r) || to == sources[r]) continue;
    copyChunk<T>(userChunk(to, bytes), userChunk(sources[r], bytes), bytes, false,
                 typename ElementTraits<T>::Acc(1));
  }
}

// The chunked schedule as a call rather than inlined, so that it does not push the zero-copy path's
// registers to spill (as in allreduce_mapped.cu).
template <typename T, typename Op, bool kReduce>
__device__ __noinline__ void exchangeScratchFallback(const ChunkComm& chunks, const ExchangeArgs& args,
                                                     const ChunkSchedule& schedule) {
  exchangeChunked<T, Op, kReduce>(chunks, args, schedule);
}

// Where a block of the mapped exchange reads and writes each rank's buffers (null where it does not), and
// how those addresses are aligned (unitAlignment).
struct MappedPart {
  const char* sources[kMaxZeroCopyRanks];  // this block's part of rank r's range `me`
  int sourceAlignment[kMaxZeroCopyRanks];
  char* destinations[kMaxZeroCopyRanks];  // what this rank writes of rank r's destination
  int destinationAlignment[kMaxZeroCopyRanks];
};

// The block's `n` bytes from `first` on, once `part` holds every rank's pointers (see the kernel below).
template <typename T, typename Op, bool kReduce>
__device__ __forceinline__ void moveMappedPart(const ExchangeArgs& args, const MappedPart& part, size_t first,
                                               size_t n, int me, int nranks) {
  const MappedFlow flow = mappedFlow(args);
  const int pusher = flow.spread ? args.root : me;  // whose source a push reads
  char* dst = static_cast<char*>(args.dst);
  if (kReduce && (flow.spread || args.recvFrom == PeerSet::kAll)) {
    const ChunkRef out = flow.spread
                             ? ChunkRef{part.destinations[args.root], n, part.destinationAlignment[args.root]}
                             : userChunk(dst + me * args.dstStride + first, n);
    bool aligned = out.alignment == 16;
    for (int r = threadIdx.x; r < nranks; r += blockDim.x) aligned = aligned && part.sourceAlignment[r] == 16;
    withUnitAlignment(aligned, [&](auto kAligned) {
      reduceRanges<T, Op, decltype(kAligned)::value>(part.sources, part.sourceAlignment, out, n, nranks,
                                                     args.op.scaling.postDivisor);
    });
  } else if (!kReduce && flow.push) {
    bool aligned = part.sourceAlignment[pusher] == 16;
    for (int r = threadIdx.x; r < nranks; r += blockDim.x)
      aligned = aligned && part.destinationAlignment[r] == 16;
    withUnitAlignment(aligned, [&](auto kAligned) {
      pushRange<T, decltype(kAligned)::value>(part.sources[pusher], part.sourceAlignment[pusher],
                                              part.destinations, part.destinationAlignment, n, me, nranks);
    });
  } else if (!kReduce) {
    pullRanges<T>(part.sources, dst + first, args.dstStride, n, me, nranks, [&](int r) {
      return peerSetHas(args.recvFrom, r, args.root) && (r != me || peerSetHas(args.sendTo, me, args.root));
    });
  }
}

// Whether a block of the mapped exchange reads rank r's source: every rank's in a reduce, the pusher's in a
// push (the root in a spread, else this rank), else those it receives from.
template <bool kReduce>
__device__ __forceinline__ bool readsSourceOf(const ExchangeArgs& args, int r, int me) {
  const MappedFlow flow = mappedFlow(args);
  if (kReduce) return flow.spread || args.recvFrom == PeerSet::kAll;
  if (flow.push) return r == (flow.spread ? args.root : me);
  return peerSetHas(args.recvFrom, r, args.root);
}

// Sets the block's pointers into rank r's source and destination (each at its start), where it touches them.
template <bool kReduce>
__device__ __forceinline__ void placeRankBuffers(MappedPart& part, const ExchangeArgs& args, int r, int me,
                                                 size_t first, const char* source, char* destination) {
  if (readsSourceOf<kReduce>(args, r, me)) {
    part.sources[r] = source + me * args.srcStride + first;
    part.sourceAlignment[r] = unitAlignment(part.sources[r]);
  }
  if (peersWriteDestination(args, r)) {  // the ranks whose destinations the call writes into
    part.destinations[r] = destination + me * args.dstStride + first;
    part.destinationAlignment[r] = unitAlignment(part.destinations[r]);
  }
}

// Symmetric windows: every rank's buffers lie at this rank's offsets in its windows, which every rank
// mapped when it registered them, so there is nothing to post or check. A call rather than inlined: in
// the kernel its pointers cost the reduce loop registers (ptxas: bf16 reduce spills 88 -> 272 bytes).
template <bool kReduce>
__device__ __noinline__ void placeWindowBuffers(MappedPart& part, const ExchangeArgs& args,
                                                const DirectBuffers& windows, int me, int nranks,
                                                size_t first) {
  for (int r = threadIdx.x; r < nranks; r += blockDim.x)
    placeRankBuffers<kReduce>(
        part, args, r, me, first,
        r == me ? static_cast<const char*>(args.src) : windows.send.bases[r] + windows.send.offset,
        r == me ? static_cast<char*>(args.dst) : windows.recv.bases[r] + windows.recv.offset);
}

// The exchange of exchange_chunked.cu with no scratch, moving each byte once (exchange.h: mappedFlow).
// A pull: each rank copies range `me` of every peer's source into its destination, or reduces every
// rank's range `me` into its own range. A push: the rank that reads a range (all_gather: its sender;
// broadcast, spread: rank r for segment r of the root's range) stores it into every rank's destination.
// A spread reduce: rank r reduces segment r of the range from every rank's source into the root's
// destination. Block b takes bytes [b * blockBytes, (b + 1) * blockBytes) of each range or segment.
// In place is safe wherever no rank writes what a peer still reads: a rank's destination range q is
// written by one rank only, with the bytes it reads from the same offset of its own part; reduces read
// each unit before writing it (alltoall in place is kept on scratch by the caller). Where the ranks
// agree on scratch instead, the kernel runs the chunked exchange's schedule over `chunks`
// (exchange_chunked.cuh).
// Where the buffers lie in symmetric windows (`windows`, else all null), the ranks find each other's there
// and post nothing.
template <typename T, typename Op, bool kReduce>
__global__ void __launch_bounds__(kZeroCopyThreads)
    exchangeMappedKernel(ZeroCopyComm comm, ExchangeArgs args, MappedCall mine, DirectBuffers windows,
                         ChunkComm chunks, ChunkSchedule scratch, size_t segmentBytes, size_t blockBytes,
                         bool early) {
  enterKernel(early);
  __shared__ MappedPart part;
  const int me = comm.rank, nranks = comm.nranks;
  const MappedFlow flow = mappedFlow(args);
  const size_t segmentStart = flow.spread ? me * segmentBytes : 0;
  const size_t segmentEnd = flow.spread ? min(args.rangeBytes, segmentStart + segmentBytes) : args.rangeBytes;
  const size_t first = segmentStart + blockIdx.x * blockBytes;
  const size_t n = first < segmentEnd ? min(blockBytes, segmentEnd - first) : 0;  // the block's bytes
  // The end of what the block touches of a rank's buffer whose part for this rank starts `stride` x me in.
  auto reach = [&](size_t stride) -> uint64_t { return n ? me * stride + first + n : 0; };
  BoundedWait wait(comm.wait);
  const uint64_t call = comm.calls[blockIdx.x] + 1;
  const bool inWindows = windows.send.bases != nullptr;
  if (inWindows) placeWindowBuffers<kReduce>(part, args, windows, me, nranks, first);
  const MappedCall posted = postedCall(mine, args.collective, args.rangeBytes, args.root);
  const MappedAgreement agreed =
      agreeOnMappedCall(comm, posted, call, wait, inWindows, [&](int r, const MappedCall& theirs) {
        const bool reads = readsSourceOf<kReduce>(args, r, me), writes = peersWriteDestination(args, r);
        const char* source = !reads    ? nullptr
                             : r == me ? static_cast<const char*>(args.src)
                                       : mappedBuffer(comm, r, theirs.send, reach(args.srcStride));
        char* destination = !writes   ? nullptr
                            : r == me ? static_cast<char*>(args.dst)
                                      : mappedBuffer(comm, r, theirs.recv, reach(args.dstStride));
        if ((reads && !source) || (writes && !destination)) return false;
        placeRankBuffers<kReduce>(part, args, r, me, first, source, destination);
        return true;
      });
  if (agreed == MappedAgreement::kAbandoned) return;
  endZeroCopyCall(comm, call);  // the next call's barriers count from here, whichever way this one goes
  if (agreed == MappedAgreement::kScratch) {
    exchangeScratchFallback<T, Op, kReduce>(chunks, args, scratch);
    return;
  }
  if (agreed == MappedAgreement::kFailed) return;  // an error was raised (agreeOnMappedCall): nothing moves
  moveMappedPart<T, Op, kReduce>(args, part, first, n, me, nranks);
  finishZeroCopyCall(comm, call, wait);
}

}  // namespace

using ExchangeMappedKernel = void (*)(ZeroCopyComm, ExchangeArgs, MappedCall, DirectBuffers, ChunkComm,
                                      ChunkSchedule, size_t, size_t, bool);

// The kernel for `args` among those of type shard kShard (type_shards.cuh).
template <int kShard>
ExchangeMappedKernel exchangeMappedKernelOf(const ExchangeArgs& args);

template <>
ExchangeMappedKernel exchangeMappedKernelOf<kThisTypeShard>(const ExchangeArgs& args) {
  auto kernel = [](auto reduce, auto type, auto op) {
    return exchangeMappedKernel<Tagged<decltype(type)>, Tagged<decltype(op)>, decltype(reduce)::value>;
  };
  return dispatchExchangeWork(args.reduce, args.type, args.op.op, heldKernels<ExchangeMappedKernel>(kernel));
}

#if MSCCLPP_NCCL_HOST_SHARD
Status launchExchangeMapped(const ZeroCopyComm& comm, const ChunkComm& chunks, const ExchangeArgs& args,
                            const MappedCall& mine, const DirectBuffers* windows, LaunchShape shape,
                            LaunchShape scratch, cudaStream_t stream) {
  if ((args.reduce && args.op.scaling.preMultiply) || comm.nranks > kMaxZeroCopyRanks ||
      shape.blocks > kMaxZeroCopyBlocks || !comm.mappedTable || !holdsGrid(shape, scratch))
    return fail(Status::kInternalError, "zero-copy exchange given a call it does not serve");
  ChunkSchedule schedule{};
  MSCCLPP_TRY(exchangeChunkSchedule(args, scratch, &schedule));
  // Rooted calls are spread over the ranks in segments (see the kernel); the rest take whole ranges.
  const size_t segmentBytes = mappedFlow(args).spread
                                  ? roundUp(divCeil(args.rangeBytes, comm.nranks), kChunkAlignment)
                                  : args.rangeBytes;
  const size_t blockBytes = roundUp(divCeil(segmentBytes, shape.blocks), kChunkAlignment);
  const ExchangeMappedKernel kernel = withTypeShard(args.type, args.op.op, args.reduce, [&](auto shard) {
    return exchangeMappedKernelOf<decltype(shard)::value>(args);
  });
  return launched(launchKernel(kernel, shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic,
                               stream, comm, args, mine, windows ? *windows : DirectBuffers{}, chunks,
                               schedule, segmentBytes, blockBytes),
                  "zero-copy exchange");
}
#endif

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
