// The collective entry points: argument checks and translation to the native communicator.
#include "native/algorithms/allreduce.h"
#include "native/collective_plans.h"
#include "shim/enqueue.h"
#include "shim/reduce_ops.h"

using mscclpp_nccl::AllReduceArgs;
using mscclpp_nccl::Communicator;
using mscclpp_nccl::DataType;
using mscclpp_nccl::fail;
using mscclpp_nccl::ReduceOp;
using mscclpp_nccl::Status;

namespace {

ncclResult_t runExchange(ncclComm* comm, const mscclpp_nccl::ExchangeArgs& args, cudaStream_t stream,
                         const char* function, cudaEvent_t launchEvent) {
  return enqueue(
      comm, stream, function,
      [args](Communicator& impl, cudaStream_t launch) { return impl.exchange(args, launch); }, launchEvent,
      [args](const Communicator& impl) { return impl.modeledMicroseconds(args); });
}

DataType native(ncclDataType_t type) { return static_cast<DataType>(type); }

const void* sentinel() {
  static const char unused = 0;  // stands for a buffer this rank does not use
  return &unused;
}

ncclResult_t allReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                       ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const char* function,
                       cudaEvent_t launchEvent = nullptr) {
  const ApiRange range(function, callPayload(comm, count, datatype, op, -1));
  NCCL_TRY(checkCollective(comm, datatype, count, sendbuff, recvbuff, function));
  ReduceOp reduceOp;
  NCCL_TRY(resolveReduceOp(comm, op, datatype, function, &reduceOp));
  AllReduceArgs args{sendbuff, recvbuff, count, static_cast<DataType>(datatype), reduceOp};
  return enqueue(
      comm, stream, function,
      [args](Communicator& impl, cudaStream_t launch) { return impl.allReduce(args, launch); }, launchEvent,
      [args](const Communicator& impl) { return impl.modeledMicroseconds(args); });
}

}  // namespace

NCCL_CALL_API(ncclResult_t, ncclAllReduce,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
               ncclComm_t comm, cudaStream_t stream),
              sendbuff, recvbuff, count, datatype, op, comm, stream) {
  return allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream, "ncclAllReduce");
}

NCCL_CALL_API(ncclResult_t, ncclAllReduceConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config),
              sendbuff, recvbuff, count, datatype, op, comm, stream, config) {
  cudaEvent_t launchEvent = nullptr;
  NCCL_TRY(checkCollConfig(config, "ncclAllReduceConfig", &launchEvent));
  return allReduce(sendbuff, recvbuff, count, datatype, op, comm, stream, "ncclAllReduceConfig", launchEvent);
}

namespace {

ncclResult_t allGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                       ncclComm_t comm, cudaStream_t stream, const char* function,
                       cudaEvent_t launchEvent = nullptr) {
  const ApiRange range(function, callPayload(comm, sendcount, datatype, -1, -1));
  NCCL_TRY(checkCollective(comm, datatype, sendcount, sendbuff, recvbuff, function));
  NCCL_TRY(checkScaledCount(comm, datatype, sendcount, function));
  return runExchange(comm, mscclpp_nccl::planAllGather(sendbuff, recvbuff, sendcount, native(datatype)),
                     stream, function, launchEvent);
}

ncclResult_t reduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const char* function,
                           cudaEvent_t launchEvent = nullptr) {
  const ApiRange range(function, callPayload(comm, recvcount, datatype, op, -1));
  NCCL_TRY(checkCollective(comm, datatype, recvcount, sendbuff, recvbuff, function));
  NCCL_TRY(checkScaledCount(comm, datatype, recvcount, function));
  ReduceOp reduceOp;
  NCCL_TRY(resolveReduceOp(comm, op, datatype, function, &reduceOp));
  return runExchange(
      comm, mscclpp_nccl::planReduceScatter(sendbuff, recvbuff, recvcount, native(datatype), reduceOp),
      stream, function, launchEvent);
}

ncclResult_t alltoAll(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                      ncclComm_t comm, cudaStream_t stream, const char* function,
                      cudaEvent_t launchEvent = nullptr) {
  const ApiRange range(function, callPayload(comm, count, datatype, -1, -1));
  NCCL_TRY(checkCollective(comm, datatype, count, sendbuff, recvbuff, function));
  NCCL_TRY(checkScaledCount(comm, datatype, count, function));
  return runExchange(comm, mscclpp_nccl::planAlltoAll(sendbuff, recvbuff, count, native(datatype)), stream,
                     function, launchEvent);
}

