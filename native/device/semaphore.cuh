// Monotonic 64-bit semaphores between ranks: the signal of the chunked (non-packet) protocol.
//
// A writer fills a buffer with plain stores, then publishes a counter with release semantics; a
// reader that sees the counter reach a value with acquire semantics also sees every store made before
// it. System scope by default, because the peer may be another GPU reached over NVLink. Counters only grow,
// so a stale value can never satisfy a wait for a later one.
#pragma once

#include <cstdint>

#include "native/device/bounded_wait.cuh"

namespace mscclpp_nccl {

// Which threads a semaphore orders stores for: every thread of the system (a peer on another GPU), or of
// this GPU only, which is enough where every rank runs on this GPU and cheaper: 1.4-3.8 us less per peer
// barrier of a mapped call at 4 ranks on one H100 (perf/mapped-call-phases-2026-12-06.csv).
enum class MemoryScope { kSystem, kDevice };

// The scope that orders stores for every peer: the device's where every rank runs on this GPU.
__device__ __forceinline__ MemoryScope peerScope(bool oneGpu) {
  return oneGpu ? MemoryScope::kDevice : MemoryScope::kSystem;
}

// Publishes `value` at `counter` (usually a peer's memory) after every store this thread made, or saw
// through a barrier, before the call. At device scope the release store alone orders them (release is
// cumulative over what the thread saw through __syncthreads); a fence before it made mapped calls 1-9%
// slower at 2-8 MB, 4 ranks on one H100 (perf/barrier-release-2026-12-06.csv).
__device__ __forceinline__ void semaphoreSignal(uint64_t* counter, uint64_t value,
                                                MemoryScope scope = MemoryScope::kSystem) {
  if (scope == MemoryScope::kDevice) {
    asm volatile("st.release.gpu.global.u64 [%0], %1;" ::"l"(counter), "l"(value) : "memory");
  } else {
    __threadfence_system();
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(counter), "l"(value) : "memory");
  }
}

__device__ __forceinline__ uint64_t semaphoreLoad(const uint64_t* counter,
                                                  MemoryScope scope = MemoryScope::kSystem) {
  uint64_t value;
  if (scope == MemoryScope::kDevice)
    asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(counter) : "memory");
  else
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(value) : "l"(counter) : "memory");
  return value;
}

// Waits until `counter` reaches `value`; false when the wait was abandoned (abort, timeout).
__device__ __forceinline__ bool semaphoreWait(const uint64_t* counter, uint64_t value, BoundedWait& wait,
                                              int peer, MemoryScope scope = MemoryScope::kSystem) {
  while (semaphoreLoad(counter, scope) < value) {
    if (wait.giveUp(peer)) return false;
  }
  wait.progressed();
  return true;
}

}  // namespace mscclpp_nccl
