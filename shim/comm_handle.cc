#include "shim/comm_handle.h"

#include <climits>
#include <cstddef>
#include <cstring>
#include <string>

#include "native/common/threads.h"
#include "shim/group.h"
#include "shim/handle_quarantine.h"

using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

LiveHandles& allocatedComms() {
  static auto* comms = new LiveHandles();  // never destroyed, as the quarantine
  return *comms;
}

ncclComm::ncclComm() { allocatedComms().add(this); }

ncclComm::~ncclComm() {
  allocatedComms().take(this, [] { return true; });
  magic = 0;
}

void retireHandle(ncclComm* comm) {
  // Never destroyed: API calls from other threads (a watchdog) may run during exit.
  static auto* quarantine = new HandleQuarantine<ncclComm>(kDestroyedHandlesKept);
  quarantine->add(comm);
}

namespace {

// Under comm->implMutex.
void recordInitFailure(ncclComm* comm, ncclResult_t result, std::string text) {
  comm->initError = std::move(text);
  comm->initResult = result;
  comm->state = CommState::kFailed;
}

// Once the initialisation of `comm` has ended, with `lock` holding its implMutex: a hidden handle is
// done with, and is retired once the lock is released.
void retireIfHidden(ncclComm* comm, std::unique_lock<std::shared_mutex>& lock) {
  if (!comm->hidden) return;
  if (comm->worker.joinable()) comm->worker.detach();  // this thread, whose CommUse keeps the handle
  comm->impl.reset();
  comm->state = CommState::kDestroyed;
  const bool retire = !comm->retired.exchange(true);
  lock.unlock();
  if (retire) retireHandle(comm);
}

void runJob(ncclComm* comm, const CommJob& job) {
  DeviceGuard guard(comm->device);
  std::unique_ptr<mscclpp_nccl::Communicator> impl;
  const Status status =
      static_cast<Status>(guardApi("comm initialization", [&] { return toNccl(job(&impl)); }));
  std::unique_lock<std::shared_mutex> lock(comm->implMutex);
  if (comm->state != CommState::kInitializing) return;  // aborted meanwhile: drop what was built
  if (status == Status::kSuccess) {
    comm->impl = std::move(impl);
    comm->initResult = ncclSuccess;
    comm->state = CommState::kReady;
  } else {
    recordInitFailure(comm, toNccl(status), mscclpp_nccl::lastError());
  }
  retireIfHidden(comm, lock);
}

// Runs the job on `comm->worker`; a thread the system refuses fails the initialisation. The thread
// holds a CommUse: an abort leaves it running, and the quarantine must not free the handle under it.
ncclResult_t startWorker(ncclComm* comm, const CommJob& job) {
  std::unique_lock<std::shared_mutex> lock(comm->implMutex);
  // Destroyed or aborted before a deferred start: no thread that nobody would join.
  if (comm->state != CommState::kInitializing)
    return toNccl(fail(Status::kInvalidUsage, "comm initialization: comm was destroyed before it started"));
  const ncclResult_t started = guardApi("comm initialization", [&] {
    auto use = std::make_shared<CommUse>(comm);
    comm->worker = std::thread([comm, job, use] {
      mscclpp_nccl::nameThisThread("Init");
      guardApi("comm initialization", [&] { runJob(comm, job); });
    });
    return ncclInProgress;
  });
  if (started != ncclInProgress) {
    recordInitFailure(comm, started, mscclpp_nccl::lastError());
    retireIfHidden(comm, lock);
  }
  return started;
}

}  // namespace

