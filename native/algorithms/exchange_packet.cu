#include "native/algorithms/collective_names.cuh"
#include "native/algorithms/exchange.h"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/packet_kernel.cuh"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// Every step, every rank sends at least one packet to every peer (data, or a token when it has
// none for that peer) and waits for one from every peer. That keeps the scratch reuse argument of
// packet_layout.h true for rooted collectives too: no rank can run two steps ahead of any other.
// Thread t handles the same words of every range in the send and the receive loop, so in-place
// calls read each word before they overwrite it.
template <typename Name, typename T, typename Op, bool kReduce>
__global__ void __launch_bounds__(kPacketThreads)
    exchangePacketKernel(PacketComm comm, ExchangeArgs args, size_t chunkWords, int rounds, bool early) {
  enterKernel(early);
  const int me = comm.rank;
  const size_t words = divCeil(args.rangeBytes, kPacketPayloadBytes);
  const auto scalar =
      args.op.scaling.preMultiply ? loadScalar<T>(args.op.scaling) : typename ElementTraits<T>::Acc(1);
  const bool scale = kReduce && args.op.scaling.preMultiply;
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);
  const char* src = static_cast<const char*>(args.src);
  char* dst = static_cast<char*>(args.dst);
  auto aligned = [](const void* p) { return (reinterpret_cast<uintptr_t>(p) & 7) == 0; };
  // Whether this rank sends data to any peer (a rank that sends none must not read its source).
  const bool sendsData = args.sendTo == PeerSet::kAll || (args.sendTo == PeerSet::kRoot && me != args.root);

  for (int round = 0; round < rounds; ++round) {
    // A token certifies its whole block: no thread may still read the previous step when one is sent.
    __syncthreads();
    PacketStep step(comm, wait, stepFlag(base, round + 1));
    const size_t first = (static_cast<size_t>(round) * gridDim.x + blockIdx.x) * chunkWords;
    const size_t n = first < words ? min(words - first, chunkWords) : 0;

    if (sendsData && n > 0 && args.srcStride == 0) {
      // One range for every receiver (all_gather, gather, reduce, broadcast's root): each word is
      // loaded once and sent to all, and the data goes before the tokens, so that the receivers that
      // wait for data see it sooner (perf/experiments/exchange_latency: 7-16% at 4 and 8 ranks).
      const bool srcAligned = aligned(src);
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        const uint2 bits = loadWord<T>(src, first + i, args.rangeBytes, srcAligned);
        const uint2 word = scale ? Word<T>::scale(bits, scalar) : bits;
        for (int k = 1; k < comm.nranks; ++k) {
          const int peer = peerAfter(me, k, comm.nranks);
          if (peerSetHas(args.sendTo, peer, args.root)) step.send(peer, i, word);
        }
      }
      if (threadIdx.x == 0)
        for (int k = 1; k < comm.nranks; ++k) {
          const int peer = peerAfter(me, k, comm.nranks);
          if (!peerSetHas(args.sendTo, peer, args.root)) step.send(peer, 0, make_uint2(0, 0));  // a token
        }
    } else {
      for (int k = 1; k < comm.nranks; ++k) {
        const int peer = peerAfter(me, k, comm.nranks);
        if (n > 0 && peerSetHas(args.sendTo, peer, args.root)) {
          const char* range = src + peer * args.srcStride;
          const bool rangeAligned = aligned(range);
          for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
            const uint2 bits = loadWord<T>(range, first + i, args.rangeBytes, rangeAligned);
            step.send(peer, i, scale ? Word<T>::scale(bits, scalar) : bits);
          }
        } else if (threadIdx.x == 0) {
          step.send(peer, 0, make_uint2(0, 0));  // a token
        }
      }
    }

    const bool selfTransfer =
        peerSetHas(args.sendTo, me, args.root) && peerSetHas(args.recvFrom, me, args.root);
    if (kReduce && args.recvFrom == PeerSet::kAll) {
      const char* own = src + me * args.srcStride;
      const bool ownAligned = aligned(own);
      char* out = dst + me * args.dstStride;
      const bool outAligned = aligned(out);
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        uint2 mine = loadWord<T>(own, first + i, args.rangeBytes, ownAligned);
        if (scale) mine = Word<T>::scale(mine, scalar);
        uint2 sum;
        if (step.receiveReduce<T, Op>(i, mine, args.op.scaling.postDivisor, &sum))
          storeWord<T>(out, first + i, args.rangeBytes, outAligned, sum);
      }
    } else if (selfTransfer) {
      const char* from = src + me * args.srcStride;
      char* to = dst + me * args.dstStride;
      if (from != to && n > 0) {
        const bool fromAligned = aligned(from), toAligned = aligned(to);
        for (size_t i = threadIdx.x; i < n; i += blockDim.x)
          storeWord<T>(to, first + i, args.rangeBytes, toAligned,
                       loadWord<T>(from, first + i, args.rangeBytes, fromAligned));
      }
    }

    for (int k = 1; k < comm.nranks; ++k) {
      const int peer = peerBefore(me, k, comm.nranks);
      const bool data = n > 0 && peerSetHas(args.recvFrom, peer, args.root);
      if (data && !kReduce) {
        char* range = dst + peer * args.dstStride;
        const bool rangeAligned = aligned(range);
        for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
          uint2 bits;
          if (step.receive(peer, i, &bits))
            storeWord<T>(range, first + i, args.rangeBytes, rangeAligned, bits);
        }
      } else if (!data && threadIdx.x == 0) {
        uint2 token;
        step.receive(peer, 0, &token);
      }
    }
  }
  endSteps(comm.steps, base, rounds, args.ticket);
}

}  // namespace

Status launchExchange(const PacketComm& comm, const ExchangeArgs& args, LaunchShape shape,
                      cudaStream_t stream) {
  const size_t words = divCeil(args.rangeBytes, kPacketPayloadBytes);
  const size_t chunkWords = shape.chunkBytes / kPacketPayloadBytes;
  int rounds = 0;
  MSCCLPP_TRY(kernelRounds(words, chunkWords * shape.blocks, "packet exchange", &rounds));
  auto launch = [&](auto name, auto reduce, auto type, auto op) {
    return launchKernel(exchangePacketKernel<Tagged<decltype(name)>, Tagged<decltype(type)>,
                                             Tagged<decltype(op)>, decltype(reduce)::value>,
                        shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic, stream, comm,
                        args, chunkWords, rounds);
  };
  return launched(dispatchExchange(args.collective, args.reduce, args.type, args.op.op, launch),
                  "packet exchange");
}

}  // namespace mscclpp_nccl
