#include "shim/arg_checks.h"

#include <cstdint>

using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

ncclResult_t checkKnownComm(ncclComm_t comm, const char* function) {
  if (comm == nullptr) return toNccl(fail(Status::kInvalidArgument, "%s: comm is NULL", function));
  if (comm->magic != ncclComm::kMagic)
    return toNccl(fail(Status::kInvalidArgument, "%s: comm is not a valid communicator", function));
  if (comm->state.load() == CommState::kDestroyed)
    return toNccl(fail(Status::kInvalidArgument, "%s: comm was already destroyed", function));
  return ncclSuccess;
}

ncclResult_t checkReadyComm(ncclComm_t comm, const char* function) {
  NCCL_TRY(checkManageableComm(comm, function));
  if (comm->revoked.load())
    return toNccl(fail(Status::kInvalidUsage,
                       "%s: comm was revoked (ncclCommRevoke): only split, shrink, destroy and abort remain",
                       function));
  if (comm->suspended.load())
    return toNccl(fail(Status::kInvalidUsage,
                       "%s: comm is suspended (ncclCommSuspend): call ncclCommResume first", function));
  return ncclSuccess;
}

ncclResult_t checkManageableComm(ncclComm_t comm, const char* function) {
  NCCL_TRY(checkKnownComm(comm, function));
  switch (comm->state.load()) {
    case CommState::kReady:
      return ncclSuccess;
    case CommState::kInitializing:
      return toNccl(fail(Status::kInvalidArgument, "%s: comm is still initializing", function));
    case CommState::kAborted:
      return toNccl(fail(Status::kInvalidArgument, "%s: comm was aborted", function));
    default:
      return toNccl(fail(Status::kInvalidUsage, "%s: comm failed to initialize: %s", function,
                         comm->initError.c_str()));
  }
}

ncclResult_t checkBuffers(const void* send, const void* recv, size_t count, const char* function) {
  if (count > 0 && (send == nullptr || recv == nullptr))
    return toNccl(fail(Status::kInvalidArgument, "%s: NULL buffer with count %zu", function, count));
  return ncclSuccess;
}

ncclResult_t checkPeer(ncclComm* comm, int peer, const char* function) {
  if (peer < 0 || peer >= comm->nranks)
    return toNccl(
        fail(Status::kInvalidArgument, "%s: peer %d is not in [0, %d)", function, peer, comm->nranks));
  return ncclSuccess;
}

ncclResult_t checkSignalSlot(int sigIdx, int ctx, unsigned int flags, const char* function) {
  if (sigIdx != 0 || ctx != 0 || flags != 0)
    return toNccl(fail(Status::kInvalidArgument, "%s: sigIdx %d, ctx %d and flags 0x%x must be 0", function,
                       sigIdx, ctx, flags));
  return ncclSuccess;
}

ncclResult_t checkNotCapturing(cudaStream_t stream, const char* function) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  const cudaError_t err = cudaStreamIsCapturing(stream, &status);
  cudaGetLastError();
  if (err == cudaErrorStreamCaptureImplicit) {
    status = cudaStreamCaptureStatusActive;  // the legacy stream, while another stream captures
  } else if (err != cudaSuccess) {
    return toNccl(fail(Status::kInvalidArgument, "%s: stream is not a valid CUDA stream", function));
  }
  if (status != cudaStreamCaptureStatusNone)
    return toNccl(
        fail(Status::kInvalidUsage, "%s: not supported inside CUDA graph capture (nor in NCCL)", function));
  return ncclSuccess;
}

ncclResult_t checkRoot(ncclComm* comm, int root, const char* function) {
  if (root < 0 || root >= comm->nranks)
    return toNccl(
        fail(Status::kInvalidArgument, "%s: root %d is not in [0, %d)", function, root, comm->nranks));
  return ncclSuccess;
}

ncclResult_t checkData(ncclDataType_t type, size_t count, const void* send, const void* recv,
                       const char* function) {
  NCCL_TRY(checkTypeAndCount(type, count, function));
  return checkBuffers(send, recv, count, function);
}

ncclResult_t checkCollective(ncclComm* comm, ncclDataType_t type, size_t count, const void* send,
                             const void* recv, const char* function) {
  NCCL_TRY(checkReadyComm(comm, function));
  return checkData(type, count, send, recv, function);
}

