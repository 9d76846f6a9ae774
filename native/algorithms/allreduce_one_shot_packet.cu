#include "native/algorithms/allreduce.h"
#include "native/algorithms/allreduce_words.cuh"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/module_anchor.h"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"
#include "native/device/step_sequence.cuh"
#include "native/primitives/packet_primitives.cuh"

namespace mscclpp_nccl {
namespace {

// Each round moves up to chunkWords words per block. Thread t handles the same words in the send
// and the reduce loop, so an in-place call reads each input word before it overwrites it.
template <typename T, typename Op>
__global__ void __launch_bounds__(kPacketThreads, kPacketBlocksPerSm)
    allReduceOneShotPacketKernel(PacketComm comm, AllReduceArgs args, size_t chunkWords, int rounds,
                                 bool early) {
  enterKernel(early);
  const AllReduceWords<T> io(args);
  const size_t words = io.count();
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);

  for (int round = 0; round < rounds; ++round) {
    // Every packet sent below certifies that the whole block finished the last step. The first round
    // needs no barrier: the step before it was the previous kernel's, which has ended (enterKernel), so
    // the input's first load goes out together with the step counter's.
    if (round > 0) __syncthreads();
    PacketStep step(comm, wait, stepFlag(base, round + 1));
    const size_t first = (static_cast<size_t>(round) * gridDim.x + blockIdx.x) * chunkWords;
    const size_t n = first < words ? min(words - first, chunkWords) : 0;

    for (size_t i = threadIdx.x; i < n; i += blockDim.x) step.sendToPeers(i, io.contribution(first + i));
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      uint2 sum;
      if (step.receiveReduce<T, Op>(i, io.contribution(first + i), io.postDivisor(), &sum))
        io.store(first + i, sum);
    }
  }
  endSteps(comm.steps, base, rounds, args.ticket);
}

}  // namespace

Status launchAllReduceOneShotPacket(const PacketComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                    cudaStream_t stream) {
  const size_t words = divCeil(args.count * dataTypeSize(args.type), kPacketPayloadBytes);
  const size_t chunkWords = shape.chunkBytes / kPacketPayloadBytes;
  int rounds = 0;
  MSCCLPP_TRY(kernelRounds(words, chunkWords * shape.blocks, "all-reduce (one-shot packet)", &rounds));
  auto launch = [&](auto type, auto op) {
    return launchKernel(allReduceOneShotPacketKernel<Tagged<decltype(type)>, Tagged<decltype(op)>>,
                        shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic, stream, comm,
                        args, chunkWords, rounds);
  };
  return launched(dispatchReduce(args.type, args.op.op, launch), "all-reduce (one-shot packet)");
}

MSCCLPP_MODULE_ANCHOR()

}  // namespace mscclpp_nccl
