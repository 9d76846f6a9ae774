// Hang attribution: when a call of a communicator has made no progress for MSCCLPP_NCCL_STALL_REPORT
// seconds (default 60; 0 turns it off), each rank that waits prints one NCCL WARN line naming the
// communicator (its hash), the call (collective, bytes and its number on the communicator) and the peers
// whose data has not arrived, and goes on waiting. The kernels' waits say so in a host-mapped
// StallReport (native/device/bounded_wait.cuh); one thread of the process reads every communicator's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>

#include "native/common/status.h"
#include "native/device/device_types.h"

namespace mscclpp_nccl {

class StallWatch {
 public:
  // A watch for rank `rank` of a communicator of `nranks` ranks whose hash is `commHash`. *out stays
  // null where reports are off.
  static Status create(int rank, int nranks, uint64_t commHash, std::unique_ptr<StallWatch>* out);
  ~StallWatch();
  StallWatch(const StallWatch&) = delete;
  StallWatch& operator=(const StallWatch&) = delete;

  // What the kernels write (device address of the host-mapped report) and after how long.
  StallReport* deviceReport() const { return deviceReport_; }
  uint64_t stallNs() const { return stallNs_; }

  // Numbers the communicator's next call (`what`, e.g. "AllReduce", of `bytes`) and returns its number.
  uint64_t beginCall(const char* what, size_t bytes);

  // On the monitor's thread: prints what the kernels reported since the last look, once per call.
  void poll();

 private:
  StallWatch() = default;

  struct Call {
    uint64_t number = 0;
    const char* what = "";
    size_t bytes = 0;
  };
  static constexpr size_t kRemembered = 1024;  // calls whose names a report can still give

  int rank_ = 0;
  int nranks_ = 0;
  uint64_t commHash_ = 0;
  uint64_t stallNs_ = 0;
  int mpsQueues_ = 0;  // under MPS: the hardware work queues this process has (0: not under MPS)
  StallReport* hostReport_ = nullptr;
  StallReport* deviceReport_ = nullptr;
  std::mutex callsMutex_;
  uint64_t calls_ = 0;
  Call recent_[kRemembered];
  uint64_t seenCall_ = 0;      // a reported call seen at the previous look (its peers may still come)
  uint64_t reportedCall_ = 0;  // the last call printed
};

}  // namespace mscclpp_nccl
