#include "native/algorithms/allreduce.h"
#include "native/algorithms/allreduce_two_shot.cuh"
#include "native/algorithms/collective_names.cuh"
#include "native/algorithms/exchange.h"
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

// allreduce_two_shot.cuh over packets, two steps a round (scatter, then gather); a reduce to `root` when
// Name is Reduce.
template <typename Name, typename T, typename Op>
__global__ void __launch_bounds__(kPacketThreads, kPacketBlocksPerSm)
    twoShotPacketKernel(PacketComm comm, AllReduceArgs args, int root, size_t segmentBytes, size_t chunkBytes,
                        int rounds, bool early) {
  enterKernel(early);
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);
  PacketRounds<T> packets(comm, wait, base, PreMultiply<T>(args.op.scaling, true), 2);
  twoShotRounds<Op, isRooted(Name::kCollective)>(packets, args, args.count * sizeof(T), comm.rank, root,
                                                 segmentBytes, chunkBytes, rounds, gridDim.x);
  endSteps(comm.steps, base, 2ull * rounds, args.ticket);
}

}  // namespace

using TwoShotPacketKernel = void (*)(PacketComm, AllReduceArgs, int, size_t, size_t, int, bool);

// The kernel for `args` (an all-reduce where `root` < 0, else a reduce) among those of type shard kShard
// (type_shards.cuh).
template <int kShard>
TwoShotPacketKernel twoShotPacketKernelOf(const AllReduceArgs& args, int root);

template <>
TwoShotPacketKernel twoShotPacketKernelOf<kThisTypeShard>(const AllReduceArgs& args, int root) {
  auto kernel = [root](auto type, auto op) {
    using T = Tagged<decltype(type)>;
    using Op = Tagged<decltype(op)>;
    return root < 0 ? twoShotPacketKernel<AllReduce, T, Op> : twoShotPacketKernel<Reduce, T, Op>;
  };
  return dispatchReduce(args.type, args.op.op, heldKernels<TwoShotPacketKernel>(kernel));
}

#if MSCCLPP_NCCL_HOST_SHARD
namespace {

// Launches the kernel above for an all-reduce (root -1) or a reduce to `root`.
Status launchTwoShotPacket(const PacketComm& comm, const AllReduceArgs& args, int root, LaunchShape shape,
                           cudaStream_t stream, const char* algorithm) {
  const size_t words = divCeil(args.count * dataTypeSize(args.type), kPacketPayloadBytes);
  const size_t segmentWords = divCeil(words, comm.nranks);
  const size_t chunkWords = shape.chunkBytes / kPacketPayloadBytes;
  int rounds = 0;
  MSCCLPP_TRY(kernelRounds(segmentWords, chunkWords * shape.blocks, algorithm, &rounds));
  const size_t segmentBytes = segmentWords * kPacketPayloadBytes,
               chunkBytes = chunkWords * kPacketPayloadBytes;
  const TwoShotPacketKernel kernel = withTypeShard(args.type, args.op.op, true, [&](auto shard) {
    return twoShotPacketKernelOf<decltype(shard)::value>(args, root);
  });
  return launched(launchKernel(kernel, shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic,
                               stream, comm, args, root, segmentBytes, chunkBytes, rounds),
                  algorithm);
}

}  // namespace

Status launchAllReduceTwoShotPacket(const PacketComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                    cudaStream_t stream) {
  return launchTwoShotPacket(comm, args, -1, shape, stream, "all-reduce (two-shot packet)");
}

Status launchReduceTwoShotPacket(const PacketComm& comm, const ExchangeArgs& args, LaunchShape shape,
                                 cudaStream_t stream) {
  const AllReduceArgs reduce{args.src,  args.dst, args.rangeBytes / dataTypeSize(args.type),
                             args.type, args.op,  args.ticket};
  return launchTwoShotPacket(comm, reduce, args.root, shape, stream, "reduce (two-shot packet)");
}
#endif

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
