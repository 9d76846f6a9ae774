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

// Returns true and the payload once the packet at `src` carries `flag`.
__device__ __forceinline__ bool llTryLoad(const LLPacket* src, uint32_t flag, uint2* payload) {
  uint32_t d0, f0, d1, f1;
  asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(d0), "=r"(f0), "=r"(d1), "=r"(f1)
               : "l"(src)
               : "memory");
  *payload = make_uint2(d0, d1);
  return f0 == flag && f1 == flag;
}

}  // namespace mscclpp_nccl
