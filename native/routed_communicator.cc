#include "native/routed_communicator.h"

#include <algorithm>
#include <utility>

#include "native/collective_plans.h"
#include "native/common/logging.h"
#include "native/communicator.h"
#include "native/transport/cuda_check.h"

namespace mscclpp_nccl {
namespace {

// Bootstrap tags of the stock unique ids (communicator.cc's kShareIdTag is 0x5eed).
constexpr int kRailIdTag = 0x5eee;
constexpr int kWorldIdTag = 0x5eef;
// Slices of the hierarchical all_reduce are whole multiples of this (every type's size divides it).
constexpr size_t kPlanGrainBytes = 16;

bool scaled(const ReduceOp& op) { return op.scaling.preMultiply || op.scaling.postDivisor > 1; }

ReduceOp plainOp(const ReduceOp& op) {
  ReduceOp plain = op;
  plain.scaling = ReduceScaling{};
  plain.scaling.postDivisor = 1;
  return plain;
}

// Options of every stock communicator of a job: the same on every rank (from the exchanged table).
StockCommOptions stockOptions(const Topology& topology) {
  StockCommOptions options;
  int residentBlocks = 0;
  for (size_t r = 0; r < topology.ranks.size(); ++r) {
    const int sharing = topology.ranksOnGpuOf(static_cast<int>(r));
    if (sharing > 1) options.sharedGpu = true;
    const int blocks = std::max(1, topology.ranks[r].smCount / sharing);
    residentBlocks = r == 0 ? blocks : std::min(residentBlocks, blocks);
  }
  // Ranks sharing a GPU need every waiting kernel resident at once: ours and stock's take turns on one
  // stream per rank, so half of each rank's share is left to stock.
  // TODO(issue 12): measure the cap on the H200 at 4 and 8 ranks a GPU (4+ hang uncapped).
  if (options.sharedGpu) options.maxCtas = std::max(1, residentBlocks / 2);
  return options;
}

}  // namespace

Status RoutedComm::create(Bootstrap& bootstrap, const Topology& topology, const HostLayout& layout,
                          CommPath path, std::unique_ptr<Communicator> intra,
                          std::unique_ptr<RoutedComm>* out) {
  if (path != CommPath::kHierarchical && path != CommPath::kAllStock)
    return fail(Status::kInternalError, "no routed communicator for the %s path", commPathName(path));
  if ((path == CommPath::kHierarchical) != (intra != nullptr))
    return fail(Status::kInternalError,
                "the hierarchical path needs an intra-host communicator, all-stock none");
  const StockNccl* stock = nullptr;
  MSCCLPP_TRY(stockNccl(&stock));
  std::unique_ptr<RoutedComm> comm(new RoutedComm());
  comm->path_ = path;
  comm->rank_ = bootstrap.rank();
  comm->layout_ = layout;
  comm->intra_ = std::move(intra);
  const StockCommOptions options = stockOptions(topology);
  // The same order on every rank: the rails (each rank is in exactly one), then the world.
  if (path == CommPath::kHierarchical)
    MSCCLPP_TRY(StockComm::create(*stock, bootstrap, layout.railMembers(comm->rank_), kRailIdTag, options,
                                  &comm->rail_));
  std::vector<int> everyone(bootstrap.size());
  for (int r = 0; r < bootstrap.size(); ++r) everyone[r] = r;
  MSCCLPP_TRY(StockComm::create(*stock, bootstrap, everyone, kWorldIdTag, options, &comm->world_));
  *out = std::move(comm);
  return Status::kSuccess;
}

RoutedComm::~RoutedComm() {
  rail_.reset();
  world_.reset();
  intra_.reset();
  if (scratch_) cudaFree(scratch_);
}

Status RoutedComm::scratch(size_t bytes, cudaStream_t stream, char** out) {
  if (bytes > scratchBytes_) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    MSCCLPP_CUDA_TRY(cudaStreamIsCapturing(stream, &capture));
    // TODO(issue 12): size the scratch at init (a variable) so that captures never need to grow it.
    if (capture != cudaStreamCaptureStatusNone)
      return fail(Status::kInvalidUsage,
                  "hierarchical reduce_scatter needs %zu bytes of scratch while capturing a CUDA graph; run "
                  "it once outside the capture first",
                  bytes);
    if (scratch_) MSCCLPP_CUDA_TRY(cudaFree(scratch_));  // waits for the work that used it
    scratch_ = nullptr;
    scratchBytes_ = 0;
    MSCCLPP_CUDA_TRY(cudaMalloc(&scratch_, bytes));
    scratchBytes_ = bytes;
  }
  *out = scratch_;
  return Status::kSuccess;
}

