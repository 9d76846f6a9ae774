#include "native/algorithms/allreduce_two_shot_chunked.cuh"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/lane_kernel.cuh"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/packet_kernel.cuh"
#include "native/algorithms/type_shards.cuh"
#include "native/algorithms/zero_copy_kernel.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// Rank r owns segment r of the message (`segmentBytes`, a multiple of 16); block b of every rank takes
// bytes [b * blockBytes, (b + 1) * blockBytes) of its rank's segment. It reads that part of every
// rank's input directly, reduces it in rank order and stores the result into every rank's output: each
// rank reads and writes the message once, against five times through lane scratch. In place works:
// only segment r's owner touches segment r, and it reads every unit before writing it.
struct DirectPart {
  const char* inputs[kMaxZeroCopyRanks];  // every rank's input, at this block's part
  char* outputs[kMaxZeroCopyRanks];       // every rank's output, likewise
  int inputAlignment[kMaxZeroCopyRanks];
  int outputAlignment[kMaxZeroCopyRanks];
  size_t start;   // the part's first byte in the message
  size_t length;  // its bytes (0: this block has nothing)
};

__device__ __forceinline__ void locatePart(DirectPart& part, int me, size_t bytes, size_t segmentBytes,
                                           size_t blockBytes) {
  part.start = me * segmentBytes + blockIdx.x * blockBytes;
  const size_t end = min(bytes, min((me + 1) * segmentBytes, part.start + blockBytes));
  part.length = part.start < end ? end - part.start : 0;
}

// Rank r's buffers of the call: `input` and `output` at the start of the message.
__device__ __forceinline__ void setRankBuffers(DirectPart& part, int r, const char* input, char* output) {
  part.inputs[r] = input + part.start;
  part.outputs[r] = output + part.start;
  part.inputAlignment[r] = unitAlignment(part.inputs[r]);
  part.outputAlignment[r] = unitAlignment(part.outputs[r]);
}

// Reduces the part from every rank's input (eight ranks' loads in flight at once) and stores it into
// every rank's output. kAligned: every buffer takes 16-byte accesses, so the loop compiles to plain
// vector loads and stores; the general form handles buffers at any element offset.
template <typename T, typename Op, bool kAligned>
__device__ __forceinline__ void reduceIntoEveryRank(const DirectPart& part, int me, int nranks,
                                                    int postDivisor) {
  reduceUnits<T, Op, 2, 8>(
      (part.length + 15) / 16, nranks, postDivisor,
      [&](int r, size_t i) {
        return loadUnit<T>(part.inputs[r], i, part.length, kAligned ? 16 : part.inputAlignment[r]);
      },
      [&](size_t i, Unit unit) {
        for (int k = 0; k < nranks; ++k) {
          const int r = (me + k) % nranks;  // own output first, then the peers in turn
          storeUnit<T>(part.outputs[r], i, part.length, kAligned ? 16 : part.outputAlignment[r], unit);
        }
      });
}

// Once every rank has arrived: reduce the part into every rank's output, then wait until no peer
// touches this rank's buffers. False when a wait was abandoned.
template <typename T, typename Op>
__device__ __forceinline__ bool reduceAndFinish(const ZeroCopyComm& comm, const AllReduceArgs& args,
                                                const DirectPart& part, uint64_t call, BoundedWait& wait) {
  bool aligned = true;
  for (int r = threadIdx.x; r < comm.nranks; r += blockDim.x)
    aligned = aligned && part.inputAlignment[r] == 16 && part.outputAlignment[r] == 16;
  withUnitAlignment(aligned, [&](auto kAligned) {
    reduceIntoEveryRank<T, Op, decltype(kAligned)::value>(part, comm.rank, comm.nranks,
                                                          args.op.scaling.postDivisor);
  });
  return finishZeroCopyCall(comm, call, wait);
}

