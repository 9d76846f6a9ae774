#include "native/call_order.h"

namespace mscclpp_nccl {

OrderPlan CallOrder::plan(uintptr_t stream, uint64_t captureId) {
  OrderPlan plan;
  if (captureId == 0) {
    const bool changed = eagerSeen_ && stream != eagerStream_;
    manyStreams_ = manyStreams_ || changed;
    plan.recordPrevious = changed && eagerUnrecorded_;
    plan.waitDone = changed || captured_;
    plan.recordDone = manyStreams_ || captured_;
    previousEagerStream_ = eagerStream_;
    eagerSeen_ = true;
    eagerStream_ = stream;
    eagerUnrecorded_ = !plan.recordDone;
    return plan;
  }
  if (captureId == captureId_) {
    plan.joinCapture = stream != captureStream_;
    previousCaptureStream_ = captureStream_;
    captureHasRecord_ = graphMixing_;
  } else if (graphMixing_) {
    // The first call of this communicator in a new capture: at each launch the graph waits for the
    // communicator's work so far, which must then be behind `done`.
    plan.recordPrevious = eagerUnrecorded_;
    plan.waitDone = true;
    previousEagerStream_ = eagerStream_;
    eagerUnrecorded_ = false;
    captureHasRecord_ = false;
  }
  captureId_ = captureId;
  captureStream_ = stream;
  captured_ = captured_ || graphMixing_;
  plan.recordNode = graphMixing_;
  return plan;
}

}  // namespace mscclpp_nccl
