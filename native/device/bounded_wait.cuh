// Spin-waits that end when they must: every wait in a kernel gives up when the communicator is aborted
// from the host (ncclCommAbort, or a peer found dead), when another kernel of it already gave up, or
// when MSCCLPP_NCCL_WAIT_TIMEOUT is set and the wait made no progress for that long. A failure then
// surfaces as an asynchronous error instead of a hung GPU. A wait without progress for
// MSCCLPP_NCCL_STALL_REPORT seconds names its peer to the host (native/stall_monitor.h) and goes on.
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
  __device__ explicit BoundedWait(const WaitControl& control)
      : control_(control), start_(0), spins_(0), reported_(false) {}

  // Called once per unsuccessful poll; returns true when the caller must stop waiting.
  __device__ __forceinline__ bool giveUp(int peer) {
    // The device word costs about one more poll: looked at every 64 polls, it lets each kernel queued
    // behind an abort leave within microseconds instead of waiting for its own host-mapped read.
    if ((++spins_ & 63u) != 0) return false;
    if (*const_cast<volatile int*>(control_.stopped)) return true;
    // Host-mapped reads cross PCIe: look at those flags only every few thousand polls.
    if ((spins_ & 4095u) != 0) return false;
    if (*control_.abortFlag) return raise(kKernelAborted, peer);
    if (*const_cast<volatile int*>(control_.errorFlag) != kKernelOk) {
      *const_cast<volatile int*>(control_.stopped) = 1;
      return true;
    }
    if (control_.timeoutNs == 0 && control_.stallNs == 0) return false;
    uint64_t now = globalTimerNs();
    if (start_ == 0) start_ = now;
    if (control_.timeoutNs != 0 && now - start_ > control_.timeoutNs) return raise(kKernelTimedOut, peer);
    if (control_.stallNs != 0 && !reported_ && now - start_ > control_.stallNs) report(peer);
    return false;
  }

  // A wait succeeded: the timeout clock restarts, so it measures time without progress.
  __device__ __forceinline__ void progressed() {
    start_ = 0;
    reported_ = false;
  }

  // Polls `src` until it carries `flag`; returns false when the wait was abandoned.
  __device__ __forceinline__ bool load(const LLPacket* src, uint32_t flag, uint2* payload, int peer) {
    while (!llTryLoad(src, flag, payload)) {
      if (giveUp(peer)) return false;
    }
    progressed();
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
    *const_cast<volatile int*>(control_.stopped) = 1;
    return true;
  }

  // Names the peer this wait has gone without for stallNs; the host prints it once per call and the wait
  // goes on.
  __device__ void report(int peer) {
    reported_ = true;
    if (control_.stall == nullptr || peer < 0) return;
    control_.stall->waitingFor[peer] = 1;
    __threadfence_system();
    control_.stall->call = control_.call;
  }

  WaitControl control_;
  uint64_t start_;  // when the current stall was first seen (0: none)
  uint32_t spins_;
  bool reported_;
};

}  // namespace mscclpp_nccl