// Buffers in windows: rank r's are its window base plus the offset every rank shares.
template <typename T, typename Op>
__global__ void __launch_bounds__(kZeroCopyThreads)
    allReduceZeroCopyKernel(ZeroCopyComm comm, AllReduceArgs args, PeerBuffers send, PeerBuffers recv,
                            size_t segmentBytes, size_t blockBytes, bool early) {
  enterKernel(early);
  __shared__ DirectPart part;
  const int me = comm.rank, nranks = comm.nranks;
  if (threadIdx.x == 0) locatePart(part, me, args.count * sizeof(T), segmentBytes, blockBytes);
  __syncthreads();
  for (int r = threadIdx.x; r < nranks; r += blockDim.x)
    setRankBuffers(part, r, send.bases[r] + send.offset, recv.bases[r] + recv.offset);
  BoundedWait wait(comm.wait);
  const uint64_t call = comm.calls[blockIdx.x] + 1;
  if (!peerBarrier(comm.localFlags, comm.peerFlags, 0, me, nranks, call, wait)) return;
  if (!reduceAndFinish<T, Op>(comm, args, part, call, wait)) return;
  endZeroCopyCall(comm, call);
}

// The chunked schedule as a call rather than inlined: inlined, it shares the zero-copy path's registers and
// pushes both to spill (ptxas: 268 bytes of spill stores for bf16); called, the zero-copy path spills
// nothing, and the scratch path, taken only until the peers have mapped the buffers, pays the call.
template <typename T, typename Op>
__device__ __noinline__ void allReduceScratchFallback(const LaneComm& lanes, const AllReduceArgs& args,
                                                      size_t segmentBytes, const LaneSchedule& schedule) {
  allReduceTwoShotChunked<T, Op>(lanes, args, segmentBytes, schedule);
}

// Any buffers: where every rank's are mapped by every peer (zero_copy_kernel.cuh), as above; else the
// two-shot chunked schedule over `lanes` (allreduce_two_shot_chunked.cuh), in this kernel.
template <typename T, typename Op>
__global__ void __launch_bounds__(kZeroCopyThreads)
    allReduceMappedKernel(ZeroCopyComm comm, AllReduceArgs args, MappedCall mine, LaneComm lanes,
                          LaneSchedule scratch, size_t segmentBytes, size_t blockBytes, bool early) {
  enterKernel(early);
  __shared__ DirectPart part;
  const int me = comm.rank;
  const size_t bytes = args.count * sizeof(T);
  if (threadIdx.x == 0) locatePart(part, me, bytes, segmentBytes, blockBytes);
  BoundedWait wait(comm.wait);
  const uint64_t call = comm.calls[blockIdx.x] + 1;
  const MappedCall posted = postedCall(mine, Collective::kAllReduce, bytes, 0);
  const MappedAgreement agreed =
      agreeOnMappedCall(comm, posted, call, wait, [&](int r, const MappedCall& theirs) {
        if (r == me) {
          setRankBuffers(part, r, static_cast<const char*>(args.send), static_cast<char*>(args.recv));
          return true;
        }
        // The block touches the same part of every rank's input and output: up to the part's end.
        const uint64_t reach = part.length ? part.start + part.length : 0;
        const char* input = mappedBuffer(comm, r, theirs.send, reach);
        char* output = mappedBuffer(comm, r, theirs.recv, reach);
        if (!input || !output) return false;
        setRankBuffers(part, r, input, output);
        return true;
      });
  if (agreed == MappedAgreement::kAbandoned) return;
  endZeroCopyCall(comm, call);  // the next call's barriers count from here, whichever way this one goes
  if (agreed == MappedAgreement::kZeroCopy)
    reduceAndFinish<T, Op>(comm, args, part, call, wait);
  else if (agreed == MappedAgreement::kScratch)
    allReduceScratchFallback<T, Op>(lanes, args, segmentBytes, scratch);
  // kFailed: the call raised an error and moves nothing (zero_copy_kernel.cuh: agreeOnMappedCall).
}

}  // namespace

using AllReduceZeroCopyKernel = void (*)(ZeroCopyComm, AllReduceArgs, PeerBuffers, PeerBuffers, size_t,
                                         size_t, bool);