Status RoutedComm::allReduce(const AllReduceArgs& args, cudaStream_t stream) {
  if (args.count == 0) return Status::kSuccess;
  const size_t elem = dataTypeSize(args.type);
  if (path_ == CommPath::kAllStock) {
    ncclRedOp_t op;
    if (!stockOp(args.op, world_->size(), &op))
      return fail(Status::kInvalidUsage, "TODO(issue 12): PreMulSum on a stock communicator");
    return world_->check(world_->api().ncclAllReduce(args.send, args.recv, args.count, stockType(args.type),
                                                     op, world_->handle(), stream),
                         "stock ncclAllReduce");
  }
  // TODO(issue 12): Avg and PreMulSum: sum through the plan, scale in the last reducing step.
  if (scaled(args.op))
    return fail(Status::kInvalidUsage, "TODO(issue 12): Avg and PreMulSum on a hierarchical communicator");
  std::vector<PlanStep> steps;
  if (!hierarchicalPlan(layout_, rank_, PlanCollective::kAllReduce, args.count, elem, kPlanGrainBytes,
                        &steps))
    return fail(Status::kInternalError, "no hierarchical all_reduce plan for %zu elements", args.count);
  if (args.recv != args.send)
    MSCCLPP_CUDA_TRY(
        cudaMemcpyAsync(args.recv, args.send, args.count * elem, cudaMemcpyDeviceToDevice, stream));
  return runPlan(steps, static_cast<char*>(args.recv), args.type, args.op, stream);
}

Status RoutedComm::exchange(Collective collective, const ExchangeArgs& args, cudaStream_t stream) {
  if (args.rangeBytes == 0) return Status::kSuccess;
  if (path_ == CommPath::kHierarchical && collective == Collective::kAllGather)
    return blocksHierarchically(PlanCollective::kAllGather, args, stream);
  if (path_ == CommPath::kHierarchical && collective == Collective::kReduceScatter)
    return blocksHierarchically(PlanCollective::kReduceScatter, args, stream);
  return exchangeOnWorld(collective, args, stream);
}

Status RoutedComm::blocksHierarchically(PlanCollective collective, const ExchangeArgs& args,
                                        cudaStream_t stream) {
  const bool gather = collective == PlanCollective::kAllGather;
  if (!gather && scaled(args.op))
    return fail(Status::kInvalidUsage, "TODO(issue 12): Avg and PreMulSum on a hierarchical communicator");
  const size_t elem = dataTypeSize(args.type), block = args.rangeBytes;
  std::vector<PlanStep> steps;
  if (!hierarchicalPlan(layout_, rank_, collective, block / elem, elem, 0, &steps))
    return fail(Status::kInternalError, "no hierarchical plan for %zu-byte blocks", block);
  const size_t whole = block * layout_.nranks;
  if (gather) {
    // In place in the receive buffer: this rank's block first.
    char* recv = static_cast<char*>(args.dst);
    char* mine = recv + rank_ * block;
    if (args.src != mine)
      MSCCLPP_CUDA_TRY(cudaMemcpyAsync(mine, args.src, block, cudaMemcpyDeviceToDevice, stream));
    return runPlan(steps, recv, args.type, args.op, stream);
  }
  // The user's send buffer is read-only: the plan runs over a copy.
  char* work = nullptr;
  MSCCLPP_TRY(scratch(whole, stream, &work));
  MSCCLPP_CUDA_TRY(cudaMemcpyAsync(work, args.src, whole, cudaMemcpyDeviceToDevice, stream));
  MSCCLPP_TRY(runPlan(steps, work, args.type, args.op, stream));
  MSCCLPP_CUDA_TRY(cudaMemcpyAsync(args.dst, work + rank_ * block, block, cudaMemcpyDeviceToDevice, stream));
  return Status::kSuccess;
}

