// How a communicator over several hosts is cut for the hierarchical path (design: DESIGN.md here): one
// intra-host communicator per host on our kernels, one inter-host "rail" per local rank index on stock NCCL,
// and all_reduce, all_gather and reduce_scatter as steps over them. Pure and CUDA-free: this decides, the
// communicator executes (native/routed_communicator.cc).
//
// Hosts are the ranks' layout host ids (native/transport/host_identity.h), given in rank order. Ranks of
// one host need not be adjacent: with ranks 0 and 2 on host A and 1 and 3 on B, A's communicator is
// {0, 2}, B's {1, 3}, rail 0 is {0, 1} and rail 1 is {2, 3}. The plans keep every block at its global
// rank's place in the buffer, so interleaving changes which ranges a step moves, never the result.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "native/fallback/fallback_mode.h"

namespace mscclpp_nccl {

struct HostLayout {
  int nranks = 0;
  bool regular = true;                      // every host holds the same number of ranks
  std::vector<int> hostOf;                  // rank -> host; hosts numbered in order of their lowest rank
  std::vector<int> localRankOf;             // rank -> its place among its host's ranks
  std::vector<std::vector<int>> hostRanks;  // host -> its ranks, ascending

  int nhosts() const { return static_cast<int>(hostRanks.size()); }
  bool multiHost() const { return hostRanks.size() > 1; }
  int localSize(int rank) const { return static_cast<int>(hostRanks[hostOf[rank]].size()); }
  // The members of `rank`'s intra-host communicator, in its rank order (local rank i is element i).
  const std::vector<int>& intraMembers(int rank) const { return hostRanks[hostOf[rank]]; }
  // The ranks with `rank`'s local index on every host that has one, in host order: its rail. On an
  // irregular layout the rails differ in size, which is why that layout is not run hierarchically.
  std::vector<int> railMembers(int rank) const;
  // Whether each host's ranks can be one of NCCL's load/store teams, which are strided runs that its
  // rail team strides over: every host holds as many ranks, numbered consecutively.
  bool hostsAreTeams() const;
};

HostLayout hostLayout(const std::vector<uint64_t>& hostIds);

enum class CommPath {
  kNative,        // one host: our transport alone, as today
  kHierarchical,  // intra-host ours, rails and the rest stock
  kAllStock,      // one stock communicator over every rank
  kRefused,       // several hosts with MSCCLPP_NCCL_FALLBACK=0: the old init error
};

struct PathChoice {
  CommPath path;
  std::string why;  // one line for NCCL_DEBUG=INFO, or the error
};

// The path for `layout` under `mode`. Several hosts run hierarchically only when the layout is regular
// and hosts hold two ranks or more: with unequal hosts the slices each host reduces would not line up
// across the rails, and with one rank a host there is nothing for our kernels; both go all-stock, which
// is correct for any layout. One host keeps the native path under 0 and 1 (serving configurations our
// transport cannot, such as GPUs without peer access (native/transport/peer_access.h), is not
// decided here).
PathChoice choosePath(FallbackMode mode, const HostLayout& layout);
const char* commPathName(CommPath path);

enum class PlanCollective { kAllReduce, kAllGather, kReduceScatter };
enum class PlanComm { kIntra, kRail };
enum class PlanOp { kAllReduce, kReduceScatter, kAllGather };

struct ByteRange {
  size_t offset;
  size_t bytes;
};

// One collective call over one of the rank's communicators. `members[i]` are the ranges of the i-th
// member (local rank for kIntra, host for kRail), in the buffer the plan is about:
//   kAllReduce      every member lists the same ranges; all end with them reduced over the members
//   kReduceScatter  member i ends with its ranges reduced over the members; the other ranges of the
//                   step may be left anything
//   kAllGather      member i contributes its ranges; all end with every member's
// Every member of the communicator gets the same step, so it is one call for all of them.
struct PlanStep {
  PlanComm comm;
  PlanOp op;
  std::vector<std::vector<ByteRange>> members;
};

// The steps `rank` runs for `collective` of `count` elements of `elemBytes` (all_gather: elements each
// rank sends; reduce_scatter: elements each rank receives). The buffer is the collective's whole one:
// all_reduce count * elemBytes; all_gather the receive buffer and reduce_scatter the send buffer, both
// nranks * count * elemBytes with rank r's block at r * count * elemBytes. Mapping it onto the user's
// buffers (out of place, scratch) is the executor's.
//   all_reduce      intra reduce_scatter, rail all_reduce of the local rank's slice, intra all_gather,
//                   over equal slices of a multiple of `grainBytes` (which elemBytes must divide; 0 is
//                   elemBytes); the rest, fewer than localSize * grain bytes, by an intra then a rail
//                   all_reduce (every rail does it: a few bytes, and no all_gather after it)
//   all_gather      rail all_gather of the own block, then intra all_gather of what each rail brought
//   reduce_scatter  intra reduce_scatter of the blocks of each rail, then rail reduce_scatter
// count 0 gives no steps. False (no plan) for an irregular layout, a bad grain or rank, or a size that
// overflows size_t.
bool hierarchicalPlan(const HostLayout& layout, int rank, PlanCollective collective, size_t count,
                      size_t elemBytes, size_t grainBytes, std::vector<PlanStep>* out);

}  // namespace mscclpp_nccl
