#include "native/algorithms/launch_completion.h"

#include <atomic>

#include "native/common/logging.h"

namespace mscclpp_nccl {
namespace {

thread_local LaunchCompletion* tlsScope = nullptr;
// The last event the attribute refused: a caller that passes one timed event to every call pays for the
// failed launch once. A handle reused for an event the attribute would take keeps only the shim's record.
std::atomic<cudaEvent_t> lastRefused{nullptr};

}  // namespace

LaunchCompletion::LaunchCompletion(cudaEvent_t event, cudaStream_t stream) : outer_(tlsScope) {
  tlsScope = this;  // even without an event: an enclosing scope's must not reach this call's kernels
  if (event == nullptr) return;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) {
    cudaGetLastError();  // not sticky; the launch reports what is wrong with the stream
    return;
  }
  if (capture == cudaStreamCaptureStatusNone) event_ = event;
}

LaunchCompletion::~LaunchCompletion() { tlsScope = outer_; }

cudaEvent_t LaunchCompletion::eventToCarry() {
  if (tlsScope == nullptr || tlsScope->event_ == lastRefused.load(std::memory_order_relaxed)) return nullptr;
  return tlsScope->event_;
}

void LaunchCompletion::refused() {
  if (tlsScope == nullptr || tlsScope->event_ == nullptr ||
      lastRefused.exchange(tlsScope->event_, std::memory_order_relaxed) == tlsScope->event_)
    return;
  MSCCLPP_INFO(
      kColl,
      "launchCompletionEvent %p: kernels cannot carry it (CUDA takes only events with timing off); it "
      "is recorded before each call's work",
      static_cast<void*>(tlsScope->event_));
}

}  // namespace mscclpp_nccl