ncclResult_t startCommJob(ncclComm* comm, CommJob job) {
  mscclpp_nccl::logBanner();  // once per process, as stock prints "NCCL version" at init
  if (groupDepth() > 0) {
    // The handle may be destroyed before ncclGroupEnd runs this: it stays in use until then.
    auto use = std::make_shared<CommUse>(comm);
    deferToGroupEnd(
        [comm, job = std::move(job), use]() {
          if (comm->blocking) {
            runJob(comm, job);
            return comm->initResult.load();
          }
          return startWorker(comm, job);
        },
        /*orderKey=*/nullptr,
        [comm, use](ncclResult_t error, const std::string& text) {  // the group failed: this never runs
          std::unique_lock<std::shared_mutex> lock(comm->implMutex);
          if (comm->state != CommState::kInitializing) return;
          recordInitFailure(comm, error, text);
          retireIfHidden(comm, lock);
        });
    return ncclSuccess;
  }
  if (!comm->blocking) return startWorker(comm, job);
  const CommUse use(comm);  // a hidden handle is retired by runJob: it must outlive the reads below
  runJob(comm, job);
  const ncclResult_t result = comm->initResult;
  if (result != ncclSuccess) mscclpp_nccl::setLastError(comm->initError.c_str());
  return result;
}

namespace {

// The int field of `config` at `offset` (the caller checked that `size` covers it).
int configInt(const ncclConfig_t& config, size_t offset) {
  int value;
  memcpy(&value, reinterpret_cast<const char*>(&config) + offset, sizeof(value));
  return value;
}

// Stock NCCL's tuning hints (cluster size, a minimum CTA count, channels, ...): this library sizes each
// call's grid by its message and rank count, so it reads none of them but maxCTAs, a bound it keeps;
// NCCL_DEBUG=INFO says which were set.
template <typename Has>
void reportUnusedSettings(const ncclConfig_t& config, Has has) {
  if (!mscclpp_nccl::logInfoEnabled(mscclpp_nccl::LogSubsys::kInit)) return;
  struct Setting {
    const char* name;
    size_t offset;
  };
  static constexpr Setting kIgnored[] = {
      {"cgaClusterSize", offsetof(ncclConfig_t, cgaClusterSize)},
      {"minCTAs", offsetof(ncclConfig_t, minCTAs)},
      {"splitShare", offsetof(ncclConfig_t, splitShare)},
      {"trafficClass", offsetof(ncclConfig_t, trafficClass)},
      {"collnetEnable", offsetof(ncclConfig_t, collnetEnable)},
      {"CTAPolicy", offsetof(ncclConfig_t, CTAPolicy)},
      {"shrinkShare", offsetof(ncclConfig_t, shrinkShare)},
      {"nvlsCTAs", offsetof(ncclConfig_t, nvlsCTAs)},
      {"nChannelsPerNetPeer", offsetof(ncclConfig_t, nChannelsPerNetPeer)},
  };
  std::string set;
  for (const Setting& s : kIgnored) {
    if (!has(s.offset, sizeof(int))) continue;
    const int value = configInt(config, s.offset);
    if (value != NCCL_CONFIG_UNDEF_INT) set += " " + std::string(s.name) + "=" + std::to_string(value);
  }
  if (!set.empty()) MSCCLPP_INFO(kInit, "ncclConfig_t settings this library does not use:%s", set.c_str());
}

// The fields stock NCCL checks when a config is parsed, and the values it accepts (NCCL_CONFIG_UNDEF_INT,
// unset, always passes): a caller gets ncclInvalidArgument for the same configs from both libraries.
template <typename Has>
ncclResult_t checkConfigValues(const ncclConfig_t& config, Has has) {
  struct Range {
    const char* name;
    size_t offset;
    int least, most;
  };
  constexpr int kMaxChannels = 64;
  static constexpr Range kRanges[] = {
      {"cgaClusterSize", offsetof(ncclConfig_t, cgaClusterSize), 0, INT_MAX},
      {"minCTAs", offsetof(ncclConfig_t, minCTAs), 1, INT_MAX},
      {"maxCTAs", offsetof(ncclConfig_t, maxCTAs), 1, INT_MAX},
      {"splitShare", offsetof(ncclConfig_t, splitShare), 0, 1},
      {"collnetEnable", offsetof(ncclConfig_t, collnetEnable), 0, 1},
      {"CTAPolicy", offsetof(ncclConfig_t, CTAPolicy), 0,
       NCCL_CTA_POLICY_DEFAULT | NCCL_CTA_POLICY_EFFICIENCY | NCCL_CTA_POLICY_ZERO},
      {"shrinkShare", offsetof(ncclConfig_t, shrinkShare), 0, 1},
      {"nvlsCTAs", offsetof(ncclConfig_t, nvlsCTAs), 1, INT_MAX},
      {"nChannelsPerNetPeer", offsetof(ncclConfig_t, nChannelsPerNetPeer), 1, kMaxChannels},
      {"nvlinkCentricSched", offsetof(ncclConfig_t, nvlinkCentricSched), 0, 1},
      {"graphUsageMode", offsetof(ncclConfig_t, graphUsageMode), 0, 2},
      {"numRmaCtx", offsetof(ncclConfig_t, numRmaCtx), 0, INT_MAX},
      {"maxP2pPeers", offsetof(ncclConfig_t, maxP2pPeers), 1, INT_MAX},
      {"graphStreamOrdering", offsetof(ncclConfig_t, graphStreamOrdering), 0, 1},
  };
  for (const Range& range : kRanges) {
    if (!has(range.offset, sizeof(int))) continue;
    const int value = configInt(config, range.offset);
    if (value != NCCL_CONFIG_UNDEF_INT && (value < range.least || value > range.most))
      return toNccl(fail(Status::kInvalidArgument, "ncclConfig_t %s is %d: %d to %d (or left unset)",
                         range.name, value, range.least, range.most));
  }
  // Stock also refuses a minCTAs above maxCTAs (and, by comparing with the unset value, a minCTAs set
  // alone, which is accepted here).
  if (has(offsetof(ncclConfig_t, maxCTAs), sizeof(int)) && config.minCTAs != NCCL_CONFIG_UNDEF_INT &&
      config.maxCTAs != NCCL_CONFIG_UNDEF_INT && config.minCTAs > config.maxCTAs)
    return toNccl(fail(Status::kInvalidArgument, "ncclConfig_t minCTAs %d is above maxCTAs %d",
                       config.minCTAs, config.maxCTAs));
  return ncclSuccess;
}

}  // namespace

