// One communicator of the private stock NCCL (stock_nccl.h) over some ranks of one of ours: its unique
// id travels over our bootstrap, and it is destroyed (or aborted) with its owner. Used by the routed
// communicators (native/routed_communicator.h) for the rails and the all-rank communicator.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "native/bootstrap/bootstrap.h"
#include "native/common/data_type.h"
#include "native/common/status.h"
#include "native/fallback/stock_nccl.h"

namespace mscclpp_nccl {

struct StockCommOptions {
  int maxCtas = 0;         // >0: ncclConfig_t.maxCTAs (ranks sharing a GPU must stay co-resident)
  bool sharedGpu = false;  // ranks share a GPU: stock needs NCCL_MULTI_RANK_GPU_ENABLE=1
  // Non-empty: the host stock must see this rank on (NCCL_HOSTID), because MSCCLPP_NCCL_HOST_ID cut
  // this machine into hosts. Stock then links those hosts with its network transport, as it would
  // real ones, instead of its intra-host transports.
  std::string hostIdentity;
};

class StockComm {
 public:
  // Collective over `members` (ranks of `bootstrap`, in the new communicator's rank order), which must
  // hold bootstrap.rank(). members[0] draws stock's unique id and sends it to the others with `tag`
  // (distinct per communicator created over the same bootstrap).
  static Status create(const StockNccl& stock, Bootstrap& bootstrap, const std::vector<int>& members, int tag,
                       const StockCommOptions& options, std::unique_ptr<StockComm>* out);
  ~StockComm();  // ncclCommDestroy, or nothing more after abort()
  StockComm(const StockComm&) = delete;
  StockComm& operator=(const StockComm&) = delete;

  const StockNcclApi& api() const { return stock_->api; }
  ncclComm_t handle() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }

  // kSuccess, or stock's result as a Status with stock's last error text and `what`.
  Status check(ncclResult_t result, const char* what) const;
  // Stock's calls made by `issue(i)` for i in [0, count), inside one stock group; stops at the first
  // failure, and always ends the group.
  template <typename Issue>
  Status group(size_t count, Issue issue) const {
    MSCCLPP_TRY(check(stock_->api.ncclGroupStart(), "stock ncclGroupStart"));
    Status status = Status::kSuccess;
    for (size_t i = 0; i < count && ok(status); ++i) status = issue(i);
    const Status ended = check(stock_->api.ncclGroupEnd(), "stock ncclGroupEnd");
    return ok(status) ? ended : status;
  }
  // Stock's asynchronous error (ncclInProgress counts as none).
  Status asyncError() const;
  void abort();

 private:
  StockComm() = default;
  const StockNccl* stock_ = nullptr;
  ncclComm_t comm_ = nullptr;
  int rank_ = 0;
  int size_ = 0;
  int device_ = 0;  // the CUDA device it was created on
  bool aborted_ = false;
};

// A reduction of ours as a stock op on one stock communicator, for one call: PreMulSum is created on
// stock with the same scalar and destroyed once the call is enqueued (NCCL allows that).
class StockRedOp {
 public:
  // Fails for an Avg that is not a plain division by the communicator's size (it never is on a stock
  // communicator of ours: only the world one gets Avg), or PreMulSum on a stock without it.
  static Status create(const StockComm& comm, const ReduceOp& op, DataType type,
                       std::unique_ptr<StockRedOp>* out);
  ~StockRedOp();
  StockRedOp(const StockRedOp&) = delete;
  StockRedOp& operator=(const StockRedOp&) = delete;
  ncclRedOp_t get() const { return op_; }

 private:
  StockRedOp() = default;
  const StockComm* comm_ = nullptr;
  ncclRedOp_t op_ = ncclSum;
  bool created_ = false;
};

// Stock's value for our type (the same numbers).
ncclDataType_t stockType(DataType type);

}  // namespace mscclpp_nccl
