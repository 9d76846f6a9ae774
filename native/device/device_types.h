// Plain structs shared between host code and kernels (no device-only code, so .cc files include it).
#pragma once

#include <cstdint>

namespace mscclpp_nccl {

// Where a kernel says that a wait has made no progress for WaitControl::stallNs (host-mapped, read by
// native/stall_monitor.cc): the call that waits, then one byte per rank of the communicator, set for
// each peer whose data has not arrived.
struct StallReport {
  volatile uint64_t call;          // the call's number on its communicator (1, 2, ...); 0: nothing to report
  volatile uint8_t waitingFor[1];  // [nranks]
};

// What every wait of one communicator's kernels checks besides its data.
struct WaitControl {
  volatile int* abortFlag;  // host-mapped; set by ncclCommAbort or when a peer is lost
  int* errorFlag;           // host-mapped; first KernelError raised by any kernel of this communicator
  int* stopped;             // device memory; set with errorFlag, so that later kernels see it cheaply
  uint64_t timeoutNs;       // 0: wait forever; else the longest a wait may go without progress
  uint64_t stallNs;         // 0: never report; else how long a wait goes without progress before it says so
  StallReport* stall;       // host-mapped (null: never report)
  uint64_t call;            // the number of the call the kernel belongs to, for the stall report
  int rank;
};

// kKernelCallsDiffer: the ranks' posts of a mapped zero-copy call say they were called with different
// counts (or collectives or roots); kKernelBadPeerData: a peer's post names a buffer outside the allocation
// mapped for it here (native/algorithms/mapped_bounds.h).
enum KernelError : int {
  kKernelOk = 0,
  kKernelAborted = 1,
  kKernelTimedOut = 2,
  kKernelCallsDiffer = 3,
  kKernelBadPeerData = 4,
};

// The per-communicator step counters, one per block index (see step_sequence.cuh).
struct StepCounter {
  uint64_t* value;       // [kMaxPacketBlocks]: steps block b has completed so far
  unsigned* blocksDone;  // blocks of the running kernel that have finished
  uint64_t* ticket;      // the latest call ticket a finished kernel published (native/stream_order.h)
};

}  // namespace mscclpp_nccl
