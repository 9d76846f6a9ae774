// ncclGroupStart/ncclGroupEnd bookkeeping, per thread. Work issued inside a group is queued and runs
// at the outermost ncclGroupEnd: initialisations concurrently (ranks initialised from one thread
// rendezvous with each other), then each communicator's collectives and transfers as one call of that
// communicator, in the order they were called, over every stream they named.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "native/common/status.h"
#include "shim/api.h"

struct ncclComm;
namespace mscclpp_nccl {
class Communicator;
}  // namespace mscclpp_nccl

int groupDepth();
// Counts closed outermost groups of this thread: state kept for "the current group" is stale once
// this changes (ncclGroupSimulateEnd drops queued work without running it).
uint64_t groupEpoch();
// Queues `work` (an initialisation or window registration) for the outermost ncclGroupEnd of this
// thread, which runs such work on threads of its own and joins them before it returns; items with the
// same `orderKey` (a communicator's registrations, collective in call order) share one thread, in order.
// `cancel`, when given, runs instead of `work` if the group fails: it is told the group's error and text.
using GroupCancel = std::function<void(ncclResult_t error, const std::string& text)>;
void deferToGroupEnd(std::function<ncclResult_t()> work, const void* orderKey = nullptr,
                     GroupCancel cancel = nullptr);

// Runs task(0..count) on a thread each and joins them; (*results)[i] is what task(i) returned. No task
// starts before every thread exists (tasks may wait for each other, as ranks in one rendezvous do), so
// a thread the system refuses fails the whole call with ncclSystemError and no task runs.
ncclResult_t runConcurrently(size_t count, const std::function<ncclResult_t(size_t)>& task,
                             std::vector<ncclResult_t>* results, const char* function);

// Work of one collective or transfer, issued on the stream it is given.
using StreamLaunch = std::function<mscclpp_nccl::Status(mscclpp_nccl::Communicator&, cudaStream_t)>;
// What that work would take, in microseconds (Communicator::modeledMicroseconds): ncclGroupSimulateEnd's
// estimate sums it over the group.
using StreamModel = std::function<double(const mscclpp_nccl::Communicator&)>;
// Queues `launch`, called on `comm` with `stream`, for the outermost ncclGroupEnd of this thread. A null
// `launch` only adds `stream` to the streams that the comm's group work joins; a null `model` costs nothing.
void deferToGroupEnd(ncclComm* comm, cudaStream_t stream, StreamLaunch launch, StreamModel model = nullptr);
