#include "native/algorithms/collective_names.cuh"
#include "native/algorithms/exchange_chunked.cuh"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/lane_kernel.cuh"
#include "native/algorithms/packet_kernel.cuh"
#include "native/algorithms/zero_copy_kernel.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// Reduces `bytes` bytes of every rank's source into `out`, eight ranks' loads in flight at once.
// kAligned: every buffer takes 16-byte accesses, so the loop compiles to plain vector loads and stores.
template <typename T, typename Op, bool kAligned>
__device__ __forceinline__ void reduceRanges(const char* const* sources, const int* sourceAlignment,
                                             const ChunkRef& out, size_t bytes, int nranks, int postDivisor) {
  reduceUnits<T, Op, 2, 8>(
      (bytes + 15) / 16, nranks, postDivisor,
      [&](int r, size_t i) { return loadUnit<T>(sources[r], i, bytes, kAligned ? 16 : sourceAlignment[r]); },
      [&](size_t i, Unit unit) {
        storeUnit<T>(out.base, i, out.bytes, kAligned ? 16 : out.alignment, unit);
      });
}

// The chunked schedule as a call rather than inlined, so that it does not push the zero-copy path's
// registers to spill (as in allreduce_zero_copy.cu).
template <typename T, typename Op, bool kReduce>
__device__ __noinline__ void exchangeScratchFallback(const LaneComm& lanes, const ExchangeArgs& args,
                                                     const LaneSchedule& schedule) {
  exchangeChunked<T, Op, kReduce>(lanes, args, schedule);
}

// The exchange of exchange_chunked.cu with no scratch: each rank pulls what every peer sends it, range
// `me` of the peer's source, straight into its destination (or reduces every rank's range `me` into
// its own range), so each byte is read once and written once. Block b takes bytes
// [b * blockBytes, (b + 1) * blockBytes) of every range. Peers only read sources and each rank only
// writes its own destination, so in-place calls are safe wherever a rank's destination ranges are not
// ranges its peers read from its source (alltoall in place is kept on scratch by the caller).
// A reduce is spread instead: rank r reduces segment r of the range (`segmentBytes`, blocks taking
// `blockBytes` of it) from every rank's source into the root's destination, so every rank's share of
// the GPU works on it, not the root's alone. Only rank r touches segment r, reading each unit of it
// before writing it, so in place is safe too. Where the ranks agree on scratch instead, the kernel runs
// the chunked exchange's schedule over `lanes` (exchange_chunked.cuh).
template <typename Name, typename T, typename Op, bool kReduce>
__global__ void __launch_bounds__(kZeroCopyThreads)
    exchangeMappedKernel(ZeroCopyComm comm, ExchangeArgs args, MappedCall mine, LaneComm lanes,
                         LaneSchedule scratch, size_t segmentBytes, size_t blockBytes, bool early) {
  enterKernel(early);
  __shared__ const char* sources[kMaxZeroCopyRanks];  // this block's part of rank r's range `me`
  __shared__ int sourceAlignment[kMaxZeroCopyRanks];
  __shared__ char* rootDestination;  // a spread reduce's output, as mapped here
  const int me = comm.rank, nranks = comm.nranks;
  const bool spread = kReduce && args.collective == Collective::kReduce;
  const size_t segmentStart = spread ? me * segmentBytes : 0;
  const size_t segmentEnd = spread ? min(args.rangeBytes, segmentStart + segmentBytes) : args.rangeBytes;
  const size_t first = segmentStart + blockIdx.x * blockBytes;
  BoundedWait wait(comm.wait);
  const uint64_t call = comm.calls[blockIdx.x] + 1;
  const MappedAgreement agreed =
      agreeOnMappedCall(comm, mine, call, wait, [&](int r, const MappedCall& theirs) {
        const char* source =
            r == me ? static_cast<const char*>(args.src) : mappedBuffer(comm, r, theirs.send);
        sources[r] = source + me * args.srcStride + first;
        sourceAlignment[r] = unitAlignment(sources[r]);
        if (spread && r == args.root)
          rootDestination = r == me ? static_cast<char*>(args.dst) : mappedBuffer(comm, r, theirs.recv);
      });
  if (agreed == MappedAgreement::kAbandoned) return;
  endZeroCopyCall(comm, call);  // the next call's barriers count from here, whichever way this one goes
  if (agreed == MappedAgreement::kScratch) {
    exchangeScratchFallback<T, Op, kReduce>(lanes, args, scratch);
    return;
  }
  const size_t n = first < segmentEnd ? min(blockBytes, segmentEnd - first) : 0;
  char* dst = static_cast<char*>(args.dst);
  auto receivesFrom = [&](int r) { return peerSetHas(args.recvFrom, r, args.root); };
  if (kReduce && (spread || args.recvFrom == PeerSet::kAll)) {
    const ChunkRef out = userChunk(spread ? rootDestination + first : dst + me * args.dstStride + first, n);
    bool aligned = out.alignment == 16;
    for (int r = threadIdx.x; r < nranks; r += blockDim.x) aligned = aligned && sourceAlignment[r] == 16;
    withUnitAlignment(aligned, [&](auto kAligned) {
      reduceRanges<T, Op, decltype(kAligned)::value>(sources, sourceAlignment, out, n, nranks,
                                                     args.op.scaling.postDivisor);
    });
  } else if (!kReduce) {
    for (int k = 0; k < nranks; ++k) {
      const int r = (me + k) % nranks;  // own range first, then the peers in turn
      if (!receivesFrom(r) || (r == me && !peerSetHas(args.sendTo, me, args.root))) continue;
      copyChunk<T>(userChunk(dst + r * args.dstStride + first, n), userChunk(sources[r], n), n, false,
                   typename ElementTraits<T>::Acc(1));
    }
  }
  finishZeroCopyCall(comm, call, wait);
}

}  // namespace

Status launchExchangeMapped(const ZeroCopyComm& comm, const LaneComm& lanes, const ExchangeArgs& args,
                            const MappedCall& mine, LaunchShape shape, LaunchShape scratch,
                            cudaStream_t stream) {
  if ((args.reduce && args.op.scaling.preMultiply) || comm.nranks > kMaxZeroCopyRanks ||
      shape.blocks > kMaxZeroCopyBlocks || !comm.mappedTable || scratch.blocks > shape.blocks ||
      shape.threads < scratch.threads)
    return fail(Status::kInternalError, "zero-copy exchange given a call it does not serve");
  LaneSchedule schedule{};
  MSCCLPP_TRY(exchangeLaneSchedule(args, scratch, &schedule));
  auto aligned = [](size_t bytes) { return divCeil(bytes, kLaneAlignment) * kLaneAlignment; };
  // A reduce is spread over the ranks in segments (see the kernel); the rest take whole ranges.
  const size_t segmentBytes = args.reduce && args.collective == Collective::kReduce
                                  ? aligned(divCeil(args.rangeBytes, comm.nranks))
                                  : args.rangeBytes;
  const size_t blockBytes = aligned(divCeil(segmentBytes, shape.blocks));
  auto launch = [&](auto name, auto reduce, auto type, auto op) {
    return launchKernel(exchangeMappedKernel<Tagged<decltype(name)>, Tagged<decltype(type)>,
                                             Tagged<decltype(op)>, decltype(reduce)::value>,
                        shape.blocks, shape.threads, shape.earlyLaunch, stream, comm, args, mine, lanes,
                        schedule, segmentBytes, blockBytes);
  };
  return launched(dispatchExchange(args.collective, args.reduce, args.type, args.op.op, launch),
                  "zero-copy exchange");
}

}  // namespace mscclpp_nccl
