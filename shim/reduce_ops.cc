#include "shim/reduce_ops.h"

#include <cstring>

#include "shim/arg_checks.h"

using mscclpp_nccl::BinaryOp;
using mscclpp_nccl::DataType;
using mscclpp_nccl::fail;
using mscclpp_nccl::ReduceOp;
using mscclpp_nccl::Status;

ncclResult_t resolveReduceOp(ncclComm* comm, ncclRedOp_t op, ncclDataType_t type, const char* function,
                             ReduceOp* out) {
  *out = ReduceOp{BinaryOp::kSum, {}};
  out->scaling.postDivisor = 1;
  switch (op) {
    case ncclSum:
      return ncclSuccess;
    case ncclProd:
      out->op = BinaryOp::kProd;
      return ncclSuccess;
    case ncclMax:
      out->op = BinaryOp::kMax;
      return ncclSuccess;
    case ncclMin:
      out->op = BinaryOp::kMin;
      return ncclSuccess;
    case ncclAvg:
      out->scaling.postDivisor = comm->nranks;
      return ncclSuccess;
    default:
      break;
  }
  std::lock_guard<std::mutex> lock(comm->opsMutex);
  size_t index = static_cast<size_t>(op) - ncclNumOps;
  if (op < ncclNumOps || index >= comm->preMulSumOps.size() || !comm->preMulSumOps[index].live)
    return toNccl(
        fail(Status::kInvalidArgument, "%s: unknown reduction op %d", function, static_cast<int>(op)));
  const PreMulSumOp& custom = comm->preMulSumOps[index];
  if (custom.type != type)
    return toNccl(fail(Status::kInvalidArgument, "%s: PreMulSum op %d was created for type %d, not %d",
                       function, static_cast<int>(op), static_cast<int>(custom.type),
                       static_cast<int>(type)));
  out->scaling = custom.scaling;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpCreatePreMulSum,
         (ncclRedOp_t * op, void* scalar, ncclDataType_t datatype, ncclScalarResidence_t residence,
          ncclComm_t comm),
         op, scalar, datatype, residence, comm) {
  NCCL_TRY(checkReadyComm(comm, "ncclRedOpCreatePreMulSum"));
  if (op == nullptr || scalar == nullptr)
    return toNccl(fail(Status::kInvalidArgument, "ncclRedOpCreatePreMulSum: op or scalar is NULL"));
  if (datatype < 0 || datatype >= ncclNumTypes)
    return toNccl(fail(Status::kInvalidArgument, "ncclRedOpCreatePreMulSum: unknown datatype %d", datatype));
  if (residence != ncclScalarDevice && residence != ncclScalarHostImmediate)
    return toNccl(
        fail(Status::kInvalidArgument, "ncclRedOpCreatePreMulSum: unknown residence %d", residence));
  PreMulSumOp created;
  created.live = true;
  created.type = datatype;
  created.scaling.preMultiply = true;
  created.scaling.postDivisor = 1;
  created.scaling.scalarOnDevice = residence == ncclScalarDevice;
  if (created.scaling.scalarOnDevice) {
    created.scaling.deviceScalar = scalar;
  } else {
    memcpy(&created.scaling.hostScalarBits, scalar,
           mscclpp_nccl::dataTypeSize(static_cast<DataType>(datatype)));
  }
  std::lock_guard<std::mutex> lock(comm->opsMutex);
  size_t index = 0;
  while (index < comm->preMulSumOps.size() && comm->preMulSumOps[index].live) ++index;
  if (index == comm->preMulSumOps.size()) comm->preMulSumOps.emplace_back();
  comm->preMulSumOps[index] = created;
  *op = static_cast<ncclRedOp_t>(ncclNumOps + index);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclRedOpDestroy, (ncclRedOp_t op, ncclComm_t comm), op, comm) {
  NCCL_TRY(checkKnownComm(comm, "ncclRedOpDestroy"));
  std::lock_guard<std::mutex> lock(comm->opsMutex);
  size_t index = static_cast<size_t>(op) - ncclNumOps;
  if (op < ncclNumOps || index >= comm->preMulSumOps.size() || !comm->preMulSumOps[index].live)
    return toNccl(fail(Status::kInvalidArgument, "ncclRedOpDestroy: %d is not a PreMulSum op of this comm",
                       static_cast<int>(op)));
  comm->preMulSumOps[index].live = false;
  return ncclSuccess;
}
