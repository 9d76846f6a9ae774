// Reading a small plain struct that a peer wrote into this rank's memory (a mapped call's post, a
// send/recv descriptor), after a semaphore or barrier made it visible: volatile 64-bit loads, so that no
// word comes from a line the cache held before the peer wrote it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace mscclpp_nccl {

template <typename T>
__device__ __forceinline__ T loadPosted(const void* slot) {
  static_assert(sizeof(T) % sizeof(uint64_t) == 0, "a posted struct is whole 64-bit words");
  const volatile uint64_t* words = static_cast<const volatile uint64_t*>(slot);
  uint64_t value[sizeof(T) / sizeof(uint64_t)];
  for (size_t i = 0; i < sizeof(T) / sizeof(uint64_t); ++i) value[i] = words[i];
  T posted;
  memcpy(&posted, value, sizeof(T));
  return posted;
}

}  // namespace mscclpp_nccl
