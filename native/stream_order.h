// Orders the calls of one communicator across streams and CUDA graphs, as NCCL does: each call's work
// runs after the communicator's previous call and before its next one, whatever streams they use.
// The decisions are native/call_order.h's; this carries them out with two events.
#pragma once

#include <cuda_runtime.h>

#include <vector>

#include "native/call_order.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

class StreamOrder {
 public:
  StreamOrder() = default;
  ~StreamOrder();
  StreamOrder(const StreamOrder&) = delete;
  StreamOrder& operator=(const StreamOrder&) = delete;

  // Creates the events on the current device. Without `graphMixing` (NCCL_GRAPH_MIXING_SUPPORT=0)
  // graphs are not ordered against the communicator's other work.
  Status init(bool graphMixing);
  // Before a call's work, which is then issued on streams[0]: it waits for the communicator's previous
  // call and for the work already queued on streams[1..count) (a group that spans several streams).
  Status begin(const cudaStream_t* streams, size_t count);
  // After the work: the communicator's next call, and streams[1..count), wait for it.
  Status end(const cudaStream_t* streams, size_t count);

 private:
  Status addRecordNode(cudaStream_t stream);
  Status join(cudaStream_t waiter, cudaStream_t done);

  CallOrder order_;
  OrderPlan plan_;
  cudaEvent_t done_ = nullptr;                  // the communicator's latest work
  cudaEvent_t join_ = nullptr;                  // a record that one stream waits for at once (reused)
  cudaGraphNode_t recordNode_ = nullptr;        // the current capture's record of `done`
  std::vector<cudaGraphNode_t> recordedAfter_;  // the nodes it already depends on
};

}  // namespace mscclpp_nccl