using AllReduceMappedKernel = void (*)(ZeroCopyComm, AllReduceArgs, MappedCall, LaneComm, LaneSchedule,
                                       size_t, size_t, bool);

// The kernels for `args` among those of type shard kShard (type_shards.cuh).
template <int kShard>
AllReduceZeroCopyKernel allReduceZeroCopyKernelOf(const AllReduceArgs& args);
template <int kShard>
AllReduceMappedKernel allReduceMappedKernelOf(const AllReduceArgs& args);

template <>
AllReduceZeroCopyKernel allReduceZeroCopyKernelOf<kThisTypeShard>(const AllReduceArgs& args) {
  auto kernel = [](auto type, auto op) {
    return allReduceZeroCopyKernel<Tagged<decltype(type)>, Tagged<decltype(op)>>;
  };
  return dispatchReduce(args.type, args.op.op, heldKernels<AllReduceZeroCopyKernel>(kernel));
}

template <>
AllReduceMappedKernel allReduceMappedKernelOf<kThisTypeShard>(const AllReduceArgs& args) {
  auto kernel = [](auto type, auto op) {
    return allReduceMappedKernel<Tagged<decltype(type)>, Tagged<decltype(op)>>;
  };
  return dispatchReduce(args.type, args.op.op, heldKernels<AllReduceMappedKernel>(kernel));
}

#if MSCCLPP_NCCL_HOST_SHARD
namespace {

template <typename Kernel, typename... Buffers>
Status launchDirect(Kernel kernel, const ZeroCopyComm& comm, const AllReduceArgs& args, LaunchShape shape,
                    cudaStream_t stream, const Buffers&... buffers) {
  const size_t segmentBytes =
      divCeil(divCeil(args.count * dataTypeSize(args.type), comm.nranks), kLaneAlignment) * kLaneAlignment;
  const size_t blockBytes = divCeil(divCeil(segmentBytes, shape.blocks), kLaneAlignment) * kLaneAlignment;
  return launched(launchKernel(kernel, shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic,
                               stream, comm, args, buffers..., segmentBytes, blockBytes),
                  "all-reduce (zero-copy)");
}

Status checkDirect(const ZeroCopyComm& comm, const AllReduceArgs& args, LaunchShape shape) {
  if (args.op.scaling.preMultiply || comm.nranks > kMaxZeroCopyRanks || shape.blocks > kMaxZeroCopyBlocks)
    return fail(Status::kInternalError, "all-reduce (zero-copy) given a call it does not serve");
  return Status::kSuccess;
}

}  // namespace

Status launchAllReduceZeroCopy(const ZeroCopyComm& comm, const AllReduceArgs& args, const PeerBuffers& send,
                               const PeerBuffers& recv, LaunchShape shape, cudaStream_t stream) {
  MSCCLPP_TRY(checkDirect(comm, args, shape));
  const AllReduceZeroCopyKernel kernel = withTypeShard(args.type, args.op.op, true, [&](auto shard) {
    return allReduceZeroCopyKernelOf<decltype(shard)::value>(args);
  });
  return launchDirect(kernel, comm, args, shape, stream, send, recv);
}

Status launchAllReduceMapped(const ZeroCopyComm& comm, const LaneComm& lanes, const AllReduceArgs& args,
                             const MappedCall& mine, LaunchShape shape, LaunchShape scratch,
                             cudaStream_t stream) {
  MSCCLPP_TRY(checkDirect(comm, args, shape));
  if (!comm.mappedTable || !holdsGrid(shape, scratch))
    return fail(Status::kInternalError, "all-reduce (mapped zero-copy) without its tables or grid");
  size_t segmentBytes = 0;
  LaneSchedule schedule{};
  MSCCLPP_TRY(allReduceLaneSchedule(lanes, args, scratch, &segmentBytes, &schedule));
  const AllReduceMappedKernel kernel = withTypeShard(args.type, args.op.op, true, [&](auto shard) {
    return allReduceMappedKernelOf<decltype(shard)::value>(args);
  });
  return launchDirect(kernel, comm, args, shape, stream, mine, lanes, schedule);
}
#endif

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
