// Orders the calls of one communicator across streams and CUDA graphs, as NCCL does: each call's work
// runs after the communicator's previous call and before its next one, whatever streams they use.
// The decisions are native/call_order.h's; this carries them out with tickets that kernels publish in
// device memory, two events, and a stream of its own.
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

  // Creates the events and the stream on the current device. `ticketWord` is the device word that
  // kernels publish tickets in (StepCounter::ticket). Without `graphMixing` (NCCL_GRAPH_MIXING_SUPPORT=0)
  // graphs are not ordered against the communicator's other work.
  Status init(bool graphMixing, uint64_t* ticketWord);
  // Before a call's work, which is then issued on streams[0]: it waits for the communicator's previous
  // call and for the work already queued on streams[1..count) (a group that spans several streams).
  Status begin(const cudaStream_t* streams, size_t count);
  // Each piece of the call's work starts with newWork(): a ticket for its kernel to publish (0: none),
  // and the call's end is no longer marked by an earlier piece. published() follows a kernel launched
  // with the ticket that will publish it.
  uint64_t newWork() {
    lastPublished_ = 0;
    return order_.nextTicket();
  }
  void published(uint64_t ticket) { lastPublished_ = ticket; }
  // Whether the current call (since begin()) is being captured into a CUDA graph.
  bool capturing() const { return capturing_; }
  // After the work: the communicator's next call, and streams[1..count), wait for it.
  Status end(const cudaStream_t* streams, size_t count);

  // Makes `done` mark every call issued so far (ncclCommRevoke), without touching the callers' streams.
  Status markIssuedWork();
  // Whether the work markIssuedWork() marked has ended (a graph launched since then marks its own).
  bool issuedWorkEnded() const;
  // Blocks until the work markIssuedWork() marked has ended.
  Status waitIssuedWork() const;
  // Whether any call was captured into a CUDA graph.
  bool everCaptured() const { return order_.everCaptured(); }

 private:
  Status coverTicket(uint64_t ticket);
  Status addRecordNode(cudaStream_t stream);
  Status join(cudaStream_t waiter, cudaStream_t done);

  CallOrder order_;
  OrderPlan plan_;
  uint64_t* ticketWord_ = nullptr;              // device memory: the latest ticket published
  uint64_t lastPublished_ = 0;                  // the ticket the call's last work publishes (0: none)
  bool capturing_ = false;                      // the current call's stream is being captured
  cudaStream_t own_ = nullptr;                  // where a ticket is turned into a record of `done`
  cudaEvent_t done_ = nullptr;                  // the communicator's latest work
  cudaEvent_t join_ = nullptr;                  // a record that one stream waits for at once (reused)
  cudaGraphNode_t recordNode_ = nullptr;        // the current capture's record of `done`
  std::vector<cudaGraphNode_t> recordedAfter_;  // the nodes it already depends on
};

}  // namespace mscclpp_nccl
