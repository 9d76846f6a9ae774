#include "native/algorithms/allreduce.h"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/packet_kernel.cuh"
#include "native/algorithms/reduce_dispatch.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"

namespace mscclpp_nccl {
namespace {

// Each round moves up to chunkWords words per block. Thread t handles the same words in the send
// and the reduce loop, so an in-place call reads each input word before it overwrites it.
template <typename T, typename Op>
__global__ void __launch_bounds__(kPacketThreads)
    allReduceOneShotPacketKernel(PacketComm comm, AllReduceArgs args, size_t chunkWords, int rounds) {
  enterKernel();
  const size_t bytes = args.count * sizeof(T);
  const size_t words = divCeil(bytes, kPacketPayloadBytes);
  const bool sendAligned = (reinterpret_cast<uintptr_t>(args.send) & 7) == 0;
  const bool recvAligned = (reinterpret_cast<uintptr_t>(args.recv) & 7) == 0;
  const auto scalar =
      args.op.scaling.preMultiply ? loadScalar<T>(args.op.scaling) : typename ElementTraits<T>::Acc(1);
  const uint64_t base = beginSteps(comm.steps);
  BoundedWait wait(comm.wait);

  for (int round = 0; round < rounds; ++round) {
    __syncthreads();  // every packet sent below certifies that the whole block finished the last step
    const uint32_t flag = stepFlag(base, round + 1);
    const size_t first = (static_cast<size_t>(round) * gridDim.x + blockIdx.x) * chunkWords;
    const size_t n = first < words ? min(words - first, chunkWords) : 0;

    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      uint2 mine = loadContribution<T>(args, bytes, sendAligned, first + i, scalar);
      for (int k = 1; k < comm.nranks; ++k) {
        int peer = peerAfter(comm.rank, k, comm.nranks);
        llStore(packetSlot(comm, comm.peerScratch[peer], flag, comm.rank) + i, mine, flag);
      }
    }
    for (size_t i = threadIdx.x; i < n; i += blockDim.x) {
      WordReduction<T, Op> reduction;
      bool complete = true;
      for (int sender = 0; sender < comm.nranks && complete; ++sender) {
        uint2 bits;
        if (sender == comm.rank) {
          bits = loadContribution<T>(args, bytes, sendAligned, first + i, scalar);
        } else {
          complete = wait.load(packetSlot(comm, comm.localScratch, flag, sender) + i, flag, &bits, sender);
        }
        if (sender == 0)
          reduction.first(bits);
        else
          reduction.add(bits);
      }
      if (complete)
        storeWord<T>(static_cast<char*>(args.recv), first + i, bytes, recvAligned,
                     reduction.result(args.op.scaling.postDivisor));
    }
  }
  endSteps(comm.steps, base, rounds, args.ticket);
}

struct OneShotLauncher {
  const PacketComm& comm;
  const AllReduceArgs& args;
  LaunchShape shape;
  cudaStream_t stream;
  size_t chunkWords;
  int rounds;

  template <typename T, typename Op>
  cudaError_t run() {
    return launchKernel(allReduceOneShotPacketKernel<T, Op>, shape.blocks, shape.threads, shape.earlyLaunch,
                        stream, comm, args, chunkWords, rounds);
  }
};

}  // namespace

Status launchAllReduceOneShotPacket(const PacketComm& comm, const AllReduceArgs& args, LaunchShape shape,
                                    cudaStream_t stream) {
  const size_t words = divCeil(args.count * dataTypeSize(args.type), kPacketPayloadBytes);
  const size_t chunkWords = shape.chunkBytes / kPacketPayloadBytes;
  int rounds = 0;
  MSCCLPP_TRY(kernelRounds(words, chunkWords * shape.blocks, "all-reduce (one-shot packet)", &rounds));
  OneShotLauncher launcher{comm, args, shape, stream, chunkWords, rounds};
  cudaError_t err = dispatchReduce(args.type, args.op.op, launcher);
  if (err != cudaSuccess)
    return fail(Status::kCudaError, "all-reduce (one-shot packet) launch failed: %s",
                cudaGetErrorString(err));
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
