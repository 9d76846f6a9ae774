#include "native/algorithms/allreduce_direct.cuh"
#include "native/algorithms/allreduce_two_shot_chunked.cuh"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/type_shards.cuh"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// The chunked schedule as a call rather than inlined: inlined, it shares the zero-copy path's registers and
// pushes both to spill (ptxas: 268 bytes of spill stores for bf16); called, the zero-copy path spills
// nothing, and the scratch path, taken only until the peers have mapped the buffers, pays the call.
template <typename T, typename Op>
__device__ __noinline__ void allReduceScratchFallback(const ChunkComm& chunks, const AllReduceArgs& args,
                                                      size_t segmentBytes, const ChunkSchedule& schedule) {
  allReduceTwoShotChunked<T, Op>(chunks, args, segmentBytes, schedule);
}

// Any buffers: where every rank's are mapped by every peer (zero_copy_kernel.cuh), the direct all-reduce
// (allreduce_direct.cuh); else the two-shot chunked schedule over `chunks`
// (allreduce_two_shot_chunked.cuh), in this kernel.
template <typename T, typename Op>
__global__ void __launch_bounds__(kZeroCopyThreads)
    allReduceMappedKernel(ZeroCopyComm comm, AllReduceArgs args, MappedCall mine, ChunkComm chunks,
                          ChunkSchedule scratch, size_t segmentBytes, size_t blockBytes, bool early) {
  enterKernel(early);
  __shared__ DirectPart part;
  const int me = comm.rank;
  const size_t bytes = args.count * sizeof(T);
  if (threadIdx.x == 0) locatePart(part, me, bytes, segmentBytes, blockBytes);
  BoundedWait wait(comm.wait);
  const uint64_t call = comm.calls[blockIdx.x] + 1;
  const MappedCall posted = postedCall(mine, Collective::kAllReduce, bytes, 0);
  const MappedAgreement agreed =
      agreeOnMappedCall(comm, posted, call, wait, false, [&](int r, const MappedCall& theirs) {
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
    allReduceScratchFallback<T, Op>(chunks, args, segmentBytes, scratch);
  // kFailed: the call raised an error and moves nothing (zero_copy_kernel.cuh: agreeOnMappedCall).
}

}  // namespace

using AllReduceMappedKernel = void (*)(ZeroCopyComm, AllReduceArgs, MappedCall, ChunkComm, ChunkSchedule,
                                       size_t, size_t, bool);

// The kernel for `args` among those of type shard kShard (type_shards.cuh).
template <int kShard>
AllReduceMappedKernel allReduceMappedKernelOf(const AllReduceArgs& args);

template <>
AllReduceMappedKernel allReduceMappedKernelOf<kThisTypeShard>(const AllReduceArgs& args) {
  auto kernel = [](auto type, auto op) {
    return allReduceMappedKernel<Tagged<decltype(type)>, Tagged<decltype(op)>>;
  };
  return dispatchReduce(args.type, args.op.op, heldKernels<AllReduceMappedKernel>(kernel));
}

#if MSCCLPP_NCCL_HOST_SHARD
Status launchAllReduceMapped(const ZeroCopyComm& comm, const ChunkComm& chunks, const AllReduceArgs& args,
                             const MappedCall& mine, LaunchShape shape, LaunchShape scratch,
                             cudaStream_t stream) {
  MSCCLPP_TRY(checkDirect(comm, args, shape));
  if (!comm.mappedTable || !holdsGrid(shape, scratch))
    return fail(Status::kInternalError, "all-reduce (mapped zero-copy) without its tables or grid");
  size_t segmentBytes = 0;
  ChunkSchedule schedule{};
  MSCCLPP_TRY(allReduceChunkSchedule(chunks, args, scratch, &segmentBytes, &schedule));
  const AllReduceMappedKernel kernel = withTypeShard(args.type, args.op.op, true, [&](auto shard) {
    return allReduceMappedKernelOf<decltype(shard)::value>(args);
  });
  return launchDirect(kernel, comm, args, shape, stream, mine, chunks, schedule);
}
#endif

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
