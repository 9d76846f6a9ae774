// One-sided transfers into peers' windows, and the signals that say they arrived (ncclPutSignal,
// ncclSignal, ncclWaitSignal).
//
// Each rank holds one 64-bit counter per source rank in peer-mapped memory. A source counts the signals
// it has sent to each peer and publishes the new count into that peer's counter for it with release
// semantics, after the data it put: counters only grow and each has one writer, so no atomics are needed
// and a stale value never satisfies a later wait. A waiter counts the signals it was told to expect from
// each peer and waits, with acquire semantics, until each counter reaches that total. Every operation is
// a call of the communicator, so a source's signals to a peer arrive in the order it issued them.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "native/algorithms/zero_copy.h"
#include "native/common/status.h"
#include "native/device/device_types.h"

namespace mscclpp_nccl {

// The counters one rank holds: one per rank of the communicator (its own unused).
inline size_t signalCounterBytes(int nranks) { return static_cast<size_t>(nranks) * sizeof(uint64_t); }

// Totals a wait waits for, one per source rank (0: none from it); passed by value to the kernel.
struct SignalTargets {
  uint64_t total[kMaxZeroCopyRanks];
};

class OneSided {
 public:
  // `local`: this rank's counters; `peers[r]`: rank r's counters as mapped here. All start at zero, as
  // the counts kept here do (at setup, and again at resume). The operations below need a bind first;
  // the communicator refuses them where it has no counters (Communicator::oneSidedRefusal).
  void bind(int rank, std::vector<uint64_t*> peers, uint64_t* local);

  // Copies `bytes` from `src` to `peerDst` (a peer's window as mapped here), then signals `peer`.
  Status put(const void* src, void* peerDst, size_t bytes, int peer, cudaStream_t stream);
  // Adds one to the signals `peer` has from this rank, after every earlier operation of the stream.
  Status signal(int peer, cudaStream_t stream);
  // Waits until `counts[r]` more signals from each rank r have arrived, on the stream.
  Status wait(const std::vector<uint64_t>& counts, const WaitControl& control, cudaStream_t stream);

 private:
  int rank_ = 0;
  uint64_t* local_ = nullptr;
  std::vector<uint64_t*> peers_;
  std::vector<uint64_t> sent_;     // signals sent to each rank so far
  std::vector<uint64_t> awaited_;  // signals from each rank waited for so far
};

// The kernels (one_sided.cu).
Status launchSignalPublish(uint64_t* counter, uint64_t value, cudaStream_t stream);
Status launchSignalWait(const uint64_t* counters, const SignalTargets& targets, int nranks,
                        const WaitControl& control, cudaStream_t stream);

}  // namespace mscclpp_nccl
