#include "native/fallback/hierarchy.h"

#include <cstdint>
#include <unordered_map>

namespace mscclpp_nccl {
namespace {

// A step in which every member lists the same ranges.
PlanStep sameForAll(PlanComm comm, PlanOp op, size_t members, std::vector<ByteRange> ranges) {
  return PlanStep{comm, op, std::vector<std::vector<ByteRange>>(members, ranges)};
}

// The blocks of the ranks with local index `local` on every host, in host order: what rail `local`
// carries.
std::vector<ByteRange> railBlocks(const HostLayout& layout, int local, size_t block) {
  std::vector<ByteRange> ranges;
  for (const std::vector<int>& ranks : layout.hostRanks) ranges.push_back({ranks[local] * block, block});
  return ranges;
}

void planAllReduce(const HostLayout& layout, int rank, size_t count, size_t elemBytes, size_t grain,
                   std::vector<PlanStep>* out) {
  const size_t local = layout.localSize(rank), hosts = layout.nhosts();
  // Equal slices keep the intra-host steps in NCCL's shape (member i owns slice i), which our kernels
  // run as they are; a grain keeps every slice as aligned as the buffer.
  const size_t grainElems = grain / elemBytes;
  const size_t slice = count / local / grainElems * grainElems * elemBytes;
  const size_t sliced = local * slice, total = count * elemBytes;
  if (slice > 0) {
    PlanStep scatter{PlanComm::kIntra, PlanOp::kReduceScatter, {}};
    for (size_t i = 0; i < local; ++i) scatter.members.push_back({{i * slice, slice}});
    const ByteRange mine{layout.localRankOf[rank] * slice, slice};
    PlanStep gather = scatter;
    gather.op = PlanOp::kAllGather;
    out->push_back(std::move(scatter));
    out->push_back(sameForAll(PlanComm::kRail, PlanOp::kAllReduce, hosts, {mine}));
    out->push_back(std::move(gather));
  }
  if (sliced < total) {
    const ByteRange rest{sliced, total - sliced};
    out->push_back(sameForAll(PlanComm::kIntra, PlanOp::kAllReduce, local, {rest}));
    out->push_back(sameForAll(PlanComm::kRail, PlanOp::kAllReduce, hosts, {rest}));
  }
}

// all_gather and reduce_scatter: the same two steps in opposite orders. Between hosts each rank moves
// only its own block; inside a host member i then holds (or first reduces) the blocks of rail i.
void planBlocks(const HostLayout& layout, int rank, bool gather, size_t block, std::vector<PlanStep>* out) {
  const int local = layout.localSize(rank);
  PlanStep rail{PlanComm::kRail, gather ? PlanOp::kAllGather : PlanOp::kReduceScatter, {}};
  for (const ByteRange& range : railBlocks(layout, layout.localRankOf[rank], block))
    rail.members.push_back({range});
  PlanStep intra{PlanComm::kIntra, rail.op, {}};
  for (int i = 0; i < local; ++i) intra.members.push_back(railBlocks(layout, i, block));
  out->push_back(gather ? std::move(rail) : std::move(intra));
  out->push_back(gather ? std::move(intra) : std::move(rail));
}

}  // namespace

std::vector<int> HostLayout::railMembers(int rank) const {
  const size_t local = localRankOf[rank];
  std::vector<int> members;
  for (const std::vector<int>& ranks : hostRanks)
    if (ranks.size() > local) members.push_back(ranks[local]);
  return members;
}

bool HostLayout::hostsAreTeams() const {
  if (!regular) return false;
  for (const std::vector<int>& ranks : hostRanks)
    if (ranks.back() - ranks.front() + 1 != static_cast<int>(ranks.size())) return false;
  return true;
}

HostLayout hostLayout(const std::vector<uint64_t>& hostIds) {
  HostLayout layout;
  layout.nranks = static_cast<int>(hostIds.size());
  std::unordered_map<uint64_t, int> hostIndex;
  for (int rank = 0; rank < layout.nranks; ++rank) {
    auto [it, added] = hostIndex.emplace(hostIds[rank], layout.nhosts());
    if (added) layout.hostRanks.emplace_back();
    std::vector<int>& ranks = layout.hostRanks[it->second];
    layout.hostOf.push_back(it->second);
    layout.localRankOf.push_back(static_cast<int>(ranks.size()));
    ranks.push_back(rank);
  }
  for (const std::vector<int>& ranks : layout.hostRanks)
    if (ranks.size() != layout.hostRanks[0].size()) layout.regular = false;
  return layout;
}

PathChoice choosePath(FallbackMode mode, const HostLayout& layout) {
  if (mode == FallbackMode::kAll)
    return {CommPath::kAllStock, "MSCCLPP_NCCL_FALLBACK=all: every communicator through stock NCCL"};
  if (!layout.multiHost()) return {CommPath::kNative, "one host"};
  const std::string hosts = std::to_string(layout.nhosts()) + " hosts";
  if (mode == FallbackMode::kOff)
    return {CommPath::kRefused, "communicator spans " + hosts +
                                    " and MSCCLPP_NCCL_FALLBACK=0: mscclpp-nccl serves one host natively"};
  if (!layout.regular) {
    std::string sizes;
    for (int h = 0; h < layout.nhosts() && h < 8; ++h)
      sizes += (h ? ", " : "") + std::to_string(layout.hostRanks[h].size());
    if (layout.nhosts() > 8) sizes += ", ...";
    return {CommPath::kAllStock,
            hosts + " hold unequal numbers of ranks (" + sizes + "): all through stock NCCL"};
  }
  const size_t local = layout.hostRanks[0].size();
  if (local == 1) return {CommPath::kAllStock, hosts + " of one rank each: all through stock NCCL"};
  return {CommPath::kHierarchical,
          hosts + " of " + std::to_string(local) + " ranks: inside each host ours, between hosts stock NCCL"};
}

const char* commPathName(CommPath path) {
  switch (path) {
    case CommPath::kNative:
      return "native";
    case CommPath::kHierarchical:
      return "hierarchical";
    case CommPath::kAllStock:
      return "all-stock";
    case CommPath::kRefused:
      break;
  }
  return "refused";
}

bool hierarchicalPlan(const HostLayout& layout, int rank, PlanCollective collective, size_t count,
                      size_t elemBytes, size_t grainBytes, std::vector<PlanStep>* out) {
  out->clear();
  if (!layout.regular || rank < 0 || rank >= layout.nranks || elemBytes == 0) return false;
  const size_t grain = grainBytes == 0 ? elemBytes : grainBytes;
  if (grain % elemBytes != 0) return false;
  const size_t blocks = collective == PlanCollective::kAllReduce ? 1 : layout.nranks;
  if (count > SIZE_MAX / elemBytes / blocks) return false;
  if (count == 0) return true;
  if (collective == PlanCollective::kAllReduce)
    planAllReduce(layout, rank, count, elemBytes, grain, out);
  else
    planBlocks(layout, rank, collective == PlanCollective::kAllGather, count * elemBytes, out);
  return true;
}

}  // namespace mscclpp_nccl
