#include "native/call_order.h"

namespace mscclpp_nccl {

OrderPlan CallOrder::plan(uintptr_t stream, uint64_t captureId) {
  plan_ = OrderPlan{};
  if (captureId == 0) {
    plan_.waitDone = (eagerSeen_ && stream != eagerStream_) || captured_;
    if (plan_.waitDone) plan_.waitTicket = doneTicket_;
    plan_.recordDone = true;
    plan_.offerTickets = tickets_ && !captured_;
    eagerSeen_ = true;
    eagerStream_ = stream;
    return plan_;
  }
  everCaptured_ = true;
  if (captureId == captureId_) {
    plan_.joinCapture = stream != captureStream_;
    previousCaptureStream_ = captureStream_;
    captureHasRecord_ = graphMixing_;
  } else if (graphMixing_) {
    // The first call of this communicator in a new capture: at each launch the graph waits for the
    // communicator's work so far, which `done` must then mark.
    plan_.waitDone = true;
    plan_.coverTicket = doneTicket_;
    doneTicket_ = 0;
    captureHasRecord_ = false;
  }
  captureId_ = captureId;
  captureStream_ = stream;
  captured_ = captured_ || graphMixing_;
  plan_.recordNode = graphMixing_;
  return plan_;
}

}  // namespace mscclpp_nccl