Status RoutedComm::runPlan(const std::vector<PlanStep>& steps, char* base, DataType type, const ReduceOp& op,
                           cudaStream_t stream) {
  for (const PlanStep& step : steps) {
    const size_t calls = step.members.empty() ? 0 : step.members[0].size();
    for (const auto& ranges : step.members)
      if (ranges.size() != calls) return fail(Status::kInternalError, "plan step with uneven members");
    for (size_t k = 0; k < calls; ++k)
      MSCCLPP_TRY(step.comm == PlanComm::kIntra ? runIntra(step, k, base, type, op, stream)
                                                : runRail(step, k, base, type, op, stream));
  }
  return Status::kSuccess;
}

namespace {

// The k-th range of every member of `step`: whether they are of one size, and back to back in member
// order (then a collective of ours, or stock's, serves them as they are).
struct StepRanges {
  size_t bytes = 0;
  bool sameSize = true;
  bool contiguous = true;
};

StepRanges inspect(const PlanStep& step, size_t k) {
  StepRanges out;
  const ByteRange& first = step.members[0][k];
  out.bytes = first.bytes;
  for (size_t i = 0; i < step.members.size(); ++i) {
    const ByteRange& range = step.members[i][k];
    out.sameSize = out.sameSize && range.bytes == first.bytes;
    out.contiguous = out.contiguous && range.offset == first.offset + i * first.bytes;
  }
  return out;
}

}  // namespace

Status RoutedComm::runIntra(const PlanStep& step, size_t k, char* base, DataType type, const ReduceOp& op,
                            cudaStream_t stream) {
  const StepRanges ranges = inspect(step, k);
  const int me = intra_->rank();
  const size_t count = ranges.bytes / dataTypeSize(type);
  char* first = base + step.members[0][k].offset;
  char* mine = base + step.members[me][k].offset;
  if (step.op == PlanOp::kAllReduce)
    return intra_->allReduce(AllReduceArgs{mine, mine, count, type, plainOp(op)}, stream);
  // TODO(issue 12): interleaved hosts (ranks of a host not adjacent) give ranges that are not back to
  // back; run them as one call per member (exchange with per-peer offsets) instead of refusing.
  if (!ranges.sameSize || !ranges.contiguous)
    return fail(Status::kInvalidUsage,
                "TODO(issue 12): hierarchical all_gather/reduce_scatter with interleaved hosts (ranks of a "
                "host not numbered consecutively)");
  if (step.op == PlanOp::kReduceScatter)
    return intra_->exchange(Collective::kReduceScatter,
                            planReduceScatter(first, mine, count, type, plainOp(op)), stream);
  return intra_->exchange(Collective::kAllGather, planAllGather(mine, first, count, type), stream);
}

Status RoutedComm::runRail(const PlanStep& step, size_t k, char* base, DataType type, const ReduceOp& op,
                           cudaStream_t stream) {
  const StepRanges ranges = inspect(step, k);
  if (!ranges.sameSize) return fail(Status::kInternalError, "rail step with unequal ranges");
  const StockNcclApi& api = rail_->api();
  ncclComm_t comm = rail_->handle();
  const ncclDataType_t stockT = stockType(type);
  ncclRedOp_t stockR = ncclSum;
  if (!stockOp(plainOp(op), rail_->size(), &stockR))
    return fail(Status::kInternalError, "reduction without a stock equivalent");
  const size_t count = ranges.bytes / dataTypeSize(type);
  char* first = base + step.members[0][k].offset;
  char* mine = base + step.members[rail_->rank()][k].offset;
  switch (step.op) {
    case PlanOp::kAllReduce:
      return rail_->check(api.ncclAllReduce(mine, mine, count, stockT, stockR, comm, stream),
                          "stock ncclAllReduce");
    case PlanOp::kAllGather:
      if (ranges.contiguous)
        return rail_->check(api.ncclAllGather(mine, first, count, stockT, comm, stream),
                            "stock ncclAllGather");
      break;
    case PlanOp::kReduceScatter:
      if (ranges.contiguous)
        return rail_->check(api.ncclReduceScatter(first, mine, count, stockT, stockR, comm, stream),
                            "stock ncclReduceScatter");
      break;
  }
  // Ranges apart (the usual case: a rail's blocks lie one host apart): one in-place broadcast (gather)
  // or reduce (scatter) per member, rooted at that member, in one stock group.
  MSCCLPP_TRY(rail_->check(api.ncclGroupStart(), "stock ncclGroupStart"));
  Status status = Status::kSuccess;
  for (int i = 0; i < rail_->size() && ok(status); ++i) {
    char* at = base + step.members[i][k].offset;
    status =
        step.op == PlanOp::kAllGather
            ? rail_->check(api.ncclBroadcast(at, at, count, stockT, i, comm, stream), "stock ncclBroadcast")
            : rail_->check(api.ncclReduce(at, at, count, stockT, stockR, i, comm, stream),
                           "stock ncclReduce");
  }
  const Status ended = rail_->check(api.ncclGroupEnd(), "stock ncclGroupEnd");
  return ok(status) ? ended : status;
}

