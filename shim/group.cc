#include "shim/group.h"

#include <algorithm>
#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "native/common/threads.h"
#include "shim/enqueue.h"

using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

namespace {

constexpr unsigned int kSimInfoMagic = 0x74685283;  // NCCL_SIM_INFO_INITIALIZER's

struct PendingWork {
  std::function<ncclResult_t()> work;
  const void* orderKey;  // items with the same non-null key run in order, on one thread
  GroupCancel cancel;    // when the group fails before `work` runs; may be null
};

struct StreamWork {
  ncclComm* comm;
  cudaStream_t stream;
  StreamLaunch launch;  // null: names a stream only
  StreamModel model;    // null: costs nothing (ncclGroupSimulateEnd)
};

// A result that ends the caller's call (in progress is not a failure).
bool failed(ncclResult_t result) { return result != ncclSuccess && result != ncclInProgress; }

thread_local int tlsGroupDepth = 0;
thread_local uint64_t tlsGroupEpoch = 0;
thread_local std::vector<PendingWork> tlsPending;
thread_local std::vector<StreamWork> tlsStreamWork;
// The first failure of a call made inside the open group, and its ncclGetLastError text.
thread_local ncclResult_t tlsGroupError = ncclSuccess;
thread_local std::string tlsGroupErrorText;

// Ends a group that failed: nothing queued runs, as in stock NCCL. Returns the failure, with its text.
ncclResult_t dropGroup(ncclResult_t error, const std::string& text, std::vector<PendingWork> pending) {
  tlsStreamWork.clear();
  for (PendingWork& item : pending)
    if (item.cancel)
      guardApi("ncclGroupEnd", [&] {
        item.cancel(error, text);
        return ncclSuccess;
      });
  mscclpp_nccl::setLastError(text.c_str());
  return error;
}

// Where a call inside the group being ended failed (failsGroup), drops the group and returns that
// first failure; else ncclSuccess. The next group starts clean either way.
ncclResult_t dropIfFailed(std::vector<PendingWork>& pending) {
  std::string text;
  text.swap(tlsGroupErrorText);
  const ncclResult_t error = std::exchange(tlsGroupError, ncclSuccess);
  return error == ncclSuccess ? ncclSuccess : dropGroup(error, text, std::move(pending));
}

// Runs each communicator's queued work as one call of that communicator (first used, first run): its
// launches in call order on the first stream it named, the other streams joined before and after.
// Its lists are the thread's, kept between groups: an eager group allocates nothing here.
ncclResult_t runStreamWork(const std::vector<StreamWork>& work) {
  ncclResult_t first = ncclSuccess;
  thread_local std::vector<bool> done;
  thread_local std::vector<cudaStream_t> streams;
  thread_local std::vector<const StreamLaunch*> launches;
  done.assign(work.size(), false);
  for (size_t i = 0; i < work.size(); ++i) {
    if (done[i]) continue;
    ncclComm* comm = work[i].comm;
    streams.clear();
    launches.clear();
    for (size_t j = i; j < work.size(); ++j) {
      if (work[j].comm != comm) continue;
      done[j] = true;
      if (std::find(streams.begin(), streams.end(), work[j].stream) == streams.end())
        streams.push_back(work[j].stream);
      if (work[j].launch) launches.push_back(&work[j].launch);
    }
    ncclResult_t result = runInOrder(comm, streams.data(), streams.size(),
                                     [&](mscclpp_nccl::Communicator& impl, cudaStream_t launch) {
                                       for (const StreamLaunch* run : launches)
                                         MSCCLPP_TRY((*run)(impl, launch));
                                       return Status::kSuccess;
                                     });
    if (first == ncclSuccess) first = result;
  }
  return first;
}

// Runs the queued work on threads (one per key, running its items in order). Returns the first
// failure, with its ncclGetLastError text carried over from the thread it ran on, else ncclInProgress
// if a non-blocking initialisation is still running, else success.
ncclResult_t runPending(std::vector<PendingWork> pending) {
  std::vector<ncclResult_t> results(pending.size(), ncclSuccess);
  std::vector<std::string> errors(pending.size());
  std::vector<std::vector<size_t>> chains;
  for (size_t i = 0; i < pending.size(); ++i) {
    auto same = [&](const std::vector<size_t>& chain) {
      return pending[i].orderKey != nullptr && pending[chain[0]].orderKey == pending[i].orderKey;
    };
    auto chain = std::find_if(chains.begin(), chains.end(), same);
    if (chain == chains.end())
      chains.push_back({i});
    else
      chain->push_back(i);
  }
  std::vector<ncclResult_t> chainResults;
  NCCL_TRY(runConcurrently(
      chains.size(),
      [&](size_t c) {
        for (size_t i : chains[c]) {
          results[i] = pending[i].work();
          if (failed(results[i])) errors[i] = mscclpp_nccl::lastError();  // the text is this thread's
        }
        return ncclSuccess;
      },
      &chainResults, "ncclGroupEnd"));
  for (ncclResult_t r : chainResults) NCCL_TRY(r);  // a chain's item failed in an unexpected way
  ncclResult_t overall = ncclSuccess;
  for (size_t i = 0; i < results.size(); ++i) {
    if (failed(results[i])) {
      mscclpp_nccl::setLastError(errors[i].c_str());
      return results[i];
    }
    if (results[i] == ncclInProgress) overall = ncclInProgress;
  }
  return overall;
}

}  // namespace

