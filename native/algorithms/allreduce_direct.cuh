// The direct all-reduce that the zero-copy kernels share: each rank reduces its segment of the message
// from every rank's input and stores it into every rank's output. allreduce_zero_copy.cu runs it on
// windows, allreduce_mapped.cu on buffers the peers have mapped. Included by .cu files only.
#pragma once

#include "native/algorithms/allreduce.h"
#include "native/algorithms/kernel_launch.h"
#include "native/algorithms/zero_copy_kernel.cuh"
#include "native/common/logging.h"
#include "native/primitives/chunk_primitives.cuh"
#include "native/primitives/packet_primitives.cuh"

namespace mscclpp_nccl {

// Rank r owns segment r of the message (`segmentBytes`, a multiple of 16); block b of every rank takes
// bytes [b * blockBytes, (b + 1) * blockBytes) of its rank's segment. It reads that part of every
// rank's input directly, reduces it in rank order and stores the result into every rank's output: each
// rank reads and writes the message once, against five times through chunk scratch. In place works:
// only segment r's owner touches segment r, and it reads every unit before writing it.
struct DirectPart {
  const char* inputs[kMaxZeroCopyRanks];  // every rank's input, at this block's part
  char* outputs[kMaxZeroCopyRanks];       // every rank's output, likewise
  int inputAlignment[kMaxZeroCopyRanks];
  int outputAlignment[kMaxZeroCopyRanks];
  size_t start;   // the part's first byte in the message
  size_t length;  // its bytes (0: this block has nothing)
};

__device__ __forceinline__ void locatePart(DirectPart& part, int me, size_t bytes, size_t segmentBytes,
                                           size_t blockBytes) {
  part.start = me * segmentBytes + blockIdx.x * blockBytes;
  const size_t end = min(bytes, min((me + 1) * segmentBytes, part.start + blockBytes));
  part.length = part.start < end ? end - part.start : 0;
}

// Rank r's buffers of the call: `input` and `output` at the start of the message.
__device__ __forceinline__ void setRankBuffers(DirectPart& part, int r, const char* input, char* output) {
  part.inputs[r] = input + part.start;
  part.outputs[r] = output + part.start;
  part.inputAlignment[r] = unitAlignment(part.inputs[r]);
  part.outputAlignment[r] = unitAlignment(part.outputs[r]);
}

// Reduces the part from every rank's input (eight ranks' loads in flight at once) and stores it into
// every rank's output. kAligned: every buffer takes 16-byte accesses, so the loop compiles to plain
// vector loads and stores; the general form handles buffers at any element offset.
template <typename T, typename Op, bool kAligned>
__device__ __forceinline__ void reduceIntoEveryRank(const DirectPart& part, int me, int nranks,
                                                    int postDivisor) {
  reduceUnits<T, Op, 2, 8>(
      (part.length + 15) / 16, nranks, postDivisor,
      [&](int r, size_t i) {
        return loadUnit<T>(part.inputs[r], i, part.length, kAligned ? 16 : part.inputAlignment[r]);
      },
      [&](size_t i, Unit unit) {
        for (int k = 0; k < nranks; ++k) {
          const int r = (me + k) % nranks;  // own output first, then the peers in turn
          storeUnit<T>(part.outputs[r], i, part.length, kAligned ? 16 : part.outputAlignment[r], unit);
        }
      });
}

// Once every rank has arrived: reduce the part into every rank's output, then wait until no peer
// touches this rank's buffers. False when a wait was abandoned.
template <typename T, typename Op>
__device__ __forceinline__ bool reduceAndFinish(const ZeroCopyComm& comm, const AllReduceArgs& args,
                                                const DirectPart& part, uint64_t call, BoundedWait& wait) {
  bool aligned = true;
  for (int r = threadIdx.x; r < comm.nranks; r += blockDim.x)
    aligned = aligned && part.inputAlignment[r] == 16 && part.outputAlignment[r] == 16;
  withUnitAlignment(aligned, [&](auto kAligned) {
    reduceIntoEveryRank<T, Op, decltype(kAligned)::value>(part, comm.rank, comm.nranks,
                                                          args.op.scaling.postDivisor);
  });
  return finishZeroCopyCall(comm, call, wait);
}

// The launch of a direct kernel: its segment and block sizes from the call and the grid.
template <typename Kernel, typename... Buffers>
Status launchDirect(Kernel kernel, const ZeroCopyComm& comm, const AllReduceArgs& args, LaunchShape shape,
                    cudaStream_t stream, const Buffers&... buffers) {
  const size_t segmentBytes = allReduceSegmentBytes(args, comm.nranks);
  const size_t blockBytes = roundUp(divCeil(segmentBytes, shape.blocks), kChunkAlignment);
  return launched(launchKernel(kernel, shape.blocks, shape.threads, shape.earlyLaunch, shape.programmatic,
                               stream, comm, args, buffers..., segmentBytes, blockBytes),
                  "all-reduce (zero-copy)");
}

inline Status checkDirect(const ZeroCopyComm& comm, const AllReduceArgs& args, LaunchShape shape) {
  if (args.op.scaling.preMultiply || comm.nranks > kMaxZeroCopyRanks || shape.blocks > kMaxZeroCopyBlocks)
    return fail(Status::kInternalError, "all-reduce (zero-copy) given a call it does not serve");
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
