#include "native/fallback/stock_comm.h"

#include <algorithm>
#include <chrono>

#include "native/common/logging.h"
#include "native/fallback/init_variable.h"
#include "native/transport/cuda_check.h"

namespace mscclpp_nccl {

Status StockComm::create(const StockNccl& stock, Bootstrap& bootstrap, const std::vector<int>& members,
                         int tag, const StockCommOptions& options, std::unique_ptr<StockComm>* out) {
  const auto me = std::find(members.begin(), members.end(), bootstrap.rank());
  if (me == members.end())
    return fail(Status::kInternalError, "rank %d is not a member of the stock communicator",
                bootstrap.rank());
  std::unique_ptr<StockComm> comm(new StockComm());
  comm->stock_ = &stock;
  comm->rank_ = static_cast<int>(me - members.begin());
  comm->size_ = static_cast<int>(members.size());
  MSCCLPP_CUDA_TRY(cudaGetDevice(&comm->device_));
  ncclUniqueId id;
  if (comm->rank_ == 0) {
    MSCCLPP_TRY(comm->check(stock.api.ncclGetUniqueId(&id), "stock ncclGetUniqueId"));
    for (size_t i = 1; i < members.size(); ++i) MSCCLPP_TRY(bootstrap.send(members[i], tag, &id, sizeof(id)));
  } else {
    MSCCLPP_TRY(bootstrap.recv(members[0], tag, &id, sizeof(id)));
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 1;  // a non-blocking init of ours already runs on the shim's worker thread
  if (options.maxCtas > 0) {
    config.minCTAs = 1;
    config.maxCTAs = options.maxCtas;
  }
  {
    // Stock needs this when ranks share a GPU (native/fallback/init_variable.h).
    InitVariable multiRankGpu("NCCL_MULTI_RANK_GPU_ENABLE", "1", options.sharedGpu);
    InitVariable hostId("NCCL_HOSTID", options.hostIdentity.c_str(), !options.hostIdentity.empty());
    MSCCLPP_TRY(
        comm->check(stock.api.ncclCommInitRankConfig(&comm->comm_, comm->size_, id, comm->rank_, &config),
                    "stock ncclCommInitRankConfig"));
  }
  *out = std::move(comm);
  return Status::kSuccess;
}

StockComm::~StockComm() {
  if (comm_ == nullptr || aborted_) return;
  const ncclResult_t result = stock_->api.ncclCommDestroy(comm_);
  if (result != ncclSuccess) logWarn("stock ncclCommDestroy: %s", stock_->api.ncclGetErrorString(result));
}

Status StockComm::check(ncclResult_t result, const char* what) const {
  if (result == ncclSuccess) return Status::kSuccess;
  const char* detail = stock_->api.ncclGetLastError(comm_);
  return fail(static_cast<Status>(result), "%s: %s%s%s", what, stock_->api.ncclGetErrorString(result),
              detail && *detail ? ": " : "", detail ? detail : "");
}

Status StockComm::asyncError() const {
  if (comm_ == nullptr || aborted_) return Status::kSuccess;
  ncclResult_t async = ncclSuccess;
  MSCCLPP_TRY(check(stock_->api.ncclCommGetAsyncError(comm_, &async), "stock ncclCommGetAsyncError"));
  if (async == ncclInProgress) return Status::kSuccess;
  return check(async, "stock communicator");
}

void StockComm::abort() {
  if (comm_ == nullptr || aborted_) return;
  aborted_ = true;         // ncclCommAbort frees the communicator
  cudaSetDevice(device_);  // the caller may be a thread of its own (RoutedComm::abort)
  const auto start = std::chrono::steady_clock::now();
  const ncclResult_t result = stock_->api.ncclCommAbort(comm_);
  if (result != ncclSuccess) logWarn("stock ncclCommAbort: %s", stock_->api.ncclGetErrorString(result));
  const std::chrono::duration<double, std::milli> took = std::chrono::steady_clock::now() - start;
  MSCCLPP_INFO(kInit, "stock communicator of %d ranks (rank %d): ncclCommAbort took %.0f ms", size_, rank_,
               took.count());
}

ncclDataType_t stockType(DataType type) { return static_cast<ncclDataType_t>(type); }  // same values

Status StockRedOp::create(const StockComm& comm, const ReduceOp& op, DataType type,
                          std::unique_ptr<StockRedOp>* out) {
  std::unique_ptr<StockRedOp> made(new StockRedOp());
  made->comm_ = &comm;
  const ReduceScaling& scaling = op.scaling;
  if (scaling.preMultiply) {
    if (!comm.api().ncclRedOpCreatePreMulSum || !comm.api().ncclRedOpDestroy)
      return fail(Status::kInvalidUsage, "the stock NCCL loaded has no ncclRedOpCreatePreMulSum");
    // Stock reads a host scalar once, at creation; a device one when its kernel runs, as ours does.
    uint64_t bits = scaling.hostScalarBits;
    void* scalar = scaling.scalarOnDevice ? const_cast<void*>(scaling.deviceScalar) : &bits;
    MSCCLPP_TRY(
        comm.check(comm.api().ncclRedOpCreatePreMulSum(
                       &made->op_, scalar, stockType(type),
                       scaling.scalarOnDevice ? ncclScalarDevice : ncclScalarHostImmediate, comm.handle()),
                   "stock ncclRedOpCreatePreMulSum"));
    made->created_ = true;
  } else if (scaling.postDivisor > 1) {
    if (op.op != BinaryOp::kSum || scaling.postDivisor != comm.size())
      return fail(Status::kInternalError, "an average over %d ranks on a stock communicator of %d",
                  scaling.postDivisor, comm.size());
    made->op_ = ncclAvg;
  } else {
    made->op_ = static_cast<ncclRedOp_t>(op.op);  // kSum..kMin equal ncclSum..ncclMin
  }
  *out = std::move(made);
  return Status::kSuccess;
}

StockRedOp::~StockRedOp() {
  if (created_) comm_->api().ncclRedOpDestroy(op_, comm_->handle());
}

}  // namespace mscclpp_nccl
