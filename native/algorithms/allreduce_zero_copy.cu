#include "native/algorithms/allreduce.h"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/lane_kernel.cuh"
#include "native/algorithms/packet_kernel.cuh"
#include "native/common/logging.h"
#include "native/device/dependent_launch.cuh"
#include "native/device/peer_barrier.cuh"

namespace mscclpp_nccl {
namespace {

// Rank r owns segment r of the message (`segmentBytes`, a multiple of 16); block b of every rank takes
// bytes [b * blockBytes, (b + 1) * blockBytes) of its rank's segment. It reads that part of every
// rank's input directly, reduces it in rank order and stores the result into every rank's output: each
// rank reads and writes the message once, against five times through lane scratch. In place works:
// only segment r's owner touches segment r, and it reads every unit before writing it.
template <typename T, typename Op>
__global__ void __launch_bounds__(kZeroCopyThreads)
    allReduceZeroCopyKernel(ZeroCopyComm comm, AllReduceArgs args, PeerBuffers send, PeerBuffers recv,
                            size_t segmentBytes, size_t blockBytes) {
  enterKernel();
  __shared__ const char* inputs[kMaxZeroCopyRanks];
  __shared__ char* outputs[kMaxZeroCopyRanks];
  __shared__ int inputAlignment[kMaxZeroCopyRanks];
  __shared__ int outputAlignment[kMaxZeroCopyRanks];
  const int me = comm.rank, nranks = comm.nranks;
  const size_t bytes = args.count * sizeof(T);
  const size_t start = me * segmentBytes + blockIdx.x * blockBytes;
  const size_t end = min(bytes, min((me + 1) * segmentBytes, start + blockBytes));
  const size_t length = start < end ? end - start : 0;
  for (int r = threadIdx.x; r < nranks; r += blockDim.x) {
    inputs[r] = send.bases[r] + send.offset + start;
    outputs[r] = recv.bases[r] + recv.offset + start;
    inputAlignment[r] = unitAlignment(inputs[r]);
    outputAlignment[r] = unitAlignment(outputs[r]);
  }
  BoundedWait wait(comm.wait);
  const uint64_t call = comm.calls[blockIdx.x] + 1;
  const size_t finished = static_cast<size_t>(kMaxZeroCopyBlocks) * nranks;
  if (!peerBarrier(comm.localFlags, comm.peerFlags, 0, me, nranks, call, wait)) return;

  reduceUnits<T, Op, 8>((length + 15) / 16, nranks, args.op.scaling.postDivisor,
                        [&](int r, size_t i) { return loadUnit<T>(inputs[r], i, length, inputAlignment[r]); },
                        [&](size_t i, Unit unit) {
                          for (int k = 0; k < nranks; ++k) {
                            const int r = (me + k) % nranks;  // own output first, then the peers in turn
                            storeUnit<T>(outputs[r], i, length, outputAlignment[r], unit);
                          }
                        });

  if (!peerBarrier(comm.localFlags, comm.peerFlags, finished, me, nranks, call, wait)) return;
  if (threadIdx.x == 0) comm.calls[blockIdx.x] = call;
}

}  // namespace

Status launchAllReduceZeroCopy(const ZeroCopyComm& comm, const AllReduceArgs& args, const PeerBuffers& send,
                               const PeerBuffers& recv, LaunchShape shape, cudaStream_t stream) {
  if (args.op.scaling.preMultiply || comm.nranks > kMaxZeroCopyRanks || shape.blocks > kMaxZeroCopyBlocks)
    return fail(Status::kInternalError, "all-reduce (zero-copy) given a call it does not serve");
  const size_t segmentBytes =
      divCeil(divCeil(args.count * dataTypeSize(args.type), comm.nranks), kLaneAlignment) * kLaneAlignment;
  const size_t blockBytes = divCeil(divCeil(segmentBytes, shape.blocks), kLaneAlignment) * kLaneAlignment;
  auto launch = [&](auto type, auto op) {
    return launchKernel(allReduceZeroCopyKernel<Tagged<decltype(type)>, Tagged<decltype(op)>>, shape.blocks,
                        shape.threads, shape.earlyLaunch, stream, comm, args, send, recv, segmentBytes,
                        blockBytes);
  };
  return launched(dispatchReduce(args.type, args.op.op, launch), "all-reduce (zero-copy)");
}

}  // namespace mscclpp_nccl