ncclResult_t broadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                       ncclComm_t comm, cudaStream_t stream, const char* function,
                       cudaEvent_t launchEvent = nullptr) {
  const ApiRange range(function, callPayload(comm, count, datatype, -1, root));
  NCCL_TRY(checkReadyComm(comm, function));
  NCCL_TRY(checkRoot(comm, root, function));
  const bool isRoot = comm->rank == root;
  NCCL_TRY(checkData(datatype, count, isRoot ? sendbuff : sentinel(), recvbuff, function));
  return runExchange(
      comm, mscclpp_nccl::planBroadcast(comm->rank, sendbuff, recvbuff, count, native(datatype), root),
      stream, function, launchEvent);
}

ncclResult_t reduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype,
                    ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t stream, const char* function,
                    cudaEvent_t launchEvent = nullptr) {
  const ApiRange range(function, callPayload(comm, count, datatype, op, root));
  NCCL_TRY(checkReadyComm(comm, function));
  NCCL_TRY(checkRoot(comm, root, function));
  const bool isRoot = comm->rank == root;
  NCCL_TRY(checkData(datatype, count, sendbuff, isRoot ? recvbuff : sentinel(), function));
  ReduceOp reduceOp;
  NCCL_TRY(resolveReduceOp(comm, op, datatype, function, &reduceOp));
  return runExchange(
      comm, mscclpp_nccl::planReduce(comm->rank, sendbuff, recvbuff, count, native(datatype), reduceOp, root),
      stream, function, launchEvent);
}

ncclResult_t gather(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                    ncclComm_t comm, cudaStream_t stream, const char* function,
                    cudaEvent_t launchEvent = nullptr) {
  const ApiRange range(function, callPayload(comm, count, datatype, -1, root));
  NCCL_TRY(checkReadyComm(comm, function));
  NCCL_TRY(checkRoot(comm, root, function));
  const bool isRoot = comm->rank == root;
  NCCL_TRY(checkData(datatype, count, sendbuff, isRoot ? recvbuff : sentinel(), function));
  NCCL_TRY(checkScaledCount(comm, datatype, count, function));
  return runExchange(comm,
                     mscclpp_nccl::planGather(comm->rank, sendbuff, recvbuff, count, native(datatype), root),
                     stream, function, launchEvent);
}

ncclResult_t scatter(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                     ncclComm_t comm, cudaStream_t stream, const char* function,
                     cudaEvent_t launchEvent = nullptr) {
  const ApiRange range(function, callPayload(comm, count, datatype, -1, root));
  NCCL_TRY(checkReadyComm(comm, function));
  NCCL_TRY(checkRoot(comm, root, function));
  const bool isRoot = comm->rank == root;
  NCCL_TRY(checkData(datatype, count, isRoot ? sendbuff : sentinel(), recvbuff, function));
  NCCL_TRY(checkScaledCount(comm, datatype, count, function));
  return runExchange(comm,
                     mscclpp_nccl::planScatter(comm->rank, sendbuff, recvbuff, count, native(datatype), root),
                     stream, function, launchEvent);
}

}  // namespace

NCCL_CALL_API(ncclResult_t, ncclAllGather,
              (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
               ncclComm_t comm, cudaStream_t stream),
              sendbuff, recvbuff, sendcount, datatype, comm, stream) {
  return allGather(sendbuff, recvbuff, sendcount, datatype, comm, stream, "ncclAllGather");
}

NCCL_CALL_API(ncclResult_t, ncclAllGatherConfig,
              (const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config),
              sendbuff, recvbuff, sendcount, datatype, comm, stream, config) {
  cudaEvent_t launchEvent = nullptr;
  NCCL_TRY(checkCollConfig(config, "ncclAllGatherConfig", &launchEvent));
  return allGather(sendbuff, recvbuff, sendcount, datatype, comm, stream, "ncclAllGatherConfig", launchEvent);
}

NCCL_CALL_API(ncclResult_t, ncclReduceScatter,
              (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream),
              sendbuff, recvbuff, recvcount, datatype, op, comm, stream) {
  return reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, "ncclReduceScatter");
}

