#include "native/routed_communicator.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <utility>

#include "native/algorithms/registry.h"
#include "native/collective_plans.h"
#include "native/common/logging.h"
#include "native/common/parameters.h"
#include "native/common/threads.h"
#include "native/transport/cuda_check.h"
#include "native/transport/host_identity.h"

namespace mscclpp_nccl {
namespace {

// Bootstrap tags of the stock unique ids (communicator.cc's kShareIdTag is 0x5eed).
constexpr int kRailIdTag = 0x5eee;
constexpr int kWorldIdTag = 0x5eef;
// Slices of the hierarchical all_reduce are whole multiples of this (every type's size divides it).
constexpr size_t kPlanGrainBytes = 16;

ReduceOp plainOp(const ReduceOp& op) {
  ReduceOp plain = op;
  plain.scaling = ReduceScaling{};
  plain.scaling.postDivisor = 1;
  return plain;
}

// The op of the intra-host reducing steps of a hierarchical plan, whose rail steps then sum plainly. In
// every reducing plan each input meets an intra-host step before any rail step, so PreMulSum
// premultiplies there, once. A floating-point Avg becomes PreMulSum by 1/nranks, which is what stock
// NCCL runs for it too. False for an integer or fp8 Avg (a division after the whole sum): the caller
// sends it through the world communicator.
bool intraStepOp(const ReduceOp& op, DataType type, int nranks, ReduceOp* out) {
  *out = op;
  if (op.scaling.postDivisor <= 1) return true;
  const double inverse = 1.0 / nranks;
  uint64_t bits = 0;
  switch (type) {
    case DataType::kFloat64:
      memcpy(&bits, &inverse, sizeof(inverse));
      break;
    case DataType::kFloat32: {
      const float value = static_cast<float>(inverse);
      memcpy(&bits, &value, sizeof(value));
      break;
    }
    case DataType::kFloat16: {
      const __half value = __double2half(inverse);
      memcpy(&bits, &value, sizeof(value));
      break;
    }
    case DataType::kBfloat16: {
      const __nv_bfloat16 value = __double2bfloat16(inverse);
      memcpy(&bits, &value, sizeof(value));
      break;
    }
    default:
      return false;
  }
  out->op = BinaryOp::kSum;
  out->scaling = ReduceScaling{};
  out->scaling.preMultiply = true;
  out->scaling.hostScalarBits = bits;
  out->scaling.postDivisor = 1;
  return true;
}

// Options of every stock communicator of a job: the same on every rank (from the exchanged table), but
// for the host identity, which is the rank's own, and the caller's `maxCtas` (stock agrees on its
// channels itself).
StockCommOptions stockOptions(const Topology& topology, int rank, int maxCtas) {
  StockCommOptions options;
  // Fake hosts (MSCCLPP_NCCL_HOST_ID) are hosts to stock too: otherwise stock would join them through
  // shared memory, and neither the all-stock path nor the rails would cross a network as on real hosts.
  options.hostIdentity = stockHostId(topology.ranks[rank].hostId, topology.ranks[rank].layoutHostId);
  int cap = 0;
  for (size_t r = 0; r < topology.ranks.size(); ++r) {
    const int sharing = topology.ranksOnGpuOf(static_cast<int>(r));
    if (sharing <= 1) continue;
    options.sharedGpu = true;
    // Ranks sharing a GPU need every waiting kernel resident at once, stock's beside ours: at most half
    // of each rank's share of the SMs, and at most 32 CTAs a GPU, as stock's own notes ask (4 or more
    // ranks a GPU hang uncapped).
    const int blocks = std::max(1, std::min(topology.ranks[r].smCount / sharing / 2, 32 / sharing));
    cap = cap == 0 ? blocks : std::min(cap, blocks);
  }
  if (maxCtas > 0) cap = cap == 0 ? maxCtas : std::min(cap, maxCtas);
  options.maxCtas = cap;
  return options;
}

// Every host's ranks numbered consecutively: then each step's ranges lie back to back in member order,
// as our exchange kernels and stock's all_gather and reduce_scatter need.
bool hostsContiguous(const HostLayout& layout) {
  for (const std::vector<int>& ranks : layout.hostRanks)
    for (size_t i = 1; i < ranks.size(); ++i)
      if (ranks[i] != ranks[i - 1] + 1) return false;
  return true;
}

// all_reduce, all_gather and reduce_scatter below this many bytes (the whole buffer) go through stock's
// flat algorithm on the world communicator: small messages are latency-bound, and the hierarchy adds
// our intra-host steps to a stock call that costs about as much as stock's own over all ranks. 128 KiB
// is where the hierarchy's all_reduce overtook stock's for good on fake hosts joined by stock's socket
// transport, at 2 hosts of 2 and of 4 on one H200 (perf/fake-hosts-2026-12-01.csv).
// That is MSCCLPP_NCCL_HIERARCHY_MIN_BYTES's default (native/common/parameters.cc).
size_t hierarchyMinBytes() {
  static const int64_t bytes = readInteger(Param::kHierarchyMinBytes);
  return static_cast<size_t>(bytes >= 0 ? bytes : parameter(Param::kHierarchyMinBytes).number);
}

}  // namespace

Status RoutedComm::create(Bootstrap& bootstrap, const Topology& topology, const HostLayout& layout,
                          CommPath path, std::unique_ptr<CollectiveComm> intra, int maxCtas,
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
  comm->contiguous_ = hostsContiguous(layout);
  comm->intra_ = std::move(intra);
  const StockCommOptions options = stockOptions(topology, comm->rank_, maxCtas);
  // The same order on every rank: the rails (each rank is in exactly one), then the world.
  if (path == CommPath::kHierarchical)
    MSCCLPP_TRY(StockComm::create(*stock, bootstrap, layout.railMembers(comm->rank_), kRailIdTag, options,
                                  &comm->rail_));
  std::vector<int> everyone(bootstrap.size());
  for (int r = 0; r < bootstrap.size(); ++r) everyone[r] = r;
  MSCCLPP_TRY(StockComm::create(*stock, bootstrap, everyone, kWorldIdTag, options, &comm->world_));
  MSCCLPP_INFO(kInit, "rank %d: %s communicator over %d hosts, stock NCCL %d from %s (%s), maxCTAs %d",
               comm->rank_, commPathName(path), layout.nhosts(), stock->versionCode, stock->path.c_str(),
               stock->where.c_str(), options.maxCtas);
  *out = std::move(comm);
  return Status::kSuccess;
}

RoutedComm::~RoutedComm() {
  rail_.reset();
  world_.reset();
  intra_.reset();
  for (char* buffer : scratch_) cudaFree(buffer);
}

Status RoutedComm::scratch(size_t bytes, cudaStream_t stream, char** out) {
  if (scratch_.empty() || bytes > scratchBytes_) {
    // A captured graph may already hold the smaller buffer: it lives until the communicator does.
    // Inside a capture the allocation is made in relaxed mode, which capture allows (cudaMalloc does not
    // touch the stream).
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    MSCCLPP_CUDA_TRY(cudaStreamIsCapturing(stream, &capture));
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    if (capture != cudaStreamCaptureStatusNone) MSCCLPP_CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
    char* buffer = nullptr;
    const cudaError_t allocated = cudaMalloc(&buffer, bytes);
    if (capture != cudaStreamCaptureStatusNone) MSCCLPP_CUDA_TRY(cudaThreadExchangeStreamCaptureMode(&mode));
    MSCCLPP_CUDA_TRY(allocated);
    scratch_.push_back(buffer);
    scratchBytes_ = bytes;
  }
  *out = scratch_.back();
  return Status::kSuccess;
}

size_t RoutedComm::deviceBytes() const { return (intra_ ? intra_->deviceBytes() : 0) + scratchBytes_; }

Status RoutedComm::allReduce(const AllReduceArgs& args, cudaStream_t stream) {
  if (args.count == 0) return Status::kSuccess;
  const size_t elem = dataTypeSize(args.type), bytes = args.count * elem;
  ReduceOp intraOp;
  if (path_ == CommPath::kAllStock || bytes < hierarchyMinBytes() ||
      !intraStepOp(args.op, args.type, layout_.nranks, &intraOp)) {
    MSCCLPP_INFO(kColl, "AllReduce %zu bytes: stock, all ranks", bytes);
    std::unique_ptr<StockRedOp> op;
    MSCCLPP_TRY(StockRedOp::create(*world_, args.op, args.type, &op));
    return world_->check(world_->api().ncclAllReduce(args.send, args.recv, args.count, stockType(args.type),
                                                     op->get(), world_->handle(), stream),
                         "stock ncclAllReduce");
  }
  std::vector<PlanStep> steps;
  if (!hierarchicalPlan(layout_, rank_, PlanCollective::kAllReduce, args.count, elem, kPlanGrainBytes,
                        &steps))
    return fail(Status::kInternalError, "no hierarchical all_reduce plan for %zu elements", args.count);
  MSCCLPP_INFO(kColl, "AllReduce %zu bytes: hierarchical, %zu steps", bytes, steps.size());
  // The intra-host steps read the send buffer and write the receive buffer, so no copy is needed.
  return runPlan(steps, static_cast<const char*>(args.send), static_cast<char*>(args.recv), args.type,
                 intraOp, stream);
}

Status RoutedComm::exchange(const ExchangeArgs& args, cudaStream_t stream) {
  if (args.rangeBytes == 0) return Status::kSuccess;
  // Hosts numbered apart give steps whose ranges are not back to back: those go to the world.
  const bool blocked =
      args.collective == Collective::kAllGather || args.collective == Collective::kReduceScatter;
  ReduceOp intraOp = args.op;
  if (path_ == CommPath::kHierarchical && blocked && contiguous_ &&
      args.rangeBytes * layout_.nranks >= hierarchyMinBytes() &&
      (!args.reduce || intraStepOp(args.op, args.type, layout_.nranks, &intraOp)))
    return blocksHierarchically(args, intraOp, stream);
  return exchangeOnWorld(args, stream);
}

Status RoutedComm::blocksHierarchically(const ExchangeArgs& args, const ReduceOp& op, cudaStream_t stream) {
  const bool gather = args.collective == Collective::kAllGather;
  const size_t elem = dataTypeSize(args.type), block = args.rangeBytes;
  std::vector<PlanStep> steps;
  if (!hierarchicalPlan(layout_, rank_, gather ? PlanCollective::kAllGather : PlanCollective::kReduceScatter,
                        block / elem, elem, 0, &steps))
    return fail(Status::kInternalError, "no hierarchical plan for %zu-byte blocks", block);
  MSCCLPP_INFO(kColl, "%s %zu bytes a rank: hierarchical, %zu steps", gather ? "AllGather" : "ReduceScatter",
               block, steps.size());
  const size_t whole = block * layout_.nranks;
  if (gather) {
    // In place in the receive buffer: this rank's block first.
    char* recv = static_cast<char*>(args.dst);
    char* mine = recv + rank_ * block;
    if (args.src != mine)
      MSCCLPP_CUDA_TRY(cudaMemcpyAsync(mine, args.src, block, cudaMemcpyDeviceToDevice, stream));
    return runPlan(steps, recv, recv, args.type, op, stream);
  }
  // The user's send buffer is read-only: the intra-host step reads it and writes scratch, where the
  // rails then work.
  char* work = nullptr;
  MSCCLPP_TRY(scratch(whole, stream, &work));
  MSCCLPP_TRY(runPlan(steps, static_cast<const char*>(args.src), work, args.type, op, stream));
  MSCCLPP_CUDA_TRY(cudaMemcpyAsync(args.dst, work + rank_ * block, block, cudaMemcpyDeviceToDevice, stream));
  return Status::kSuccess;
}

Status RoutedComm::runPlan(const std::vector<PlanStep>& steps, const char* source, char* base, DataType type,
                           const ReduceOp& op, cudaStream_t stream) {
  for (const PlanStep& step : steps) {
    const size_t calls = step.members.empty() ? 0 : step.members[0].size();
    for (const auto& ranges : step.members)
      if (ranges.size() != calls) return fail(Status::kInternalError, "plan step with uneven members");
    for (size_t k = 0; k < calls; ++k)
      MSCCLPP_TRY(step.comm == PlanComm::kIntra ? runIntra(step, k, source, base, type, op, stream)
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

Status RoutedComm::runIntra(const PlanStep& step, size_t k, const char* source, char* base, DataType type,
                            const ReduceOp& op, cudaStream_t stream) {
  const StepRanges ranges = inspect(step, k);
  const int me = intra_->rank();
  const size_t count = ranges.bytes / dataTypeSize(type);
  char* first = base + step.members[0][k].offset;
  char* mine = base + step.members[me][k].offset;
  // Reducing steps are the first to touch their ranges (every plan reduces inside the host first).
  if (step.op == PlanOp::kAllReduce)
    return intra_->allReduce(AllReduceArgs{source + step.members[me][k].offset, mine, count, type, op},
                             stream);
  if (!ranges.sameSize || !ranges.contiguous)  // exchange() sends interleaved hosts to the world
    return fail(Status::kInternalError, "intra-host step with ranges apart");
  if (step.op == PlanOp::kReduceScatter)
    return intra_->exchange(planReduceScatter(source + step.members[0][k].offset, mine, count, type, op),
                            stream);
  return intra_->exchange(planAllGather(mine, first, count, type), stream);
}

Status RoutedComm::runRail(const PlanStep& step, size_t k, char* base, DataType type, const ReduceOp& op,
                           cudaStream_t stream) {
  const StepRanges ranges = inspect(step, k);
  if (!ranges.sameSize) return fail(Status::kInternalError, "rail step with unequal ranges");
  const StockNcclApi& api = rail_->api();
  ncclComm_t comm = rail_->handle();
  const ncclDataType_t stockT = stockType(type);
  // The intra-host steps already applied any scaling: the rails reduce plainly.
  std::unique_ptr<StockRedOp> railOp;
  MSCCLPP_TRY(StockRedOp::create(*rail_, plainOp(op), type, &railOp));
  const ncclRedOp_t stockR = railOp->get();
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
  return rail_->group(step.members.size(), [&](size_t i) {
    char* at = base + step.members[i][k].offset;
    const int root = static_cast<int>(i);
    return step.op == PlanOp::kAllGather
               ? rail_->check(api.ncclBroadcast(at, at, count, stockT, root, comm, stream),
                              "stock ncclBroadcast")
               : rail_->check(api.ncclReduce(at, at, count, stockT, stockR, root, comm, stream),
                              "stock ncclReduce");
  });
}

Status RoutedComm::exchangeOnWorld(const ExchangeArgs& args, cudaStream_t stream) {
  const StockNcclApi& api = world_->api();
  ncclComm_t comm = world_->handle();
  const ncclDataType_t type = stockType(args.type);
  const size_t count = args.rangeBytes / dataTypeSize(args.type);
  std::unique_ptr<StockRedOp> stockOp;
  if (args.reduce) MSCCLPP_TRY(StockRedOp::create(*world_, args.op, args.type, &stockOp));
  const ncclRedOp_t op = stockOp ? stockOp->get() : ncclSum;
  MSCCLPP_INFO(kColl, "%s %zu bytes a rank: stock, all ranks", collectiveName(args.collective),
               args.rangeBytes);
  auto optional = [](const char* name) {
    return fail(Status::kInvalidUsage, "the stock NCCL loaded has no %s (it came in 2.28)", name);
  };
  switch (args.collective) {
    case Collective::kAllGather:
      return world_->check(api.ncclAllGather(args.src, args.dst, count, type, comm, stream),
                           "stock ncclAllGather");
    case Collective::kReduceScatter:
      return world_->check(api.ncclReduceScatter(args.src, args.dst, count, type, op, comm, stream),
                           "stock ncclReduceScatter");
    case Collective::kAlltoAll: {
      if (!api.ncclAlltoAll) return optional("ncclAlltoAll");
      // Stock sends from the buffer it receives into: in place, the blocks go out of a copy.
      const size_t whole = args.rangeBytes * layout_.nranks;
      const char* src = static_cast<const char*>(args.src);
      const char* dst = static_cast<const char*>(args.dst);
      const void* from = args.src;
      if (src < dst + whole && dst < src + whole) {
        char* copy = nullptr;
        MSCCLPP_TRY(scratch(whole, stream, &copy));
        MSCCLPP_CUDA_TRY(cudaMemcpyAsync(copy, args.src, whole, cudaMemcpyDeviceToDevice, stream));
        from = copy;
      }
      return world_->check(api.ncclAlltoAll(from, args.dst, count, type, comm, stream), "stock ncclAlltoAll");
    }
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
  return fail(Status::kInternalError, "collective %d has no stock route", static_cast<int>(args.collective));
}

Status RoutedComm::sendRecv(const std::vector<P2pOp>& ops, cudaStream_t stream) {
  // Every peer goes through stock, those on this rank's host too: one stock group keeps each rank's
  // sends and receives matched whatever hosts they reach.
  MSCCLPP_INFO(kP2p, "%zu sends and receives: stock, all ranks", ops.size());
  const StockNcclApi& api = world_->api();
  return world_->group(ops.size(), [&](size_t i) {
    const P2pOp& op = ops[i];
    return op.isSend ? world_->check(
                           api.ncclSend(op.buffer, op.bytes, ncclUint8, op.peer, world_->handle(), stream),
                           "stock ncclSend")
                     : world_->check(
                           api.ncclRecv(op.buffer, op.bytes, ncclUint8, op.peer, world_->handle(), stream),
                           "stock ncclRecv");
  });
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
  // Stock's abort frees device memory, which waits for every kernel on the device: kernels of the other
  // stock communicator that wait for a lost rank would hold it forever unless their own abort flag is
  // already set. So both are aborted at once, each from a thread of its own (one after the other only
  // where the system refuses a thread: this runs in a destructor, which must not throw).
  std::vector<std::function<void()>> aborts;
  for (StockComm* comm : {rail_.get(), world_.get()})
    if (comm) aborts.emplace_back([comm] { comm->abort(); });
  runConcurrently(aborts, "aborting the stock communicators", "Abort");
}

}  // namespace mscclpp_nccl
