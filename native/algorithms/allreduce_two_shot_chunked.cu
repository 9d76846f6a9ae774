#include "native/algorithms/allreduce_two_shot_chunked.cuh"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// The schedule of allreduce_two_shot_chunked.cuh as a kernel of its own.
template <typename T, typename Op>
__global__ void __launch_bounds__(kLaneThreads)
    allReduceTwoShotChunkedKernel(LaneComm comm, AllReduceArgs args, size_t segmentBytes,
                                  LaneSchedule schedule, bool early) {
  enterKernel(early);
  allReduceTwoShotChunked<T, Op>(comm, args, segmentBytes, schedule);
}

}  // namespace

Status allReduceLaneSchedule(const LaneComm& comm, const AllReduceArgs& args, LaunchShape shape,
                             size_t* segmentBytes, LaneSchedule* schedule) {
  *segmentBytes =
      divCeil(divCeil(args.count * dataTypeSize(args.type), comm.nranks), kLaneAlignment) * kLaneAlignment;
  schedule->chunkBytes = shape.chunkBytes;
  schedule->blocks = shape.blocks;
  return kernelRounds(*segmentBytes, shape.chunkBytes * shape.blocks, "all-reduce (two-shot chunked)",
                      &schedule->rounds);
}

Status launchAllReduceTwoShotChunked(const LaneComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                     cudaStream_t stream) {
  size_t segmentBytes = 0;
  LaneSchedule schedule{};
  MSCCLPP_TRY(allReduceLaneSchedule(comm, args, shape, &segmentBytes, &schedule));
  auto launch = [&](auto type, auto op) {
    return launchKernel(allReduceTwoShotChunkedKernel<Tagged<decltype(type)>, Tagged<decltype(op)>>,
                        shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic, stream, comm,
                        args, segmentBytes, schedule);
  };
  return launched(dispatchReduce(args.type, args.op.op, launch), "all-reduce (two-shot chunked)");
}

MSCCLPP_MODULE_ANCHOR(allReduceTwoShotChunkedModule)

}  // namespace mscclpp_nccl
