#include "native/algorithms/allreduce.h"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/packet_kernel.cuh"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// The input is cut into nranks segments of `segmentWords` words; rank r owns segment r. Each round,
// block b handles words [offset, offset + chunkWords) of every segment:
//   step 1: send those words of segment p to rank p; reduce this rank's segment in rank order;
//   step 2: send the reduced words to every peer; store the peers' reduced words.
// Thread t handles the same (segment, word) pairs in every loop, so in-place calls are safe.
template <typename T, typename Op>
__global__ void __launch_bounds__(kPacketThreads)
    allReduceTwoShotPacketKernel(PacketComm comm, AllReduceArgs args, size_t segmentWords, size_t chunkWords,
                                 int rounds, bool early) {
  enterKernel(early);
  const AllReduceWords<T> io(args);
  const size_t words = io.count();
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);

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

    for (int k = 1; k < comm.nranks; ++k) {
      const int peer = peerAfter(comm.rank, k, comm.nranks);
      const size_t n = wordsIn(peer, offset);
      for (size_t i = threadIdx.x; i < n; i += blockDim.x)
        scatter.send(peer, i, io.contribution(peer * segmentWords + offset + i));
    }

    __syncthreads();  // see the one-shot kernel: packets certify the whole block's progress
    const size_t mine = wordsIn(comm.rank, offset);
    for (size_t i = threadIdx.x; i < mine; i += blockDim.x) {
      const size_t word = comm.rank * segmentWords + offset + i;
      uint2 sum;
      if (!scatter.receiveReduce<T, Op>(i, io.contribution(word), io.postDivisor(), &sum)) continue;
      io.store(word, sum);
      gather.sendToPeers(i, sum);
    }

    for (int k = 1; k < comm.nranks; ++k) {
      const int peer = peerAfter(comm.rank, k, comm.nranks);
      const size_t n = wordsIn(peer, offset);
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        uint2 bits;
        if (gather.receive(peer, i, &bits)) io.store(peer * segmentWords + offset + i, bits);
      }
    }
  }
  endSteps(comm.steps, base, 2ull * rounds, args.ticket);
}

}  // namespace

Status launchAllReduceTwoShotPacket(const PacketComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                    cudaStream_t stream) {
  const size_t words = divCeil(args.count * dataTypeSize(args.type), kPacketPayloadBytes);
  const size_t segmentWords = divCeil(words, comm.nranks);
  const size_t chunkWords = shape.chunkBytes / kPacketPayloadBytes;
  int rounds = 0;
  MSCCLPP_TRY(kernelRounds(segmentWords, chunkWords * shape.blocks, "all-reduce (two-shot packet)", &rounds));
  auto launch = [&](auto type, auto op) {
    return launchKernel(allReduceTwoShotPacketKernel<Tagged<decltype(type)>, Tagged<decltype(op)>>,
                        shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic, stream, comm,
                        args, segmentWords, chunkWords, rounds);
  };
  return launched(dispatchReduce(args.type, args.op.op, launch), "all-reduce (two-shot packet)");
}

}  // namespace mscclpp_nccl
