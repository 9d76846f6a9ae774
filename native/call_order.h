// What one call of a communicator must do so that it runs after the communicator's previous call,
// whatever streams the two were issued on (NCCL's rule), decided from the communicator's history alone.
// No CUDA here: native/stream_order.cc carries the plan out, and tests drive this on the CPU.
//
// Every eager call records the communicator's `done` event after its work, and a call on another stream
// than the previous one waits for it. The record is made during the call, on the call's own stream: a
// stream may be destroyed once its calls returned, so a later call must never touch it. Once the
// communicator has been captured in a CUDA graph, a graph launch may run at any time, so every eager call
// then waits for `done` too, and each graph waits for `done` before its first call and records it after
// its calls, as NCCL does by default. Without graph mixing (NCCL_GRAPH_MIXING_SUPPORT=0) graphs are
// ordered only among their own calls, and the caller keeps graph launches and other calls apart.
#pragma once

#include <cstdint>

namespace mscclpp_nccl {

struct OrderPlan {
  bool waitDone = false;     // the launch stream waits for `done` (in a capture: an external wait)
  bool joinCapture = false;  // in a capture: join the previous call's stream of the same capture
  bool recordDone = false;   // after the work: record `done` on the launch stream (eager)
  bool recordNode = false;   // after the work: add a record node of `done` to the captured graph
};

class CallOrder {
 public:
  explicit CallOrder(bool graphMixing = true) : graphMixing_(graphMixing) {}

  // `stream` identifies the launch stream; `captureId` is 0 outside stream capture.
  OrderPlan plan(uintptr_t stream, uint64_t captureId);

  // The stream of the previous call within the current capture (meaningful with joinCapture).
  uintptr_t previousCaptureStream() const { return previousCaptureStream_; }
  // True once the current capture already holds its record node of `done` (later calls feed it).
  bool captureHasRecordNode() const { return captureHasRecord_; }

 private:
  bool graphMixing_;
  bool eagerSeen_ = false;
  uintptr_t eagerStream_ = 0;
  bool captured_ = false;
  uint64_t captureId_ = 0;
  uintptr_t captureStream_ = 0;
  uintptr_t previousCaptureStream_ = 0;
  bool captureHasRecord_ = false;
};

}  // namespace mscclpp_nccl
