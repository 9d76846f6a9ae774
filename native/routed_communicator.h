// The part of a communicator that does not run on our transport alone (native/fallback/DESIGN.md): over
// several hosts, an intra-host communicator of ours per host, a stock NCCL "rail" per local rank index and a
// stock communicator over every rank; or, all-stock, the last alone. Communicator (native/communicator.h)
// owns one when the path chosen at init (native/fallback/hierarchy.h) is not the native one, and
// forwards its collectives here. Design and open points: native/fallback/DESIGN-wiring.md.
#pragma once

#include <cuda_runtime.h>

#include <memory>
#include <vector>

#include "native/algorithms/allreduce.h"
#include "native/algorithms/exchange.h"
#include "native/algorithms/p2p.h"
#include "native/bootstrap/bootstrap.h"
#include "native/collective_comm.h"
#include "native/common/status.h"
#include "native/fallback/hierarchy.h"
#include "native/fallback/stock_comm.h"
#include "native/transport/rank_info.h"

namespace mscclpp_nccl {

class RoutedComm {
 public:
  // Collective over every rank of `bootstrap`. `intra` is this rank's intra-host communicator for
  // kHierarchical (already created by the caller), null for kAllStock. `maxCtas`: the caller's
  // ncclConfig_t maxCTAs (0: unset), which stock's communicators keep too.
  static Status create(Bootstrap& bootstrap, const Topology& topology, const HostLayout& layout,
                       CommPath path, std::unique_ptr<CollectiveComm> intra, int maxCtas,
                       std::unique_ptr<RoutedComm>* out);
  ~RoutedComm();
  RoutedComm(const RoutedComm&) = delete;
  RoutedComm& operator=(const RoutedComm&) = delete;

  CommPath path() const { return path_; }
  const HostLayout& layout() const { return layout_; }
  size_t deviceBytes() const;

  // As Communicator's; each enqueues on `stream` only.
  Status allReduce(const AllReduceArgs& args, cudaStream_t stream);
  Status exchange(const ExchangeArgs& args, cudaStream_t stream);
  Status sendRecv(const std::vector<P2pOp>& ops, cudaStream_t stream);

  // The intra-host communicator's, then the stock communicators' asynchronous errors.
  Status asyncError() const;
  // Makes the intra-host kernels give up (no CUDA call: safe on the bootstrap's receiver thread).
  void stopKernels();
  // Aborts the intra-host communicator and the stock ones.
  void abort();

 private:
  RoutedComm() = default;
  // Runs `steps` of a plan over `base` (the plan's whole buffer) on `stream`. The reducing intra-host
  // steps read their ranges from `source` (laid out as `base`; the same pointer to work in place).
  Status runPlan(const std::vector<PlanStep>& steps, const char* source, char* base, DataType type,
                 const ReduceOp& op, cudaStream_t stream);
  Status runIntra(const PlanStep& step, size_t k, const char* source, char* base, DataType type,
                  const ReduceOp& op, cudaStream_t stream);
  Status runRail(const PlanStep& step, size_t k, char* base, DataType type, const ReduceOp& op,
                 cudaStream_t stream);
  // all_gather or reduce_scatter through the plan; `op` is the intra-host steps' reduction.
  Status blocksHierarchically(const ExchangeArgs& args, const ReduceOp& op, cudaStream_t stream);
  Status exchangeOnWorld(const ExchangeArgs& args, cudaStream_t stream);
  // Device scratch of at least `bytes`; outgrown buffers are kept (captured graphs may use them).
  Status scratch(size_t bytes, cudaStream_t stream, char** out);

  CommPath path_ = CommPath::kAllStock;
  int rank_ = 0;
  HostLayout layout_;
  bool contiguous_ = true;                 // every host's ranks are numbered consecutively
  std::unique_ptr<CollectiveComm> intra_;  // hierarchical: this host's communicator of ours
  std::unique_ptr<StockComm> rail_;
  std::unique_ptr<StockComm> world_;
  std::vector<char*> scratch_;  // the last is the current one
  size_t scratchBytes_ = 0;
};

}  // namespace mscclpp_nccl
