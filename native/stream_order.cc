#include "native/stream_order.h"

#include <algorithm>
#include <vector>

#include "native/transport/cuda_check.h"

namespace mscclpp_nccl {

StreamOrder::~StreamOrder() {
  if (done_) cudaEventDestroy(done_);
  if (join_) cudaEventDestroy(join_);
}

Status StreamOrder::init(bool graphMixing) {
  order_ = CallOrder(graphMixing);
  MSCCLPP_CUDA_TRY(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  MSCCLPP_CUDA_TRY(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  return Status::kSuccess;
}

Status StreamOrder::begin(const cudaStream_t* streams, size_t count) {
  const cudaStream_t launch = streams[0];
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  unsigned long long captureId = 0;
  MSCCLPP_CUDA_TRY(cudaStreamGetCaptureInfo(launch, &capture, &captureId));
  if (capture == cudaStreamCaptureStatusInvalidated)
    return fail(Status::kCudaError, "the stream's CUDA graph capture was invalidated");
  const bool capturing = capture == cudaStreamCaptureStatusActive;
  plan_ = order_.plan(reinterpret_cast<uintptr_t>(launch), capturing ? captureId : 0);
  if (plan_.waitDone)
    MSCCLPP_CUDA_TRY(cudaStreamWaitEvent(launch, done_, capturing ? cudaEventWaitExternal : 0));
  if (plan_.joinCapture)
    MSCCLPP_TRY(join(launch, reinterpret_cast<cudaStream_t>(order_.previousCaptureStream())));
  for (size_t i = 1; i < count; ++i) MSCCLPP_TRY(join(launch, streams[i]));
  return Status::kSuccess;
}

Status StreamOrder::end(const cudaStream_t* streams, size_t count) {
  const cudaStream_t launch = streams[0];
  if (plan_.recordDone) MSCCLPP_CUDA_TRY(cudaEventRecord(done_, launch));
  if (plan_.recordNode) MSCCLPP_TRY(addRecordNode(launch));
  for (size_t i = 1; i < count; ++i) MSCCLPP_TRY(join(streams[i], launch));
  return Status::kSuccess;
}

// The captured graph's one record of `done`: a leaf that depends on everything the communicator's
// calls captured so far. The stream's next work does not depend on it, so captured kernels keep their
// early-launch edges, and a graph launch costs one record however many calls it holds.
Status StreamOrder::addRecordNode(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  const cudaGraphNode_t* frontier = nullptr;
  const cudaGraphEdgeData* edges = nullptr;  // asked for so that early-launch edges are no lossy query
  size_t frontierSize = 0;
  MSCCLPP_CUDA_TRY(
      cudaStreamGetCaptureInfo(stream, &status, nullptr, &graph, &frontier, &edges, &frontierSize));
  if (!order_.captureHasRecordNode() || !recordNode_) {
    recordedAfter_.assign(frontier, frontier + frontierSize);
    MSCCLPP_CUDA_TRY(cudaGraphAddEventRecordNode(&recordNode_, graph, recordedAfter_.data(),
                                                 recordedAfter_.size(), done_));
    return Status::kSuccess;
  }
  for (size_t i = 0; i < frontierSize; ++i) {
    if (std::find(recordedAfter_.begin(), recordedAfter_.end(), frontier[i]) != recordedAfter_.end())
      continue;  // a call that captured nothing leaves the frontier as it was
    MSCCLPP_CUDA_TRY(cudaGraphAddDependencies(graph, &frontier[i], &recordNode_, nullptr, 1));
    recordedAfter_.push_back(frontier[i]);
  }
  return Status::kSuccess;
}

// `waiter` waits for the work queued on `done` so far.
Status StreamOrder::join(cudaStream_t waiter, cudaStream_t done) {
  MSCCLPP_CUDA_TRY(cudaEventRecord(join_, done));
  MSCCLPP_CUDA_TRY(cudaStreamWaitEvent(waiter, join_, 0));
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
