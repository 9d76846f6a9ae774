#include <type_traits>

#include "native/algorithms/collective_names.cuh"
#include "native/algorithms/exchange.h"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/packet_kernel.cuh"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/algorithms/type_shards.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// Every step, every rank sends at least one packet to every peer (data, or a token when it has
// none for that peer) and waits for one from every peer. That keeps the scratch reuse argument of
// packet_layout.h true for rooted collectives too: no rank can run two steps ahead of any other.
// Both loops go word by word, each word to or from every peer (received ones polled together, stored or
// reduced in rank order, PacketStep). Thread t handles the same words of every range in both loops, so
// in-place calls read each word before they overwrite it.
template <typename Name, typename T, typename Op, bool kReduce, bool kRoot>
__global__ void __launch_bounds__(kPacketThreads, kPacketBlocksPerSm)
    exchangePacketKernel(PacketComm comm, ExchangeArgs args, size_t chunkWords, int rounds, bool early) {
  // The peer sets are compile-time constants, so that each kernel holds only the loops of its own flow:
  // the same schedule with them read at run time is 15-25% slower at 4 and 8 ranks on one H200
  // (perf/packet_kernel_bench.cu).
  constexpr ExchangeFlow kFlow = exchangeFlow(Name::kCollective, kRoot);
  constexpr PeerSet kSendTo = kFlow.sendTo, kRecvFrom = kFlow.recvFrom;
  enterKernel(early);
  const int me = comm.rank, nranks = comm.nranks, root = args.root;
  const size_t words = divCeil(args.rangeBytes, kPacketPayloadBytes);
  const bool scale = kReduce && args.op.scaling.preMultiply;
  const auto scalar = scale ? loadScalar<T>(args.op.scaling) : typename ElementTraits<T>::Acc(1);
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);
  const char* src = static_cast<const char*>(args.src);
  char* dst = static_cast<char*>(args.dst);
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7) == 0; };
  auto load = [&](const char* range, size_t i) {
    const uint2 bits = loadWord<T>(range, i, args.rangeBytes, aligned(range));
    return scale ? Word<T>::scale(bits, scalar) : bits;
  };
  const char* own = src + me * args.srcStride;
  char* ownOut = dst + me * args.dstStride;

  for (int round = 0; round < rounds; ++round) {
    // A token certifies its whole block: no thread may still read the previous step when one is sent.
    __syncthreads();
    PacketStep step(comm, wait, stepFlag(base, round + 1));
    const size_t first = (static_cast<size_t>(round) * gridDim.x + blockIdx.x) * chunkWords;
    const size_t n = first < words ? min(words - first, chunkWords) : 0;

    // Data first, so that the receivers that wait for it see it sooner; then a token to every peer
    // that gets none. A root that sends to itself does so by the copy below.
    if constexpr (kSendTo == PeerSet::kAll) {
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        if constexpr (kFlow.oneRange) {
          step.sendToPeers(i, load(src, first + i));
        } else {
          for (int k = 1; k < nranks; ++k) {
            const int peer = peerAfter(me, k, nranks);
            step.send(peer, i, load(src + peer * args.srcStride, first + i));
          }
        }
      }
    } else if constexpr (kSendTo == PeerSet::kRoot && !kRoot) {
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) step.send(root, i, load(src, first + i));
    }
    if (threadIdx.x == 0 && (n == 0 || kSendTo != PeerSet::kAll))  // some peer gets no data
      for (int k = 1; k < nranks; ++k) {
        const int peer = peerAfter(me, k, nranks);
        if (n == 0 || !peerSetHas(kSendTo, peer, root)) step.send(peer, 0, make_uint2(0, 0));  // a token
      }

    if constexpr (kReduce && kRecvFrom == PeerSet::kAll) {
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        uint2 sum;
        if (step.receiveReduce<T, Op>(i, load(own, first + i), args.op.scaling.postDivisor, &sum))
          storeWord<T>(ownOut, first + i, args.rangeBytes, aligned(ownOut), sum);
      }
    } else if constexpr (!kReduce && kRecvFrom == PeerSet::kAll) {
      // all_gather, alltoall, gather's root: each also sends to itself, so its own range is copied.
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        if (own != ownOut)  // in place: already there
          storeWord<T>(ownOut, first + i, args.rangeBytes, aligned(ownOut),
                       loadWord<T>(own, first + i, args.rangeBytes, aligned(own)));
        step.receiveFromPeers(
            i, [](int) { return true; },
            [&](int sender, uint2 bits) {
              char* range = dst + sender * args.dstStride;
              storeWord<T>(range, first + i, args.rangeBytes, aligned(range), bits);
            });
      }
    } else if constexpr (kRecvFrom == PeerSet::kRoot && kRoot) {
      if (own != ownOut)
        for (size_t i = threadIdx.x; i < n; i += blockDim.x)
          storeWord<T>(ownOut, first + i, args.rangeBytes, aligned(ownOut),
                       loadWord<T>(own, first + i, args.rangeBytes, aligned(own)));
    } else if constexpr (kRecvFrom == PeerSet::kRoot) {
      char* range = dst + root * args.dstStride;
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        uint2 bits;
        if (step.receive(root, i, &bits))
          storeWord<T>(range, first + i, args.rangeBytes, aligned(range), bits);
      }
    }
    if (n == 0 || kRecvFrom != PeerSet::kAll)
      step.receiveTokens([&](int peer) { return n == 0 || !peerSetHas(kRecvFrom, peer, root); });
  }
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
                               stream, comm, args, chunkWords, rounds),
                  "packet exchange");
}
#endif

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
