// Pieces shared by the packet kernels: scratch addressing and per-call constants.
#pragma once

#include <cstdint>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/packet_layout.h"
#include "native/device/bounded_wait.cuh"
#include "native/device/packet.cuh"
#include "native/device/rank_order.cuh"
#include "native/device/reduce.cuh"
#include "native/device/step_sequence.cuh"

namespace mscclpp_nccl {

__device__ __forceinline__ LLPacket* packetSlot(const PacketComm& comm, void* scratch, uint32_t flag,
                                                int sender) {
  return static_cast<LLPacket*>(scratch) + packetSlotOffset(comm, flag & 1, blockIdx.x, sender);
}

// The flag of step `step` (1-based) of a kernel whose counter base is `base`.
__device__ __forceinline__ uint32_t stepFlag(uint64_t base, int step) {
  return static_cast<uint32_t>(base + step);
}

// Loads word `index` of this rank's input, multiplied by this rank's PreMulSum scalar if any.
template <typename T>
__device__ __forceinline__ uint2 loadContribution(const AllReduceArgs& args, size_t bytes, bool aligned,
                                                  size_t index, typename ElementTraits<T>::Acc scalar) {
  uint2 bits = loadWord<T>(static_cast<const char*>(args.send), index, bytes, aligned);
  return args.op.scaling.preMultiply ? Word<T>::scale(bits, scalar) : bits;
}

__host__ __device__ inline size_t divCeil(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace mscclpp_nccl
