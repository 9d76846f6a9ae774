// LL ("low latency") packets: 8 bytes of payload and two copies of a 32-bit flag in one 16-byte store.
//
// A 16-byte aligned vector store becomes visible to a reader all at once, so a receiver that sees
// both flags equal to the value it expects also sees the payload written with them: no separate
// signal, fence or semaphore is needed. Flags come from a per-communicator sequence counter that only
// grows, so a packet left from an earlier step never carries the flag of a later one.
#pragma once

#include <cstdint>

namespace mscclpp_nccl {

struct alignas(16) LLPacket {
  uint32_t data0;
  uint32_t flag0;
  uint32_t data1;
  uint32_t flag1;
};

__device__ __forceinline__ void llStore(LLPacket* dst, uint2 payload, uint32_t flag) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" ::"l"(dst), "r"(payload.x), "r"(flag),
               "r"(payload.y), "r"(flag)
               : "memory");
}

// The packet at `src` as it is now: its payload and its two flags.
__device__ __forceinline__ void llLoad(const LLPacket* src, uint2* payload, uint32_t (&flags)[2]) {
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(payload->x), "=r"(flags[0]), "=r"(payload->y), "=r"(flags[1])
               : "l"(src)
               : "memory");
}

// Whether a packet loaded with these flags carries the word of `flag`.
__device__ __forceinline__ bool llCarries(const uint32_t (&flags)[2], uint32_t flag) {
  return flags[0] == flag && flags[1] == flag;
}

// Returns true and the payload once the packet at `src` carries `flag`.
__device__ __forceinline__ bool llTryLoad(const LLPacket* src, uint32_t flag, uint2* payload) {
  uint32_t flags[2];
  llLoad(src, payload, flags);
  return llCarries(flags, flag);
}

}  // namespace mscclpp_nccl
