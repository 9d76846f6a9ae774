#include "native/algorithms/kernel_launch.h"

#include "native/algorithms/launch_record.h"

namespace mscclpp_nccl {

std::mutex& launchLock() {
  static std::mutex lock;
  return lock;
}

// Only our own launches are recorded. Other work queued between two of them (a caller's kernel, a copy,
// a graph launch) cannot make a large grid start beside one of ours: the attribute relaxes a kernel's
// wait on the kernel right before it in the stream only, and a caller's kernel there runs to its end
// whatever our peers do.
bool mayCarryEarlyAttribute(cudaStream_t stream, bool early) {
  // The legacy and per-thread default streams are one handle for several streams.
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) return early;
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  unsigned long long capture = 0;
  if (cudaStreamGetCaptureInfo(stream, &status, &capture) != cudaSuccess) {
    cudaGetLastError();  // not sticky; the launch itself reports what is wrong with the stream
    return early;
  }
  static LaunchRecord record;  // under launchLock()
  return record.mayCarry(stream, status == cudaStreamCaptureStatusActive ? capture : 0, early);
}

}  // namespace mscclpp_nccl
