#include "native/algorithms/allreduce_two_shot_chunked.cuh"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/type_shards.cuh"
#include "native/common/arithmetic.h"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// The schedule of allreduce_two_shot_chunked.cuh as a kernel of its own.
template <typename T, typename Op>
__global__ void __launch_bounds__(kChunkThreads)
    allReduceTwoShotChunkedKernel(ChunkComm comm, AllReduceArgs args, size_t segmentBytes,
                                  ChunkSchedule schedule, bool early) {
  enterKernel(early);
  allReduceTwoShotChunked<T, Op>(comm, args, segmentBytes, schedule);
}

}  // namespace

using AllReduceTwoShotChunkedKernel = void (*)(ChunkComm, AllReduceArgs, size_t, ChunkSchedule, bool);

// The kernel for `args` among those of type shard kShard (type_shards.cuh).
template <int kShard>
AllReduceTwoShotChunkedKernel allReduceTwoShotChunkedKernelOf(const AllReduceArgs& args);

template <>
AllReduceTwoShotChunkedKernel allReduceTwoShotChunkedKernelOf<kThisTypeShard>(const AllReduceArgs& args) {
  auto kernel = [](auto type, auto op) {
    return allReduceTwoShotChunkedKernel<Tagged<decltype(type)>, Tagged<decltype(op)>>;
  };
  return dispatchReduce(args.type, args.op.op, heldKernels<AllReduceTwoShotChunkedKernel>(kernel));
}

#if MSCCLPP_NCCL_HOST_SHARD
Status allReduceChunkSchedule(const ChunkComm& comm, const AllReduceArgs& args, LaunchShape shape,
                              size_t* segmentBytes, ChunkSchedule* schedule) {
  *segmentBytes = allReduceSegmentBytes(args, comm.nranks);
  schedule->chunkBytes = shape.chunkBytes;
  schedule->blocks = shape.blocks;
  return kernelRounds(*segmentBytes, shape.chunkBytes * shape.blocks, "all-reduce (two-shot chunked)",
                      &schedule->rounds);
}

Status launchAllReduceTwoShotChunked(const ChunkComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                     cudaStream_t stream) {
  size_t segmentBytes = 0;
  ChunkSchedule schedule{};
  MSCCLPP_TRY(allReduceChunkSchedule(comm, args, shape, &segmentBytes, &schedule));
  const AllReduceTwoShotChunkedKernel kernel = withTypeShard(args.type, args.op.op, true, [&](auto shard) {
    return allReduceTwoShotChunkedKernelOf<decltype(shard)::value>(args);
  });
  return launched(launchKernel(kernel, shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic,
                               stream, comm, args, segmentBytes, schedule),
                  "all-reduce (two-shot chunked)");
}
#endif

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
