// The two-shot all-reduce in chunks as a device function: its own kernel (allreduce_two_shot_chunked.cu)
// runs it, and so does the mapped zero-copy kernel (allreduce_mapped.cu) when its ranks agree on
// scratch. Included by .cu files only.
#pragma once

#include "native/algorithms/allreduce.h"
#include "native/algorithms/allreduce_two_shot.cuh"
#include "native/primitives/chunk_primitives.cuh"

namespace mscclpp_nccl {

// allreduce_two_shot.cuh in chunks. Blocks from schedule.blocks on take no part (a mapped kernel's grid
// may be larger).
template <typename T, typename Op>
__device__ __forceinline__ void allReduceTwoShotChunked(const ChunkComm& comm, const AllReduceArgs& args,
                                                        size_t segmentBytes, const ChunkSchedule& schedule) {
  if (static_cast<int>(blockIdx.x) >= schedule.blocks) return;
  __shared__ ChunkSlots slots;
  ChunkBlock channels(comm, slots);
  ChunkRounds<T> chunks(channels, PreMultiply<T>(args.op.scaling, true));
  twoShotRounds<Op, false>(chunks, args, args.count * sizeof(T), comm.rank, -1, segmentBytes,
                           schedule.chunkBytes, schedule.rounds, schedule.blocks);
}

}  // namespace mscclpp_nccl
