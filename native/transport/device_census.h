// How many native communicators of this process use each CUDA device. Kernels launched early
// (native/device/dependent_launch.cuh) park on SMs while the previous kernel of their stream runs; a
// rank's share of co-resident blocks must hold a parked and a running kernel of every communicator it
// may run at once, so the selector launches early only where the share allows that many.
#pragma once

#include <atomic>

namespace mscclpp_nccl {

// Counts one communicator on `device` for as long as it lives.
class DeviceCensusEntry {
 public:
  explicit DeviceCensusEntry(int device);
  ~DeviceCensusEntry();
  DeviceCensusEntry(const DeviceCensusEntry&) = delete;
  DeviceCensusEntry& operator=(const DeviceCensusEntry&) = delete;

  // The live count of this device's communicators (this one included).
  const std::atomic<int>* count() const { return count_; }

 private:
  std::atomic<int>* count_;
};

}  // namespace mscclpp_nccl
