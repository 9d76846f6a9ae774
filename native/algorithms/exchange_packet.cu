#include <type_traits>

#include "native/algorithms/collective_names.cuh"
#include "native/algorithms/exchange.h"
#include "native/algorithms/exchange_schedule.cuh"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/algorithms/type_shards.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"
#include "native/device/step_sequence.cuh"
#include "native/primitives/packet_primitives.cuh"

namespace mscclpp_nccl {
namespace {

// exchange_schedule.cuh over packets, one step a round. The kernel is compiled per collective and role
// (root or not), so that it holds only the loops of its own flow (CompiledFlow).
template <typename Name, typename T, typename Op, bool kReduce, bool kRoot>
__global__ void __launch_bounds__(kPacketThreads, kPacketBlocksPerSm)
    exchangePacketKernel(PacketComm comm, ExchangeArgs args, size_t chunkBytes, int rounds, bool early) {
  enterKernel(early);
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);
  PacketRounds<T> packets(comm, wait, base, PreMultiply<T>(args.op.scaling, kReduce));
  const CompiledFlow<Name::kCollective, kRoot, kReduce> flow{args.root};
  exchangeRounds<Op>(packets, flow, args, comm.rank, chunkBytes, rounds, gridDim.x);
  endSteps(comm.steps, base, rounds, args.ticket);
}

}  // namespace

using ExchangePacketKernel = void (*)(PacketComm, ExchangeArgs, size_t, int, bool);

// The kernel for `args` on the root of a rooted call (`root`) or on any other rank, among those of type
// shard kShard (type_shards.cuh).
template <int kShard>
ExchangePacketKernel exchangePacketKernelOf(const ExchangeArgs& args, bool root);

template <>
ExchangePacketKernel exchangePacketKernelOf<kThisTypeShard>(const ExchangeArgs& args, bool root) {
  auto kernel = [root](auto name, auto reduce, auto type, auto op) -> ExchangePacketKernel {
    using Name = Tagged<decltype(name)>;
    using T = Tagged<decltype(type)>;
    using Op = Tagged<decltype(op)>;
    constexpr bool kReduce = decltype(reduce)::value;
    if constexpr (isRooted(Name::kCollective))
      if (root) return exchangePacketKernel<Name, T, Op, kReduce, true>;
    return exchangePacketKernel<Name, T, Op, kReduce, false>;
  };
  return dispatchExchange(args.collective, args.reduce, args.type, args.op.op,
                          heldKernels<ExchangePacketKernel>(kernel));
}

#if MSCCLPP_NCCL_HOST_SHARD
Status launchExchange(const PacketComm& comm, const ExchangeArgs& args, LaunchShape shape,
                      cudaStream_t stream) {
  const size_t words = divCeil(args.rangeBytes, kPacketPayloadBytes);
  const size_t chunkWords = shape.chunkBytes / kPacketPayloadBytes;
  int rounds = 0;
  MSCCLPP_TRY(kernelRounds(words, chunkWords * shape.blocks, "packet exchange", &rounds));
  const size_t chunkBytes = chunkWords * kPacketPayloadBytes;
  const bool root = isRooted(args.collective) && comm.rank == args.root;
  // The kernel's peer sets are compile-time constants (see above): the plan must have made the same.
  const ExchangeFlow flow = exchangeFlow(args.collective, root);
  if (args.sendTo != flow.sendTo || args.recvFrom != flow.recvFrom || (args.srcStride == 0) != flow.oneRange)
    return fail(Status::kInternalError,
                "packet exchange: a %s call planned with other peer sets than its kernel's",
                collectiveName(args.collective));
  const ExchangePacketKernel kernel = withTypeShard(args.type, args.op.op, args.reduce, [&](auto shard) {
    return exchangePacketKernelOf<decltype(shard)::value>(args, root);
  });
  return launched(launchKernel(kernel, shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic,
                               stream, comm, args, chunkBytes, rounds),
                  "packet exchange");
}
#endif

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
