#include "native/algorithms/collective_names.cuh"
#include "native/algorithms/exchange_chunked.cuh"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// The schedule of exchange_chunked.cuh as a kernel of its own (Name names it in profiles).
template <typename Name, typename T, typename Op, bool kReduce>
__global__ void __launch_bounds__(kLaneThreads)
    exchangeChunkedKernel(LaneComm comm, ExchangeArgs args, LaneSchedule schedule, bool early) {
  enterKernel(early);
  exchangeChunked<T, Op, kReduce>(comm, args, schedule);
}

}  // namespace

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
  auto launch = [&](auto name, auto reduce, auto type, auto op) {
    return launchKernel(exchangeChunkedKernel<Tagged<decltype(name)>, Tagged<decltype(type)>,
                                              Tagged<decltype(op)>, decltype(reduce)::value>,
                        shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic, stream, comm,
                        args, schedule);
  };
  return launched(dispatchExchange(args.collective, args.reduce, args.type, args.op.op, launch),
                  "chunked exchange");
}

MSCCLPP_MODULE_ANCHOR(exchangeChunkedModule)

}  // namespace mscclpp_nccl
