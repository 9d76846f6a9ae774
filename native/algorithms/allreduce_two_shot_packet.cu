#include "native/algorithms/allreduce.h"
#include "native/algorithms/allreduce_words.cuh"
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

// The input is cut into nranks segments of `segmentWords` words; rank r owns segment r. Each round,
// block b handles words [offset, offset + chunkWords) of every segment:
//   step 1: send those words of segment p to rank p; reduce this rank's segment in rank order;
//   step 2: send the reduced words to every peer; store the peers' reduced words.
// A reduce to `root` (Name Reduce) sends the reduced words to the root alone in step 2, and only the root
// stores. Its ranks then exchange no data with some peers in a step, so they send those peers a token
// instead (as the exchange does), which keeps packet_layout.h's scratch reuse argument: every step, every
// rank hears from every peer. Thread t handles the same (segment, word) pairs in every loop, so in-place
// calls are safe.
template <typename Name, typename T, typename Op>
__global__ void __launch_bounds__(kPacketThreads, kPacketBlocksPerSm)
    twoShotPacketKernel(PacketComm comm, AllReduceArgs args, int root, size_t segmentWords, size_t chunkWords,
                        int rounds, bool early) {
  constexpr bool kRooted = isRooted(Name::kCollective);
  enterKernel(early);
  const AllReduceWords<T> io(args);
  const size_t words = io.count();
  const int me = comm.rank, nranks = comm.nranks;
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);
  const uint2 token = make_uint2(0, 0);

  // Words of segment `s` that this block handles in the current round start at segmentStart(s)+offset.
  auto wordsIn = [&](int segment, size_t offset) -> size_t {
    size_t start = segment * segmentWords + offset;
    size_t end = min(words, (segment + 1) * segmentWords);
    return start < end ? min(end - start, chunkWords) : 0;
  };

  for (int round = 0; round < rounds; ++round) {
    __syncthreads();
    PacketStep scatter(comm, wait, stepFlag(base, 2 * round + 1));
    PacketStep gather(comm, wait, stepFlag(base, 2 * round + 2));
    const size_t offset = (static_cast<size_t>(round) * gridDim.x + blockIdx.x) * chunkWords;

    for (int k = 1; k < nranks; ++k) {
      const int peer = peerAfter(me, k, nranks);
      const size_t n = wordsIn(peer, offset);
      for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        scatter.send(peer, i, io.contribution(peer * segmentWords + offset + i));
      if (kRooted && n == 0 && threadIdx.x == 0) scatter.send(peer, 0, token);
    }

    __syncthreads();  // see the one-shot kernel: packets certify the whole block's progress
    const size_t mine = wordsIn(me, offset);
    for (size_t i = threadIdx.x; i < mine; i += blockDim.x) {
      const size_t word = me * segmentWords + offset + i;
      uint2 sum;
      if (!scatter.receiveReduce<T, Op>(i, io.contribution(word), io.postDivisor(), &sum)) continue;
      if constexpr (!kRooted) {
        io.store(word, sum);
        gather.sendToPeers(i, sum);
      } else if (me == root) {
        io.store(word, sum);
      } else {
        gather.send(root, i, sum);
      }
    }

    // The peers' reduced segments: every rank stores them at an all-reduce, the root alone at a reduce.
    auto storeReduced = [&](size_t i) {
      gather.receiveFromPeers(
          i, [&](int peer) { return i < wordsIn(peer, offset); },
          [&](int peer, uint2 bits) { io.store(peer * segmentWords + offset + i, bits); });
    };
    if constexpr (!kRooted) {
      for (size_t i = threadIdx.x; i < chunkWords; i += blockDim.x) storeReduced(i);
      continue;
    }
    if (mine == 0) scatter.receiveTokens([](int) { return true; });
    __syncthreads();  // a token certifies the whole block's step 1
    if (threadIdx.x == 0)
      for (int k = 1; k < nranks; ++k) {
        const int peer = peerAfter(me, k, nranks);
        if (peer != root || mine == 0) gather.send(peer, 0, token);
      }
    if (me == root)
      for (size_t i = threadIdx.x; i < chunkWords; i += blockDim.x) storeReduced(i);
    // Tokens: every peer's at the other ranks, those with no words' at the root.
    gather.receiveTokens([&](int peer) { return me != root || wordsIn(peer, offset) == 0; });
  }
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
  const TwoShotPacketKernel kernel = withTypeShard(args.type, args.op.op, true, [&](auto shard) {
    return twoShotPacketKernelOf<decltype(shard)::value>(args, root);
  });
  return launched(launchKernel(kernel, shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic,
                               stream, comm, args, root, segmentWords, chunkWords, rounds),
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
