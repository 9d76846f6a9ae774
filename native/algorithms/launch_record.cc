#include "native/algorithms/launch_record.h"

namespace mscclpp_nccl {

bool LaunchRecord::mayCarry(const void* stream, unsigned long long capture, bool early) {
  for (size_t i = 0; i < used_; ++i) {
    Entry& entry = entries_[i];
    if (entry.stream != stream || entry.capture != capture) continue;
    const bool allowed = early || !entry.endsEarly;
    entry.endsEarly = early;
    return allowed;
  }
  Entry& entry = used_ < kStreams ? entries_[used_++] : entries_[next_++ % kStreams];
  entry = {stream, capture, early};
  return early;
}

}  // namespace mscclpp_nccl
