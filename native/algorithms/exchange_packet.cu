#include <type_traits>

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

// An exchange's ranges as one rank's packet kernel reads and writes them, word by word (8 bytes; the
// last word trimmed to the range's end), with PreMulSum's scalar applied to what is reduced.
template <typename T, bool kReduce>
class ExchangeWords {
 public:
  __device__ explicit ExchangeWords(const ExchangeArgs& args)
      : args_(args),
        scale_(kReduce && args.op.scaling.preMultiply),
        scalar_(scale_ ? loadScalar<T>(args.op.scaling) : typename ElementTraits<T>::Acc(1)) {}

  __device__ const char* source(int rank) const {
    return static_cast<const char*>(args_.src) + rank * args_.srcStride;
  }
  __device__ char* destination(int rank) const {
    return static_cast<char*>(args_.dst) + rank * args_.dstStride;
  }

  // Word i of a source range, scaled where reducing with PreMulSum.
  __device__ __forceinline__ uint2 load(const char* range, size_t i) const {
    const uint2 bits = loadWord<T>(range, i, args_.rangeBytes, aligned(range));
    return scale_ ? Word<T>::scale(bits, scalar_) : bits;
  }
  __device__ __forceinline__ void store(char* range, size_t i, uint2 bits) const {
    storeWord<T>(range, i, args_.rangeBytes, aligned(range), bits);
  }
  // Word i of this rank's source range into its destination range (nothing in place).
  __device__ __forceinline__ void copyOwn(int me, size_t i) const {
    const char* from = source(me);
    char* to = destination(me);
    if (from != to) store(to, i, loadWord<T>(from, i, args_.rangeBytes, aligned(from)));
  }

 private:
  static __device__ bool aligned(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7) == 0; }

  const ExchangeArgs& args_;
  bool scale_;
  typename ElementTraits<T>::Acc scalar_;
};

// A step's sends: words [first, first + n) of each peer's range, data first so that receivers waiting
// for it see it sooner, then a token to every peer that gets no data. A root that sends to itself
// does so by copyOwn.
template <Collective kCollective, bool kRoot, typename T, bool kReduce>
__device__ __forceinline__ void sendWords(const PacketStep& step, const ExchangeWords<T, kReduce>& io, int me,
                                          int nranks, int root, size_t first, size_t n) {
  constexpr ExchangeFlow kFlow = exchangeFlow(kCollective, kRoot);
  if constexpr (kFlow.sendTo == PeerSet::kAll) {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      if constexpr (kFlow.oneRange) {
        step.sendToPeers(i, io.load(io.source(0), first + i));
      } else {
        for (int k = 1; k < nranks; ++k) {
          const int peer = peerAfter(me, k, nranks);
          step.send(peer, i, io.load(io.source(peer), first + i));
        }
      }
    }
  } else if constexpr (kFlow.sendTo == PeerSet::kRoot && !kRoot) {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) step.send(root, i, io.load(io.source(0), first + i));
  }
  if (threadIdx.x == 0 && (n == 0 || kFlow.sendTo != PeerSet::kAll))  // some peer gets no data
    for (int k = 1; k < nranks; ++k) {
      const int peer = peerAfter(me, k, nranks);
      if (n == 0 || !peerSetHas(kFlow.sendTo, peer, root)) step.send(peer, 0, make_uint2(0, 0));  // a token
    }
}

// A step's receives: the peers' words reduced into this rank's range, or stored into theirs; then the
// tokens of every peer that sent no data.
template <Collective kCollective, bool kRoot, typename T, typename Op, bool kReduce>
__device__ __forceinline__ void receiveWords(PacketStep& step, const ExchangeWords<T, kReduce>& io, int me,
                                             int root, int postDivisor, size_t first, size_t n) {
  constexpr ExchangeFlow kFlow = exchangeFlow(kCollective, kRoot);
  if constexpr (kReduce && kFlow.recvFrom == PeerSet::kAll) {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      uint2 sum;
      if (step.receiveReduce<T, Op>(i, io.load(io.source(me), first + i), postDivisor, &sum))
        io.store(io.destination(me), first + i, sum);
    }
  } else if constexpr (kFlow.recvFrom == PeerSet::kAll) {
    // all_gather, alltoall, gather's root: each also sends to itself, so its own range is copied.
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      io.copyOwn(me, first + i);
      step.receiveFromPeers(
          i, [](int) { return true; },
          [&](int sender, uint2 bits) { io.store(io.destination(sender), first + i, bits); });
    }
  } else if constexpr (kFlow.recvFrom == PeerSet::kRoot && kRoot) {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) io.copyOwn(me, first + i);
  } else if constexpr (kFlow.recvFrom == PeerSet::kRoot) {
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      uint2 bits;
      if (step.receive(root, i, &bits)) io.store(io.destination(root), first + i, bits);
    }
  }
  if (n == 0 || kFlow.recvFrom != PeerSet::kAll)
    step.receiveTokens([&](int peer) { return n == 0 || !peerSetHas(kFlow.recvFrom, peer, root); });
}

// Every step, every rank sends at least one packet to every peer (data, or a token when it has
// none for that peer) and waits for one from every peer. That keeps the scratch reuse argument of
// packet_layout.h true for rooted collectives too: no rank can run two steps ahead of any other.
// Both phases go word by word, each word to or from every peer (received ones polled together, stored
// or reduced in rank order, PacketStep). Thread t handles the same words of every range in both, so
// in-place calls read each word before they overwrite it.
template <typename Name, typename T, typename Op, bool kReduce, bool kRoot>
__global__ void __launch_bounds__(kPacketThreads, kPacketBlocksPerSm)
    exchangePacketKernel(PacketComm comm, ExchangeArgs args, size_t chunkWords, int rounds, bool early) {
  // The peer sets are compile-time constants, so that each kernel holds only the loops of its own flow:
  // the same schedule with them read at run time is 15-25% slower at 4 and 8 ranks on one H200
  // (perf/packet_kernel_bench.cu).
  enterKernel(early);
  const size_t words = divCeil(args.rangeBytes, kPacketPayloadBytes);
  const ExchangeWords<T, kReduce> io(args);
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);
  for (int round = 0; round < rounds; ++round) {
    // A token certifies its whole block: no thread may still read the previous step when one is sent.
    __syncthreads();
    PacketStep step(comm, wait, stepFlag(base, round + 1));
    const size_t first = (static_cast<size_t>(round) * gridDim.x + blockIdx.x) * chunkWords;
    const size_t n = first < words ? min(words - first, chunkWords) : 0;
    sendWords<Name::kCollective, kRoot>(step, io, comm.rank, comm.nranks, args.root, first, n);
    receiveWords<Name::kCollective, kRoot, T, Op>(step, io, comm.rank, args.root, args.op.scaling.postDivisor,
                                                  first, n);
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