ncclResult_t checkScaledCount(ncclComm* comm, ncclDataType_t type, size_t count, const char* function) {
  if (comm->nranks > 0 && count > SIZE_MAX / comm->nranks)
    return toNccl(fail(Status::kInvalidArgument, "%s: count %zu times %d ranks overflows", function, count,
                       comm->nranks));
  return checkTypeAndCount(type, count * comm->nranks, function);
}

ncclResult_t checkCollConfig(const ncclCollConfig_t* config, const char* function, cudaEvent_t* launchEvent) {
  *launchEvent = nullptr;
  if (config == nullptr) return ncclSuccess;
  if (config->magic != NCCL_API_MAGIC)
    return toNccl(fail(Status::kInvalidArgument,
                       "%s: ncclCollConfig_t has a bad magic: initialize it with NCCL_COLLCONFIG_INITIALIZER",
                       function));
  // Fields past `size` belong to a newer header than the caller's and keep their defaults.
  auto has = [&](size_t offset, size_t bytes) { return offset + bytes <= config->size; };
  // A selection names stock NCCL's algorithms, none of which runs here: forced, it cannot be satisfied,
  // which stock also refuses; unforced, it is a preference, and the library's own choice stands.
  const bool selects = has(offsetof(ncclCollConfig_t, algSelection), sizeof(const char*)) &&
                       config->algSelection != nullptr && config->algSelection[0] != '\0';
  const bool forced =
      !has(offsetof(ncclCollConfig_t, forceAlgSelection), sizeof(int)) || config->forceAlgSelection != 0;
  if (selects && forced)
    return toNccl(
        fail(Status::kInvalidUsage,
             "%s: ncclCollConfig_t forces algSelection \"%s\", which names stock NCCL's algorithms: "
             "this library runs its own (MSCCLPP_NCCL_ALGO forces one of them)",
             function, config->algSelection));
  if (has(offsetof(ncclCollConfig_t, launchCompletionEvent), sizeof(cudaEvent_t)))
    *launchEvent = config->launchCompletionEvent;
  return ncclSuccess;
}

ncclResult_t recordLaunchEvent(cudaEvent_t event, cudaStream_t stream, const char* function) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing(stream, &capture);
  if (err == cudaSuccess)
    err = cudaEventRecordWithFlags(
        event, stream,
        capture == cudaStreamCaptureStatusActive ? cudaEventRecordExternal : cudaEventRecordDefault);
  if (err == cudaSuccess) return ncclSuccess;
  cudaGetLastError();  // not sticky: the caller's event was unusable
  return toNccl(fail(Status::kCudaError, "%s: recording ncclCollConfig_t launchCompletionEvent: %s", function,
                     cudaGetErrorString(err)));
}

ncclResult_t checkStream(ncclComm* comm, cudaStream_t stream, const char* function) {
  if (stream != nullptr && stream == comm->checkedStream.load(std::memory_order_relaxed)) return ncclSuccess;
  // Querying a capturing stream's device would invalidate the capture, and a capture already pins
  // the stream to the device its work runs on: check streams outside capture only.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaError_t err = cudaStreamIsCapturing(stream, &capture);
  if (err == cudaSuccess && capture == cudaStreamCaptureStatusNone) {
    int device = -1;
    err = cudaStreamGetDevice(stream, &device);
    // The legacy and per-thread default streams report the current device; the call runs on the comm's.
    bool defaultStream = stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread;
    if (err == cudaSuccess && device != comm->device && !defaultStream)
      return toNccl(fail(Status::kInvalidArgument,
                         "%s: stream belongs to device %d but the comm to device %d", function, device,
                         comm->device));
    if (err == cudaSuccess && !defaultStream) comm->checkedStream.store(stream, std::memory_order_relaxed);
  }
  if (err != cudaSuccess) {
    cudaGetLastError();
    return toNccl(
        fail(Status::kInvalidArgument, "%s: invalid stream: %s", function, cudaGetErrorString(err)));
  }
  return ncclSuccess;
}

ncclResult_t checkTypeAndCount(ncclDataType_t type, size_t count, const char* function) {
  if (type < 0 || type >= ncclNumTypes)
    return toNccl(
        fail(Status::kInvalidArgument, "%s: unknown datatype %d", function, static_cast<int>(type)));
  size_t size = mscclpp_nccl::dataTypeSize(static_cast<mscclpp_nccl::DataType>(type));
  if (count > SIZE_MAX / size)
    return toNccl(fail(Status::kInvalidArgument, "%s: count %zu overflows", function, count));
  return ncclSuccess;
}