ncclResult_t readCommConfig(const ncclConfig_t* config, const ncclComm* parent, CommConfig* out) {
  *out = CommConfig{};
  if (config == nullptr) {
    if (parent != nullptr) *out = CommConfig{parent->blocking, parent->maxCtas};
    return ncclSuccess;
  }
  if (config->magic != NCCL_API_MAGIC)
    return toNccl(fail(Status::kInvalidArgument,
                       "ncclConfig_t has a bad magic (0x%x): initialize it with NCCL_CONFIG_INITIALIZER",
                       config->magic));
  if (config->size < offsetof(ncclConfig_t, blocking) + sizeof(int))
    return toNccl(fail(Status::kInvalidArgument, "ncclConfig_t size %zu is too small", config->size));
  // Fields past `size` belong to a newer header than the caller's and keep their defaults.
  auto has = [&](size_t offset, size_t bytes) { return offset + bytes <= config->size; };
  if (has(offsetof(ncclConfig_t, blocking), sizeof(int)) && config->blocking != NCCL_CONFIG_UNDEF_INT) {
    if (config->blocking != 0 && config->blocking != 1)
      return toNccl(fail(Status::kInvalidArgument, "ncclConfig_t blocking is %d: 0 or 1 (or left unset)",
                         config->blocking));
    out->blocking = config->blocking != 0;
  }
  NCCL_TRY(checkConfigValues(*config, has));
  if (has(offsetof(ncclConfig_t, maxCTAs), sizeof(int)) && config->maxCTAs != NCCL_CONFIG_UNDEF_INT)
    out->maxCtas = config->maxCTAs;  // at least 1: checkConfigValues refused the rest
  reportUnusedSettings(*config, has);
  return ncclSuccess;
}

DeviceGuard::DeviceGuard(int device) : device_(device) {
  if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
  if (previous_ != device_) cudaSetDevice(device_);
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0 && previous_ != device_) cudaSetDevice(previous_);
}
