#include "native/stream_order.h"

#include <vector>

#include "native/transport/cuda_check.h"
#include "native/transport/cuda_driver.h"

namespace mscclpp_nccl {

namespace {

// The stream waits until the ticket word reaches `ticket` (tickets only grow).
Status waitTicket(cudaStream_t stream, const uint64_t* word, uint64_t ticket) {
  const CudaDriver* driver = nullptr;
  MSCCLPP_TRY(loadCudaDriver(&driver));
  MSCCLPP_CU_TRY(driver->cuStreamWaitValue64(reinterpret_cast<CUstream>(stream),
                                             reinterpret_cast<CUdeviceptr>(word), ticket,
                                             CU_STREAM_WAIT_VALUE_GEQ));
  return Status::kSuccess;
}

// Whether streams of the current device can wait on 64-bit values in device memory.
bool deviceWaitsOnTickets() {
  const CudaDriver* driver = cudaDriverOrNull();
  int device = 0, supported = 0;
  CUdevice handle = 0;
  return driver && cudaGetDevice(&device) == cudaSuccess &&
         driver->cuDeviceGet(&handle, device) == CUDA_SUCCESS &&
         driver->cuDeviceGetAttribute(&supported, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS,
                                      handle) == CUDA_SUCCESS &&
         supported != 0;
}

}  // namespace

StreamOrder::~StreamOrder() {
  if (done_) cudaEventDestroy(done_);
  if (join_) cudaEventDestroy(join_);
  if (own_) cudaStreamDestroy(own_);
}

Status StreamOrder::init(bool graphMixing, uint64_t* ticketWord) {
  // Without a ticket word (a routed communicator, whose work publishes none) every call records `done`.
  const bool tickets = ticketWord != nullptr && deviceWaitsOnTickets();
  if (ticketWord != nullptr && !tickets)
    logWarn("streams cannot wait on device memory here: every call records an event instead");
  order_ = CallOrder(graphMixing, tickets);
  ticketWord_ = ticketWord;
  MSCCLPP_CUDA_TRY(cudaEventCreateWithFlags(&done_, cudaEventDisableTiming));
  MSCCLPP_CUDA_TRY(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  MSCCLPP_CUDA_TRY(cudaStreamCreateWithFlags(&own_, cudaStreamNonBlocking));
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
  capturing_ = capturing;
  plan_ = order_.plan(reinterpret_cast<uintptr_t>(launch), capturing ? captureId : 0);
  lastPublished_ = 0;
  if (plan_.coverTicket != 0) MSCCLPP_TRY(coverTicket(plan_.coverTicket));
  if (plan_.waitDone && plan_.waitTicket != 0) {
    MSCCLPP_TRY(waitTicket(launch, ticketWord_, plan_.waitTicket));
  } else if (plan_.waitDone) {
    MSCCLPP_CUDA_TRY(cudaStreamWaitEvent(launch, done_, capturing ? cudaEventWaitExternal : 0));
  }
  if (plan_.joinCapture)
    MSCCLPP_TRY(join(launch, reinterpret_cast<cudaStream_t>(order_.previousCaptureStream())));
  for (size_t i = 1; i < count; ++i) MSCCLPP_TRY(join(launch, streams[i]));
  return Status::kSuccess;
}

Status StreamOrder::end(const cudaStream_t* streams, size_t count) {
  const cudaStream_t launch = streams[0];
  if (plan_.recordDone) {
    if (lastPublished_ == 0) MSCCLPP_CUDA_TRY(cudaEventRecord(done_, launch));
    order_.ended(lastPublished_);
  }
  if (plan_.recordNode) MSCCLPP_TRY(addRecordNode(launch));
  for (size_t i = 1; i < count; ++i) MSCCLPP_TRY(join(streams[i], launch));
  return Status::kSuccess;
}

Status StreamOrder::markIssuedWork() {
  if (done_ == nullptr) return Status::kSuccess;
  const uint64_t ticket = order_.takeDoneTicket();
  return ticket != 0 ? coverTicket(ticket) : Status::kSuccess;
}

bool StreamOrder::issuedWorkEnded() const {
  if (done_ == nullptr) return true;
  // Not ready is the only answer that means "still running"; an error there is the call's, and
  // ncclCommGetAsyncError's kernel flags or the next CUDA call report it.
  const cudaError_t err = cudaEventQuery(done_);
  if (err != cudaErrorNotReady && err != cudaSuccess) cudaGetLastError();
  return err != cudaErrorNotReady;
}

Status StreamOrder::waitIssuedWork() const {
  if (done_ != nullptr) MSCCLPP_CUDA_TRY(cudaEventSynchronize(done_));
  return Status::kSuccess;
}

// Makes `done` mark the work that published `ticket` (and all before it), without touching the stream
// that work ran on, which may be gone.
Status StreamOrder::coverTicket(uint64_t ticket) {
  MSCCLPP_TRY(waitTicket(own_, ticketWord_, ticket));
  MSCCLPP_CUDA_TRY(cudaEventRecord(done_, own_));
  return Status::kSuccess;
}

// The captured graph's one record of `done`: a leaf that depends on the communicator's latest captured
// call, which itself runs after the earlier ones (stream order, or a join). Its edges move to each new
// call instead of gathering one from every call, so that no captured kernel but the last has a second
// dependent (a fork there costs the graph a cross-stream dependency a call), and the stream's next work
// does not depend on it, so captured kernels keep their early-launch edges.
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
  if (std::vector<cudaGraphNode_t>(frontier, frontier + frontierSize) == recordedAfter_)
    return Status::kSuccess;  // a call that captured nothing leaves the frontier as it was
  for (cudaGraphNode_t node : recordedAfter_)
    MSCCLPP_CUDA_TRY(cudaGraphRemoveDependencies(graph, &node, &recordNode_, nullptr, 1));
  recordedAfter_.assign(frontier, frontier + frontierSize);
  for (cudaGraphNode_t node : recordedAfter_)
    MSCCLPP_CUDA_TRY(cudaGraphAddDependencies(graph, &node, &recordNode_, nullptr, 1));
  return Status::kSuccess;
}

// `waiter` waits for the work queued on `done` so far.
Status StreamOrder::join(cudaStream_t waiter, cudaStream_t done) {
  MSCCLPP_CUDA_TRY(cudaEventRecord(join_, done));
  MSCCLPP_CUDA_TRY(cudaStreamWaitEvent(waiter, join_, 0));
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
