// What one call of a communicator must do so that it runs after the communicator's previous call,
// whatever streams the two were issued on (NCCL's rule), decided from the communicator's history alone.
// No CUDA here: native/stream_order.cc carries the plan out, and tests drive this on the CPU.
//
// The end of the communicator's latest work is marked in one of two ways. An eager call whose last work
// is a kernel that publishes a ticket (a number in device memory, written by its last block) is marked
// by that ticket, at no cost to the call. Any other eager call records the communicator's `done` event
// on its own stream after its work. A call on another stream than the previous one first waits for the
// mark: for the ticket with a stream memory wait, or for `done`. Nothing is recorded later on an earlier
// stream: a stream may be destroyed once its calls returned, so only a call's own streams are touched.
//
// Once the communicator has been captured in a CUDA graph, a graph launch may run at any time: every
// eager call then waits for `done` and records it, and each graph waits for `done` before its first
// call and records it after its calls, as NCCL does by default. A ticket still marking the latest eager
// work at the first capture is turned into `done` first, on a stream of the communicator's own. Without
// graph mixing (NCCL_GRAPH_MIXING_SUPPORT=0) graphs are ordered only among their own calls, and the
// caller keeps graph launches and other calls apart.
#pragma once

#include <cstdint>

namespace mscclpp_nccl {

struct OrderPlan {
  bool waitDone = false;     // the launch stream waits for the latest work: for waitTicket when nonzero
  uint64_t waitTicket = 0;   //   (eager), else for `done` (in a capture: an external wait)
  uint64_t coverTicket = 0;  // nonzero: first make `done` cover this ticket, on the communicator's stream
  bool joinCapture = false;  // in a capture: join the previous call's stream of the same capture
  bool recordDone = false;   // eager: after the work, mark its end (a ticket its kernel published, or `done`)
  bool offerTickets = false;  // eager: the call's kernels may publish tickets
  bool recordNode = false;    // after the work: add a record node of `done` to the captured graph
};

class CallOrder {
 public:
  // `tickets`: kernels can publish tickets and streams can wait for them (64-bit stream memory ops).
  explicit CallOrder(bool graphMixing = true, bool tickets = true)
      : graphMixing_(graphMixing), tickets_(tickets) {}

  // `stream` identifies the launch stream; `captureId` is 0 outside stream capture.
  OrderPlan plan(uintptr_t stream, uint64_t captureId);
  // A new ticket for one of the current call's kernels to publish, or 0 where the plan offers none.
  uint64_t nextTicket() { return plan_.offerTickets ? ++lastTicket_ : 0; }
  // After a recordDone call's work: `published` is the ticket its last work published, or 0 when the
  // caller recorded `done` instead.
  void ended(uint64_t published) { doneTicket_ = published; }
  // For a mark of every call so far: the ticket that `done` must first be made to cover (0: `done`
  // marks the latest work already); from then on `done` marks it.
  uint64_t takeDoneTicket() {
    const uint64_t ticket = doneTicket_;
    doneTicket_ = 0;
    return ticket;
  }

  // Whether any call was captured into a CUDA graph (whose replays use the addresses it was given).
  bool everCaptured() const { return everCaptured_; }

  // The stream of the previous call within the current capture (meaningful with joinCapture).
  uintptr_t previousCaptureStream() const { return previousCaptureStream_; }
  // True once the current capture already holds its record node of `done` (later calls feed it).
  bool captureHasRecordNode() const { return captureHasRecord_; }

 private:
  bool graphMixing_;
  bool tickets_;
  OrderPlan plan_;
  uint64_t lastTicket_ = 0;  // the last ticket handed out
  uint64_t doneTicket_ = 0;  // the ticket that marks the latest work; 0: `done` marks it
  bool eagerSeen_ = false;
  uintptr_t eagerStream_ = 0;
  bool captured_ = false;
  bool everCaptured_ = false;
  uint64_t captureId_ = 0;
  uintptr_t captureStream_ = 0;
  uintptr_t previousCaptureStream_ = 0;
  bool captureHasRecord_ = false;
};

}  // namespace mscclpp_nccl
