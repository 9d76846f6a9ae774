#include "native/transport/device_census.h"

#include <algorithm>

namespace mscclpp_nccl {
namespace {

constexpr int kMaxDevices = 256;

std::atomic<int>* counters() {
  static std::atomic<int>* table = new std::atomic<int>[kMaxDevices]();  // never freed: used at exit
  return table;
}

}  // namespace

DeviceCensusEntry::DeviceCensusEntry(int device)
    : count_(&counters()[std::clamp(device, 0, kMaxDevices - 1)]) {
  count_->fetch_add(1, std::memory_order_relaxed);
}

DeviceCensusEntry::~DeviceCensusEntry() { count_->fetch_sub(1, std::memory_order_relaxed); }

}  // namespace mscclpp_nccl
