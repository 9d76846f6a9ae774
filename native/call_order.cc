#include "native/call_order.h"

namespace mscclpp_nccl {

OrderPlan CallOrder::plan(uintptr_t stream, uint64_t captureId) {
  OrderPlan plan;
  if (captureId == 0) {
    plan.waitDone = (eagerSeen_ && stream != eagerStream_) || captured_;
    plan.recordDone = true;
    eagerSeen_ = true;
    eagerStream_ = stream;
    return plan;
  }
  if (captureId == captureId_) {
    plan.joinCapture = stream != captureStream_;
    previousCaptureStream_ = captureStream_;
    captureHasRecord_ = graphMixing_;
  } else if (graphMixing_) {
    // The first call of this communicator in a new capture: at each launch the graph waits for the
    // communicator's work so far.
    plan.waitDone = true;
    captureHasRecord_ = false;
  }
  captureId_ = captureId;
  captureStream_ = stream;
  captured_ = captured_ || graphMixing_;
  plan.recordNode = graphMixing_;
  return plan;
}

}  // namespace mscclpp_nccl