ncclResult_t runConcurrently(size_t count, const std::function<ncclResult_t(size_t)>& task,
                             std::vector<ncclResult_t>* results, const char* function) {
  std::mutex mutex;
  std::condition_variable started;
  bool decided = false, run = false;
  std::vector<std::thread> threads;
  std::vector<std::string> errors(count);  // each failed task's ncclGetLastError text
  results->assign(count, ncclSuccess);
  const ncclResult_t created = guardApi(function, [&] {
    threads.reserve(count);
    for (size_t i = 0; i < count; ++i)
      threads.emplace_back([&, i] {
        mscclpp_nccl::nameThisThread("Group");
        {
          std::unique_lock<std::mutex> lock(mutex);
          started.wait(lock, [&] { return decided; });
        }
        if (!run) return;
        (*results)[i] = guardApi(function, [&] { return task(i); });
        if (failed((*results)[i])) guardApi(function, [&] { errors[i] = mscclpp_nccl::lastError(); });
      });
    return ncclSuccess;
  });
  {
    std::lock_guard<std::mutex> lock(mutex);
    decided = true;
    run = created == ncclSuccess;
  }
  started.notify_all();
  for (std::thread& t : threads) t.join();
  // The text is thread-local: the caller sees the first failed task's, not its own stale one.
  for (size_t i = 0; i < count && created == ncclSuccess; ++i) {
    if (!failed((*results)[i])) continue;
    mscclpp_nccl::setLastError(errors[i].c_str());
    break;
  }
  return created;
}

int groupDepth() { return tlsGroupDepth; }

uint64_t groupEpoch() { return tlsGroupEpoch; }

void deferToGroupEnd(std::function<ncclResult_t()> work, const void* orderKey, GroupCancel cancel) {
  tlsPending.push_back(PendingWork{std::move(work), orderKey, std::move(cancel)});
}

ncclResult_t failsGroup(ncclResult_t result) {
  if (tlsGroupDepth > 0 && failed(result) && tlsGroupError == ncclSuccess) {
    tlsGroupError = result;
    try {
      tlsGroupErrorText = mscclpp_nccl::lastError();
    } catch (const std::exception&) {  // no memory for the text (outside guardApi): the error still counts
      tlsGroupErrorText.clear();
    }
  }
  return result;
}

void deferToGroupEnd(ncclComm* comm, cudaStream_t stream, StreamLaunch launch, StreamModel model) {
  tlsStreamWork.push_back(StreamWork{comm, stream, std::move(launch), std::move(model)});
}

NCCL_API(ncclResult_t, ncclGroupStart, (void)) {
  ++tlsGroupDepth;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGroupEnd, (void)) {
  if (tlsGroupDepth == 0)
    return toNccl(fail(Status::kInvalidUsage, "ncclGroupEnd: no matching ncclGroupStart"));
  if (--tlsGroupDepth > 0) return ncclSuccess;
  ++tlsGroupEpoch;
  std::vector<PendingWork> pending;
  pending.swap(tlsPending);
  if (const ncclResult_t error = dropIfFailed(pending); error != ncclSuccess) return error;
  std::vector<StreamWork> work;
  work.swap(tlsStreamWork);
  const ncclResult_t inits = pending.empty() ? ncclSuccess : runPending(std::move(pending));
  if (inits != ncclSuccess && inits != ncclInProgress) return inits;
  const ncclResult_t calls = runStreamWork(work);
  work.clear();
  if (tlsStreamWork.empty()) tlsStreamWork.swap(work);  // its capacity serves the thread's next group
  return calls != ncclSuccess ? calls : inits;
}

NCCL_API(ncclResult_t, ncclGroupSimulateEnd, (ncclSimInfo_t * simInfo), simInfo) {
  if (simInfo == nullptr)
    return toNccl(fail(Status::kInvalidArgument, "ncclGroupSimulateEnd: simInfo is NULL"));
  if (tlsGroupDepth == 0)
    return toNccl(fail(Status::kInvalidUsage, "ncclGroupSimulateEnd: no matching ncclGroupStart"));
  if (--tlsGroupDepth > 0) return ncclSuccess;
  ++tlsGroupEpoch;
  // Queued collectives are dropped unrun; queued initialisations still happen, since their handles
  // were already returned. The estimate sums each queued call's modeled time.
  std::vector<PendingWork> inits;
  inits.swap(tlsPending);
  if (const ncclResult_t error = dropIfFailed(inits); error != ncclSuccess) return error;
  // As stock NCCL reads it: only the bytes that `size` covers (a size of 0 leaves no magic).
  const bool hasMagic = simInfo->size >= offsetof(ncclSimInfo_t, magic) + sizeof(simInfo->magic);
  if (!hasMagic || simInfo->magic != kSimInfoMagic) {
    const ncclResult_t bad = toNccl(fail(Status::kInvalidArgument,
                                         "ncclGroupSimulateEnd: simInfo was not initialized with "
                                         "NCCL_SIM_INFO_INITIALIZER (magic 0x%x)",
                                         hasMagic ? simInfo->magic : 0u));
    return dropGroup(bad, mscclpp_nccl::lastError(), std::move(inits));
  }
  std::vector<StreamWork> work;
  work.swap(tlsStreamWork);
  double estimate = 0;
  for (const StreamWork& w : work)
    if (w.model) estimate += modeledOn(w.comm, w.model);
  if (simInfo->size >= offsetof(ncclSimInfo_t, estimatedTime) + sizeof(float))
    simInfo->estimatedTime = static_cast<float>(estimate);
  return runPending(std::move(inits));
}
