// The chunked exchange as a device function: its own kernel (exchange_chunked.cu) runs it, and so does
// the mapped zero-copy kernel (exchange_zero_copy.cu) when its ranks agree on scratch. Included by .cu
// files only.
#pragma once

#include "native/algorithms/exchange.h"
#include "native/algorithms/exchange_schedule.cuh"
#include "native/primitives/chunk_primitives.cuh"

namespace mscclpp_nccl {

// exchange_schedule.cuh in chunks, for a flow read from the arguments (one kernel serves every
// collective). A block reads every range's piece before it writes any, and no other block touches that
// piece, so in-place calls are safe. Blocks from schedule.blocks on take no part (a mapped kernel's grid
// may be larger).
template <typename T, typename Op, bool kReduce>
__device__ __forceinline__ void exchangeChunked(const ChunkComm& comm, const ExchangeArgs& args,
                                                const ChunkSchedule& schedule) {
  if (static_cast<int>(blockIdx.x) >= schedule.blocks) return;
  __shared__ ChunkSlots slots;
  ChunkBlock channels(comm, slots);
  ChunkRounds<T> chunks(channels, PreMultiply<T>(args.op.scaling, kReduce));
  exchangeRounds<Op>(chunks, ArgumentFlow<kReduce>{args}, args, comm.rank, schedule.chunkBytes,
                     schedule.rounds, schedule.blocks);
}

}  // namespace mscclpp_nccl
