#include "native/algorithms/collective_names.cuh"
#include "native/algorithms/exchange_chunked.cuh"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/type_shards.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// The schedule of exchange_chunked.cuh as a kernel of its own.
template <typename T, typename Op, bool kReduce>
__global__ void __launch_bounds__(kLaneThreads)
    exchangeChunkedKernel(LaneComm comm, ExchangeArgs args, LaneSchedule schedule, bool early) {
  enterKernel(early);
  exchangeChunked<T, Op, kReduce>(comm, args, schedule);
}

}  // namespace

using ExchangeChunkedKernel = void (*)(LaneComm, ExchangeArgs, LaneSchedule, bool);

// The kernel for `args` among those of type shard kShard (type_shards.cuh).
template <int kShard>
ExchangeChunkedKernel exchangeChunkedKernelOf(const ExchangeArgs& args);

template <>
ExchangeChunkedKernel exchangeChunkedKernelOf<kThisTypeShard>(const ExchangeArgs& args) {
  auto kernel = [](auto reduce, auto type, auto op) {
    return exchangeChunkedKernel<Tagged<decltype(type)>, Tagged<decltype(op)>, decltype(reduce)::value>;
  };
  return dispatchExchangeWork(args.reduce, args.type, args.op.op, heldKernels<ExchangeChunkedKernel>(kernel));
}

#if MSCCLPP_NCCL_HOST_SHARD
Status exchangeLaneSchedule(const ExchangeArgs& args, LaunchShape shape, LaneSchedule* schedule) {
  schedule->chunkBytes = shape.chunkBytes;
  schedule->blocks = shape.blocks;
  return kernelRounds(args.rangeBytes, shape.chunkBytes * shape.blocks, "chunked exchange",
                      &schedule->rounds);
}

Status launchExchangeChunked(const LaneComm& comm, const ExchangeArgs& args, LaunchShape shape,
                             cudaStream_t stream) {
  LaneSchedule schedule{};
  MSCCLPP_TRY(exchangeLaneSchedule(args, shape, &schedule));
  const ExchangeChunkedKernel kernel = withTypeShard(args.type, args.op.op, args.reduce, [&](auto shard) {
    return exchangeChunkedKernelOf<decltype(shard)::value>(args);
  });
  return launched(launchKernel(kernel, shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic,
                               stream, comm, args, schedule),
                  "chunked exchange");
}
#endif

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