NCCL_CALL_API(ncclResult_t, ncclReduceScatterConfig,
              (const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
               ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config),
              sendbuff, recvbuff, recvcount, datatype, op, comm, stream, config) {
  cudaEvent_t launchEvent = nullptr;
  NCCL_TRY(checkCollConfig(config, "ncclReduceScatterConfig", &launchEvent));
  return reduceScatter(sendbuff, recvbuff, recvcount, datatype, op, comm, stream, "ncclReduceScatterConfig",
                       launchEvent);
}

NCCL_CALL_API(ncclResult_t, ncclAlltoAll,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
               cudaStream_t stream),
              sendbuff, recvbuff, count, datatype, comm, stream) {
  return alltoAll(sendbuff, recvbuff, count, datatype, comm, stream, "ncclAlltoAll");
}

NCCL_CALL_API(ncclResult_t, ncclAlltoAllConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclComm_t comm,
               cudaStream_t stream, const ncclCollConfig_t* config),
              sendbuff, recvbuff, count, datatype, comm, stream, config) {
  cudaEvent_t launchEvent = nullptr;
  NCCL_TRY(checkCollConfig(config, "ncclAlltoAllConfig", &launchEvent));
  return alltoAll(sendbuff, recvbuff, count, datatype, comm, stream, "ncclAlltoAllConfig", launchEvent);
}

NCCL_CALL_API(ncclResult_t, ncclBroadcast,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream),
              sendbuff, recvbuff, count, datatype, root, comm, stream) {
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclBroadcast");
}

NCCL_CALL_API(ncclResult_t, ncclBroadcastConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config),
              sendbuff, recvbuff, count, datatype, root, comm, stream, config) {
  cudaEvent_t launchEvent = nullptr;
  NCCL_TRY(checkCollConfig(config, "ncclBroadcastConfig", &launchEvent));
  return broadcast(sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclBroadcastConfig",
                   launchEvent);
}

NCCL_CALL_API(ncclResult_t, ncclBcast,
              (void* buff, size_t count, ncclDataType_t datatype, int root, ncclComm_t comm,
               cudaStream_t stream),
              buff, count, datatype, root, comm, stream) {
  return broadcast(buff, buff, count, datatype, root, comm, stream, "ncclBcast");
}

NCCL_CALL_API(ncclResult_t, ncclReduce,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
               int root, ncclComm_t comm, cudaStream_t stream),
              sendbuff, recvbuff, count, datatype, op, root, comm, stream) {
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream, "ncclReduce");
}

NCCL_CALL_API(ncclResult_t, ncclReduceConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
               int root, ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config),
              sendbuff, recvbuff, count, datatype, op, root, comm, stream, config) {
  cudaEvent_t launchEvent = nullptr;
  NCCL_TRY(checkCollConfig(config, "ncclReduceConfig", &launchEvent));
  return reduce(sendbuff, recvbuff, count, datatype, op, root, comm, stream, "ncclReduceConfig", launchEvent);
}

NCCL_CALL_API(ncclResult_t, ncclGather,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream),
              sendbuff, recvbuff, count, datatype, root, comm, stream) {
  return gather(sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclGather");
}

NCCL_CALL_API(ncclResult_t, ncclGatherConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config),
              sendbuff, recvbuff, count, datatype, root, comm, stream, config) {
  cudaEvent_t launchEvent = nullptr;
  NCCL_TRY(checkCollConfig(config, "ncclGatherConfig", &launchEvent));
  return gather(sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclGatherConfig", launchEvent);
}

NCCL_CALL_API(ncclResult_t, ncclScatter,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream),
              sendbuff, recvbuff, count, datatype, root, comm, stream) {
  return scatter(sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclScatter");
}

NCCL_CALL_API(ncclResult_t, ncclScatterConfig,
              (const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
               ncclComm_t comm, cudaStream_t stream, const ncclCollConfig_t* config),
              sendbuff, recvbuff, count, datatype, root, comm, stream, config) {
  cudaEvent_t launchEvent = nullptr;
  NCCL_TRY(checkCollConfig(config, "ncclScatterConfig", &launchEvent));
  return scatter(sendbuff, recvbuff, count, datatype, root, comm, stream, "ncclScatterConfig", launchEvent);
}
