#include "shim/enqueue.h"

using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

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
