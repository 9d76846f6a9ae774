// Spin-waits that always end: every wait in a kernel gives up when the communicator is aborted from
// the host, when another thread already gave up, or when the wait timeout passes. A deadlock (a peer
// that never arrives, ranks that are not co-resident) then costs seconds and surfaces as an
// asynchronous error instead of a hung GPU.
#pragma once

#include <cstdint>
#include <cstdio>

#include "native/device/device_types.h"
#include "native/device/packet.cuh"

namespace mscclpp_nccl {

__device__ __forceinline__ uint64_t globalTimerNs() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

class BoundedWait {
 public:
  __device__ explicit BoundedWait(const WaitControl& control) : control_(control), start_(0), spins_(0) {}

  // Called once per unsuccessful poll; returns true when the caller must stop waiting.
  __device__ __forceinline__ bool giveUp(int peer) {
    // Host-mapped reads cross PCIe: look at the flags only every few thousand polls.
    if ((++spins_ & 4095u) != 0) return false;
    if (*control_.abortFlag) return raise(kKernelAborted, peer);
    if (*const_cast<volatile int*>(control_.errorFlag) != kKernelOk) return true;
    uint64_t now = globalTimerNs();
    if (start_ == 0) start_ = now;
    if (control_.timeoutNs != 0 && now - start_ > control_.timeoutNs) return raise(kKernelTimedOut, peer);
    return false;
  }

  // Polls `src` until it carries `flag`; returns false when the wait was abandoned.
  __device__ __forceinline__ bool load(const LLPacket* src, uint32_t flag, uint2* payload, int peer) {
    while (!llTryLoad(src, flag, payload)) {
      if (giveUp(peer)) return false;
    }
    return true;
  }

 private:
  __device__ bool raise(int error, int peer) {
    if (atomicCAS(control_.errorFlag, kKernelOk, error) == kKernelOk) {
      __threadfence_system();
      if (error == kKernelTimedOut)
        printf("mscclpp-nccl: rank %d gave up waiting for rank %d (MSCCLPP_NCCL_WAIT_TIMEOUT)\n",
               control_.rank, peer);
    }
    return true;
  }

  WaitControl control_;
  uint64_t start_;
  uint32_t spins_;
};

}  // namespace mscclpp_nccl
