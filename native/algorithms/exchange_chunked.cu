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
__global__ void __launch_bounds__(kChunkThreads)
    exchangeChunkedKernel(ChunkComm comm, ExchangeArgs args, ChunkSchedule schedule, bool early) {
  enterKernel(early);
  exchangeChunked<T, Op, kReduce>(comm, args, schedule);
}

}  // namespace

using ExchangeChunkedKernel = void (*)(ChunkComm, ExchangeArgs, ChunkSchedule, bool);

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
Status exchangeChunkSchedule(const ExchangeArgs& args, LaunchShape shape, ChunkSchedule* schedule) {
  schedule->chunkBytes = shape.chunkBytes;
  schedule->blocks = shape.blocks;
  return kernelRounds(args.rangeBytes, shape.chunkBytes * shape.blocks, "chunked exchange",
                      &schedule->rounds);
}

Status launchExchangeChunked(const ChunkComm& comm, const ExchangeArgs& args, LaunchShape shape,
                             cudaStream_t stream) {
  ChunkSchedule schedule{};
  MSCCLPP_TRY(exchangeChunkSchedule(args, shape, &schedule));
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
