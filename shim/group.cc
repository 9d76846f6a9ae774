#include "shim/group.h"

#include <algorithm>
#include <cstddef>
#include <thread>
#include <vector>

using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

namespace {

struct PendingWork {
  std::function<ncclResult_t()> work;
  bool concurrent;
  const void* orderKey;  // concurrent items with the same non-null key run in order, on one thread
};

thread_local int tlsGroupDepth = 0;
thread_local uint64_t tlsGroupEpoch = 0;
thread_local std::vector<PendingWork> tlsPending;

// Runs the queued work: concurrent items on threads (one per key, running its items in order), then
// the rest in order. Returns the first failure, else ncclInProgress if a non-blocking initialisation
// is still running, else success.
ncclResult_t runPending(std::vector<PendingWork> pending) {
  std::vector<ncclResult_t> results(pending.size(), ncclSuccess);
  std::vector<std::vector<size_t>> chains;
  for (size_t i = 0; i < pending.size(); ++i) {
    if (!pending[i].concurrent) continue;
    auto same = [&](const std::vector<size_t>& chain) {
      return pending[i].orderKey != nullptr && pending[chain[0]].orderKey == pending[i].orderKey;
    };
    auto chain = std::find_if(chains.begin(), chains.end(), same);
    if (chain == chains.end())
      chains.push_back({i});
    else
      chain->push_back(i);
  }
  std::vector<std::thread> threads;
  for (const std::vector<size_t>& chain : chains)
    threads.emplace_back([&, chain] {
      for (size_t i : chain) results[i] = pending[i].work();
    });
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < pending.size(); ++i)
    if (!pending[i].concurrent) results[i] = pending[i].work();
  ncclResult_t overall = ncclSuccess;
  for (ncclResult_t r : results) {
    if (r != ncclSuccess && r != ncclInProgress) return r;
    if (r == ncclInProgress) overall = ncclInProgress;
  }
  return overall;
}

}  // namespace

int groupDepth() { return tlsGroupDepth; }

uint64_t groupEpoch() { return tlsGroupEpoch; }

void deferToGroupEnd(std::function<ncclResult_t()> work, bool concurrent, const void* orderKey) {
  tlsPending.push_back(PendingWork{std::move(work), concurrent, orderKey});
}

NCCL_API(ncclResult_t, ncclGroupStart, void) {
  ++tlsGroupDepth;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGroupEnd, void) {
  if (tlsGroupDepth == 0)
    return toNccl(fail(Status::kInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart"));
  if (--tlsGroupDepth > 0) return ncclSuccess;
  ++tlsGroupEpoch;
  std::vector<PendingWork> pending;
  pending.swap(tlsPending);
  return runPending(std::move(pending));
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, ncclSimInfo_t* simInfo) {
  if (simInfo == nullptr)
    return toNccl(fail(Status::kInvalidArgument, "ncclGroupSimulateEnd: simInfo is NULL"));
  if (tlsGroupDepth == 0)
    return toNccl(fail(Status::kInvalidUsage, "ncclGroupSimulateEnd: no matching ncclGroupStart"));
  if (--tlsGroupDepth > 0) return ncclSuccess;
  ++tlsGroupEpoch;
  // Queued collectives are dropped unrun; queued initialisations still happen, since their handles
  // were already returned. The estimate is one packet step's latency floor per collective.
  std::vector<PendingWork> pending, inits;
  pending.swap(tlsPending);
  size_t collectives = 0;
  for (PendingWork& item : pending) {
    if (item.concurrent)
      inits.push_back(std::move(item));
    else
      ++collectives;
  }
  if (simInfo->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float))
    simInfo->estimatedTime = 5.0f * static_cast<float>(collectives);
  return runPending(std::move(inits));
}
