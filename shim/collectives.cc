// The collective entry points: argument checks and translation to the native communicator.
#include "native/algorithms/allreduce.h"
#include "shim/enqueue.h"
#include "shim/reduce_ops.h"

using mscclpp_nccl::AllReduceArgs;
using mscclpp_nccl::Communicator;
using mscclpp_nccl::DataType;
using mscclpp_nccl::fail;
using mscclpp_nccl::ReduceOp;
using mscclpp_nccl::Status;

namespace {

#define RETURN_IF_FAILED(expr)                  \
  do {                                          \
    ncclResult_t result_ = (expr);              \
    if (result_ != ncclSuccess) return result_; \
  } while (0)

ncclResult_t checkBuffers(const void* send, const void* recv, size_t count, const char* function) {
  if (count > 0 && (send == nullptr || recv == nullptr))
    return toNccl(fail(Status::kInvalidArgument, "%s: NULL buffer with count %zu", function, count));
  return ncclSuccess;
}

// ncclCollConfig_t tunes resources only; it is checked for a valid header and otherwise ignored.
ncclResult_t checkCollConfig(const ncclCollConfig_t* config, const char* function) {
  if (config != nullptr && config->magic != NCCL_API_MAGIC)
    return toNccl(fail(Status::kInvalidArgument,
                       "%s: ncclCollConfig_t has a bad magic: initialize it with NCCL_COLLCONFIG_INITIALIZER",
                       function));
  return ncclSuccess;
}

ncclResult_t allReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const char* function) {
  RETURN_IF_FAILED(checkReadyComm(comm, function));
  RETURN_IF_FAILED(checkTypeAndCount(datatype, count, function));
  RETURN_IF_FAILED(checkBuffers(sendbuff, recvbuff, count, function));
  ReduceOp reduceOp;
  RETURN_IF_FAILED(resolveReduceOp(comm, op, datatype, function, &reduceOp));
  AllReduceArgs args{sendbuff, recvbuff, count, static_cast<DataType>(datatype), reduceOp};
  return enqueue(comm, stream, function,
                 [args, stream](Communicator& impl) { return impl.allReduce(args, stream); });
}

}  // namespace

NCCL_API(ncclResult_t, ncclAllReduce, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
  return allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream, "ncclAllReduce");
}

NCCL_API(ncclResult_t, ncclAllReduceConfig, const void* sendbuff, void* recvbuff, size_t count,
         ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream,
         const ncclCollConfig_t* config) {
  RETURN_IF_FAILED(checkCollConfig(config, "ncclAllReduceConfig"));
  return allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream, "ncclAllReduceConfig");
}

// Collectives that the native runtime does not serve yet: a clear error, never a silent success.
NCCL_API(ncclResult_t, ncclAllGather, const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) {
  return notImplemented("ncclAllGather");
}
NCCL_API(ncclResult_t, ncclAllGatherConfig, const void*, void*, size_t, ncclDataType_t, ncclComm_t,
         cudaStream_t, const ncclCollConfig_t*) {
  return notImplemented("ncclAllGatherConfig");
}
NCCL_API(ncclResult_t, ncclReduceScatter, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, ncclComm_t,
         cudaStream_t) {
  return notImplemented("ncclReduceScatter");
}
NCCL_API(ncclResult_t, ncclReduceScatterConfig, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t,
         ncclComm_t, cudaStream_t, const ncclCollConfig_t*) {
  return notImplemented("ncclReduceScatterConfig");
}
NCCL_API(ncclResult_t, ncclAlltoAll, const void*, void*, size_t, ncclDataType_t, ncclComm_t, cudaStream_t) {
  return notImplemented("ncclAlltoAll");
}
NCCL_API(ncclResult_t, ncclAlltoAllConfig, const void*, void*, size_t, ncclDataType_t, ncclComm_t,
         cudaStream_t, const ncclCollConfig_t*) {
  return notImplemented("ncclAlltoAllConfig");
}
NCCL_API(ncclResult_t, ncclBroadcast, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
         cudaStream_t) {
  return notImplemented("ncclBroadcast");
}
NCCL_API(ncclResult_t, ncclBroadcastConfig, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
         cudaStream_t, const ncclCollConfig_t*) {
  return notImplemented("ncclBroadcastConfig");
}
NCCL_API(ncclResult_t, ncclBcast, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return notImplemented("ncclBcast");
}
NCCL_API(ncclResult_t, ncclReduce, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int, ncclComm_t,
         cudaStream_t) {
  return notImplemented("ncclReduce");
}
NCCL_API(ncclResult_t, ncclReduceConfig, const void*, void*, size_t, ncclDataType_t, ncclRedOp_t, int,
         ncclComm_t, cudaStream_t, const ncclCollConfig_t*) {
  return notImplemented("ncclReduceConfig");
}
NCCL_API(ncclResult_t, ncclGather, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
         cudaStream_t) {
  return notImplemented("ncclGather");
}
NCCL_API(ncclResult_t, ncclGatherConfig, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
         cudaStream_t, const ncclCollConfig_t*) {
  return notImplemented("ncclGatherConfig");
}
NCCL_API(ncclResult_t, ncclScatter, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
         cudaStream_t) {
  return notImplemented("ncclScatter");
}
NCCL_API(ncclResult_t, ncclScatterConfig, const void*, void*, size_t, ncclDataType_t, int, ncclComm_t,
         cudaStream_t, const ncclCollConfig_t*) {
  return notImplemented("ncclScatterConfig");
}
NCCL_API(ncclResult_t, ncclSend, const void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return notImplemented("ncclSend");
}
NCCL_API(ncclResult_t, ncclRecv, void*, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t) {
  return notImplemented("ncclRecv");
}
