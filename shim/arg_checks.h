// Every argument check of the C API, in one place (as NCCL's argcheck.cc). Each returns ncclSuccess or
// the error NCCL gives, with the reason left for ncclGetLastError; `function` names the API call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "shim/comm_handle.h"

// Checks that `comm` is a handle this library made and that it was not destroyed.
ncclResult_t checkKnownComm(ncclComm_t comm, const char* function);
// Checks that `comm` is a live handle whose initialisation finished, that was not revoked and is not
// suspended.
ncclResult_t checkReadyComm(ncclComm_t comm, const char* function);
// As checkReadyComm, but a revoked communicator passes: what split and shrink, which make its successor,
// and queries need.
ncclResult_t checkManageableComm(ncclComm_t comm, const char* function);
// Checks that `stream` belongs to the communicator's device.
ncclResult_t checkStream(ncclComm* comm, cudaStream_t stream, const char* function);
// Checks a datatype and that `count` elements of it fit in size_t bytes.
ncclResult_t checkTypeAndCount(ncclDataType_t type, size_t count, const char* function);
// Checks that buffers a call reads or writes are not NULL when it moves data.
ncclResult_t checkBuffers(const void* send, const void* recv, size_t count, const char* function);
// Checks that `peer` is a rank of the communicator.
ncclResult_t checkPeer(ncclComm* comm, int peer, const char* function);
// One-sided operations: NCCL's present limits, one signal index, one context, no flags.
ncclResult_t checkSignalSlot(int sigIdx, int ctx, unsigned int flags, const char* function);
// Eager-only calls (one-sided operations, as in NCCL): refused while `stream` is being captured.
ncclResult_t checkNotCapturing(cudaStream_t stream, const char* function);
// Checks that `root` is a rank of the communicator.
ncclResult_t checkRoot(ncclComm* comm, int root, const char* function);
// Checks of a collective's data; `send`/`recv` are NULL-checked only where this rank uses them.
ncclResult_t checkData(ncclDataType_t type, size_t count, const void* send, const void* recv,
                       const char* function);
// Checks shared by every collective without a root.
ncclResult_t checkCollective(ncclComm* comm, ncclDataType_t type, size_t count, const void* send,
                             const void* recv, const char* function);
// Count of elements that the widest buffer of a collective holds (count * nranks must not overflow).
ncclResult_t checkScaledCount(ncclComm* comm, ncclDataType_t type, size_t count, const char* function);
// A collective's ncclCollConfig_t: a valid header, and a forced algorithm selection refused (it names
// stock's algorithms); *launchEvent is its launch-completion event (null: none), which enqueue() records
// and the call's kernels carry.
// Its resource hints (CTA counts, cluster size, CTA policy) and profiler tag are not used.
ncclResult_t checkCollConfig(const ncclCollConfig_t* config, const char* function, cudaEvent_t* launchEvent);
// Records a call's launch-completion event on `stream` before the call's work is queued, which is what
// stock does where CUDA cannot signal a launch's completion (before 12.3); outside a capture the call's
// kernels then carry the event (native/algorithms/launch_completion.h), firing it where stock's fires.
// Recording it after the work instead would make a waiter wait for the collective to end, which can
// deadlock ranks that order another communicator's call after the event. In a capture the graph
// records it at each launch, as the caller expects.
ncclResult_t recordLaunchEvent(cudaEvent_t event, cudaStream_t stream, const char* function);
