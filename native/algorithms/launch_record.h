// Per stream (and graph capture), whether the last kernel launched there lets its successor start early:
// what kernel_launch.h needs to know before a large grid may carry the early-launch attribute. Plain C++,
// so that tests/launch_record_driver.cc drives it without a GPU.
#pragma once

#include <array>
#include <cstddef>

namespace mscclpp_nccl {

class LaunchRecord {
 public:
  // Whether a kernel launched early (`early`) or not may carry the attribute on `stream` within graph
  // capture `capture` (0: none), which is then recorded as the last kernel there. A kernel launched early
  // may always; another only after a recorded kernel that was not launched early: a stream not recorded
  // (or dropped for newer ones) may end in one that was.
  bool mayCarry(const void* stream, unsigned long long capture, bool early);

  static constexpr size_t kStreams = 64;  // the streams launched on most recently

 private:
  struct Entry {
    const void* stream;
    unsigned long long capture;
    bool endsEarly;
  };
  std::array<Entry, kStreams> entries_{};
  size_t used_ = 0, next_ = 0;  // next_: the entry to replace once all are used (the oldest)
};

}  // namespace mscclpp_nccl