Status RoutedComm::exchangeOnWorld(Collective collective, const ExchangeArgs& args, cudaStream_t stream) {
  const StockNcclApi& api = world_->api();
  ncclComm_t comm = world_->handle();
  const ncclDataType_t type = stockType(args.type);
  const size_t count = args.rangeBytes / dataTypeSize(args.type);
  ncclRedOp_t op = ncclSum;
  if (args.reduce && !stockOp(args.op, world_->size(), &op))
    return fail(Status::kInvalidUsage, "TODO(issue 12): PreMulSum on a stock communicator");
  auto optional = [](const char* name) {
    return fail(Status::kInvalidUsage, "TODO(issue 12): the stock NCCL loaded has no %s (older than 2.28?)",
                name);
  };
  switch (collective) {
    case Collective::kAllGather:
      return world_->check(api.ncclAllGather(args.src, args.dst, count, type, comm, stream),
                           "stock ncclAllGather");
    case Collective::kReduceScatter:
      return world_->check(api.ncclReduceScatter(args.src, args.dst, count, type, op, comm, stream),
                           "stock ncclReduceScatter");
    case Collective::kAlltoAll:
      if (!api.ncclAlltoAll) return optional("ncclAlltoAll");
      return world_->check(api.ncclAlltoAll(args.src, args.dst, count, type, comm, stream),
                           "stock ncclAlltoAll");
    case Collective::kBroadcast:
      return world_->check(api.ncclBroadcast(args.src, args.dst, count, type, args.root, comm, stream),
                           "stock ncclBroadcast");
    case Collective::kReduce:
      return world_->check(api.ncclReduce(args.src, args.dst, count, type, op, args.root, comm, stream),
                           "stock ncclReduce");
    case Collective::kGather:
      if (!api.ncclGather) return optional("ncclGather");
      return world_->check(api.ncclGather(args.src, args.dst, count, type, args.root, comm, stream),
                           "stock ncclGather");
    case Collective::kScatter:
      if (!api.ncclScatter) return optional("ncclScatter");
      return world_->check(api.ncclScatter(args.src, args.dst, count, type, args.root, comm, stream),
                           "stock ncclScatter");
    default:
      break;
  }
  return fail(Status::kInternalError, "collective %d has no stock route", static_cast<int>(collective));
}

Status RoutedComm::sendRecv(const std::vector<P2pOp>& ops, cudaStream_t stream) {
  // TODO(issue 12): peers on this rank's host could go through `intra_` (ours); all go through stock now.
  const StockNcclApi& api = world_->api();
  MSCCLPP_TRY(world_->check(api.ncclGroupStart(), "stock ncclGroupStart"));
  Status status = Status::kSuccess;
  for (const P2pOp& op : ops) {
    if (!ok(status)) break;
    status =
        op.isSend
            ? world_->check(api.ncclSend(op.buffer, op.bytes, ncclUint8, op.peer, world_->handle(), stream),
                            "stock ncclSend")
            : world_->check(api.ncclRecv(op.buffer, op.bytes, ncclUint8, op.peer, world_->handle(), stream),
                            "stock ncclRecv");
  }
  const Status ended = world_->check(api.ncclGroupEnd(), "stock ncclGroupEnd");
  return ok(status) ? ended : status;
}

Status RoutedComm::asyncError() const {
  if (intra_) MSCCLPP_TRY(intra_->asyncError());
  if (rail_) MSCCLPP_TRY(rail_->asyncError());
  return world_ ? world_->asyncError() : Status::kSuccess;
}

void RoutedComm::stopKernels() {
  if (intra_) intra_->stopKernels();
}

void RoutedComm::abort() {
  if (intra_) intra_->abort();
  if (rail_) rail_->abort();
  if (world_) world_->abort();
}

}  // namespace mscclpp_nccl
