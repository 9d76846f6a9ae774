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
                                 int rounds) {
  enterKernel();
  const size_t bytes = args.count * sizeof(T);
  const size_t words = divCeil(bytes, kPacketPayloadBytes);
  const bool sendAligned = (reinterpret_cast<uintptr_t>(args.send) & 7) == 0;
  const bool recvAligned = (reinterpret_cast<uintptr_t>(args.recv) & 7) == 0;
  const auto scalar =
      args.op.scaling.preMultiply ? loadScalar<T>(args.op.scaling) : typename ElementTraits<T>::Acc(1);
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);
  char* recv = static_cast<char*>(args.recv);

  // Words of segment `s` that this block handles in the current round start at segmentStart(s)+offset.
  auto wordsIn = [&](int segment, size_t offset) -> size_t {
    size_t start = segment * segmentWords + offset;
    size_t end = min(words, (segment + 1) * segmentWords);
    return start < end ? min(end - start, chunkWords) : 0;
  };

  for (int round = 0; round < rounds; ++round) {
    __syncthreads();
    const uint32_t scatterFlag = stepFlag(base, 2 * round + 1);
    const uint32_t gatherFlag = stepFlag(base, 2 * round + 2);
    const size_t offset = (static_cast<size_t>(round) * gridDim.x + blockIdx.x) * chunkWords;

    for (int k = 1; k < comm.nranks; ++k) {
      int peer = peerAfter(comm.rank, k, comm.nranks);
      size_t n = wordsIn(peer, offset);
      LLPacket* dst = packetSlot(comm, comm.peerScratch[peer], scatterFlag, comm.rank);
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        size_t word = peer * segmentWords + offset + i;
        llStore(dst + i, loadContribution<T>(args, bytes, sendAligned, word, scalar), scatterFlag);
      }
    }

    __syncthreads();  // see the one-shot kernel: packets certify the whole block's progress
    const size_t mine = wordsIn(comm.rank, offset);
    for (size_t i = threadIdx.x; i < mine; i += blockDim.x) {
      size_t word = comm.rank * segmentWords + offset + i;
      WordReduction<T, Op> reduction;
      bool complete = true;
      for (int sender = 0; sender < comm.nranks && complete; ++sender) {
        uint2 bits;
        if (sender == comm.rank) {
          bits = loadContribution<T>(args, bytes, sendAligned, word, scalar);
        } else {
          complete = wait.load(packetSlot(comm, comm.localScratch, scatterFlag, sender) + i, scatterFlag,
                               &bits, sender);
        }
        if (sender == 0)
          reduction.first(bits);
        else
          reduction.add(bits);
      }
      if (!complete) continue;
      uint2 result = reduction.result(args.op.scaling.postDivisor);
      storeWord<T>(recv, word, bytes, recvAligned, result);
      for (int k = 1; k < comm.nranks; ++k) {
        int peer = peerAfter(comm.rank, k, comm.nranks);
        llStore(packetSlot(comm, comm.peerScratch[peer], gatherFlag, comm.rank) + i, result, gatherFlag);
      }
    }

    for (int k = 1; k < comm.nranks; ++k) {
      int peer = peerAfter(comm.rank, k, comm.nranks);
      size_t n = wordsIn(peer, offset);
      const LLPacket* src = packetSlot(comm, comm.localScratch, gatherFlag, peer);
      for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
        uint2 bits;
        if (wait.load(src + i, gatherFlag, &bits, peer))
          storeWord<T>(recv, peer * segmentWords + offset + i, bytes, recvAligned, bits);
      }
    }
  }
  endSteps(comm.steps, base, 2ull * rounds, args.ticket);
}

struct TwoShotLauncher {
  const PacketComm& comm;
  const AllReduceArgs& args;
  LaunchShape shape;
  cudaStream_t stream;
  size_t segmentWords;
  size_t chunkWords;
  int rounds;

  template <typename T, typename Op>
  cudaError_t run() {
    return launchKernel(allReduceTwoShotPacketKernel<T, Op>, shape.blocks, shape.threads, shape.earlyLaunch,
                        stream, comm, args, segmentWords, chunkWords, rounds);
  }
};

}  // namespace

Status launchAllReduceTwoShotPacket(const PacketComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                    cudaStream_t stream) {
  const size_t words = divCeil(args.count * dataTypeSize(args.type), kPacketPayloadBytes);
  const size_t segmentWords = divCeil(words, comm.nranks);
  const size_t chunkWords = shape.chunkBytes / kPacketPayloadBytes;
  int rounds = 0;
  MSCCLPP_TRY(kernelRounds(segmentWords, chunkWords * shape.blocks, "all-reduce (two-shot packet)", &rounds));
  TwoShotLauncher launcher{comm, args, shape, stream, segmentWords, chunkWords, rounds};
  cudaError_t err = dispatchReduce(args.type, args.op.op, launcher);
  if (err != cudaSuccess)
    return fail(Status::kCudaError, "all-reduce (two-shot packet) launch failed: %s",
                cudaGetErrorString(err));
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
