// Version, unique ids and communicator creation.
#include <cuda_runtime.h>

#include <cstring>
#include <memory>
#include <optional>
#include <vector>

#include "native/bootstrap/bootstrap.h"
#include "shim/arg_checks.h"
#include "shim/comm_handle.h"
#include "shim/group.h"

using mscclpp_nccl::CommRole;
using mscclpp_nccl::Communicator;
using mscclpp_nccl::fail;
using mscclpp_nccl::Status;
using mscclpp_nccl::UniqueId;

static_assert(sizeof(ncclUniqueId) == sizeof(UniqueId), "unique id sizes differ");

namespace {

UniqueId toNative(const ncclUniqueId& id) {
  UniqueId native;
  memcpy(native.bytes, id.internal, sizeof(native.bytes));
  return native;
}

ncclResult_t currentDevice(int* device, const char* function) {
  cudaError_t err = cudaGetDevice(device);
  if (err != cudaSuccess)
    return toNccl(
        fail(Status::kCudaError, "%s: no usable CUDA device: %s", function, cudaGetErrorString(err)));
  return ncclSuccess;
}

// `parent`: a communicator that the new one grows from, whose settings it takes where `config` is NULL,
// and over which its ranks agree on the id (`id` is then its root's, or null on the others).
ncclResult_t initRank(ncclComm_t* out, int nranks, const UniqueId* id, int rank, const ncclConfig_t* config,
                      const char* function, ncclComm* parent = nullptr) {
  if (out == nullptr) return toNccl(fail(Status::kInvalidArgument, "%s: comm is NULL", function));
  *out = nullptr;
  if (nranks < 1)
    return toNccl(fail(Status::kInvalidArgument, "%s: nranks %d is not positive", function, nranks));
  if (rank < 0 || rank >= nranks)
    return toNccl(fail(Status::kInvalidArgument, "%s: rank %d is not in [0, %d)", function, rank, nranks));
  CommConfig parsed;
  NCCL_TRY(readCommConfig(config, parent, &parsed));
  int device = 0;
  NCCL_TRY(currentDevice(&device, function));

  ncclComm* comm = new ncclComm();
  comm->blocking = parsed.blocking;
  comm->maxCtas = parsed.maxCtas;
  comm->device = device;
  comm->rank = rank;
  comm->nranks = nranks;
  *out = comm;
  const std::optional<UniqueId> given = id ? std::optional<UniqueId>(*id) : std::nullopt;
  const auto grown = parent ? std::make_shared<CommUse>(parent) : nullptr;  // outlives the job's use
  const int maxCtas = parsed.maxCtas;
  return startCommJob(
      comm, [given, parent, grown, rank, nranks, maxCtas](std::unique_ptr<Communicator>* impl) {
        UniqueId meet = given.value_or(UniqueId{});
        if (parent != nullptr)
          MSCCLPP_TRY(withImpl(parent, "ncclCommGrow: comm was destroyed", [&](Communicator& from) {
            return from.shareGrowId(given ? &*given : nullptr, &meet);
          }));
        CommRole role;
        role.maxCtas = maxCtas;
        return Communicator::create(meet, rank, nranks, impl, nullptr, role);
      });
}

}  // namespace

NCCL_API(ncclResult_t, ncclGetVersion, (int* version), version) {
  if (version == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclGetVersion: version is NULL"));
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclGetUniqueId, (ncclUniqueId * uniqueId), uniqueId) {
  if (uniqueId == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclGetUniqueId: uniqueId is NULL"));
  UniqueId id;
  Status status = mscclpp_nccl::bootstrapCreateUniqueId(&id);
  if (status != Status::kSuccess) return toNccl(status);
  memcpy(uniqueId->internal, id.bytes, sizeof(id.bytes));
  return ncclSuccess;
}

// The id of a communicator that `comm` grows into (ncclCommGrow): one rank of `comm` makes it and hands it
// to every rank, old and new. Its rendezvous is served from this process, as ncclGetUniqueId's.
NCCL_API(ncclResult_t, ncclCommGetUniqueId, (ncclComm_t comm, ncclUniqueId* uniqueId), comm, uniqueId) {
  NCCL_TRY(checkManageableComm(comm, "ncclCommGetUniqueId"));
  if (uniqueId == nullptr)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommGetUniqueId: uniqueId is NULL"));
  UniqueId id;
  NCCL_TRY(toNccl(mscclpp_nccl::bootstrapCreateUniqueId(&id, /*ignoreCommIdEnv=*/true)));
  memcpy(uniqueId->internal, id.bytes, sizeof(id.bytes));
  return ncclSuccess;
}

// A larger communicator from `comm`'s ranks and new ones, all meeting at the id of the root's
// ncclCommGetUniqueId: a rank of `comm` passes rank -1 and keeps its rank (the root passes the id, the
// others the id or NULL), a new rank passes a NULL comm, the id and its rank in the new communicator.
// `comm` stays as it was.
NCCL_GROUP_API(ncclResult_t, ncclCommGrow,
               (ncclComm_t comm, int nRanks, const ncclUniqueId* uniqueId, int rank, ncclComm_t* newcomm,
                ncclConfig_t* config),
               comm, nRanks, uniqueId, rank, newcomm, config) {
  if (newcomm == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclCommGrow: newcomm is NULL"));
  *newcomm = nullptr;
  if (comm == nullptr) {
    if (uniqueId == nullptr)
      return toNccl(fail(Status::kInvalidArgument,
                         "ncclCommGrow: uniqueId is NULL: a new rank passes the id of the root's "
                         "ncclCommGetUniqueId"));
    const UniqueId id = toNative(*uniqueId);
    return initRank(newcomm, nRanks, &id, rank, config, "ncclCommGrow");
  }
  NCCL_TRY(checkManageableComm(comm, "ncclCommGrow"));
  if (rank != -1)
    return toNccl(fail(Status::kInvalidArgument,
                       "ncclCommGrow: rank %d given with an existing comm: its ranks pass -1 and keep theirs",
                       rank));
  if (nRanks <= comm->nranks)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommGrow: %d ranks do not grow a comm of %d", nRanks,
                       comm->nranks));
  DeviceGuard guard(comm->device);
  // The root passes the id, the other ranks of `comm` NULL: they get it over `comm`.
  const std::optional<UniqueId> id = uniqueId ? std::optional<UniqueId>(toNative(*uniqueId)) : std::nullopt;
  return initRank(newcomm, nRanks, id ? &*id : nullptr, comm->rank, config, "ncclCommGrow", comm);
}

NCCL_GROUP_API(ncclResult_t, ncclCommInitRank, (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank),
               comm, nranks, commId, rank) {
  const UniqueId id = toNative(commId);
  return initRank(comm, nranks, &id, rank, nullptr, "ncclCommInitRank");
}

NCCL_GROUP_API(ncclResult_t, ncclCommInitRankConfig,
               (ncclComm_t * comm, int nranks, ncclUniqueId commId, int rank, ncclConfig_t* config), comm,
               nranks, commId, rank, config) {
  const UniqueId id = toNative(commId);
  return initRank(comm, nranks, &id, rank, config, "ncclCommInitRankConfig");
}

// Several ids spread the rendezvous over several roots in stock NCCL; one root serves any number of
// ranks here, so every rank meets at the first id (all ranks are given the same array).
NCCL_GROUP_API(ncclResult_t, ncclCommInitRankScalable,
               (ncclComm_t * newcomm, int nranks, int myrank, int nId, ncclUniqueId* commIds,
                ncclConfig_t* config),
               newcomm, nranks, myrank, nId, commIds, config) {
  if (commIds == nullptr || nId < 1)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommInitRankScalable: needs at least one unique id"));
  const UniqueId id = toNative(commIds[0]);
  return initRank(newcomm, nranks, &id, myrank, config, "ncclCommInitRankScalable");
}

NCCL_API(ncclResult_t, ncclCommInitAll, (ncclComm_t * comms, int ndev, const int* devlist), comms, ndev,
         devlist) {
  if (comms == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclCommInitAll: comms is NULL"));
  if (ndev < 1)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommInitAll: ndev %d is not positive", ndev));
  int deviceCount = 0;
  cudaError_t err = cudaGetDeviceCount(&deviceCount);
  if (err != cudaSuccess)
    return toNccl(
        fail(Status::kCudaError, "ncclCommInitAll: no usable CUDA device: %s", cudaGetErrorString(err)));
  for (int i = 0; i < ndev; ++i) {
    int device = devlist ? devlist[i] : i;
    if (device < 0 || device >= deviceCount)
      return toNccl(fail(Status::kInvalidArgument, "ncclCommInitAll: device %d does not exist", device));
  }
  ncclUniqueId id;
  NCCL_TRY(ncclGetUniqueId(&id));
  const UniqueId native = toNative(id);
  // Every rank blocks in the rendezvous until all have arrived, so they start together.
  std::vector<ncclResult_t> results;
  NCCL_TRY(runConcurrently(
      ndev,
      [&](size_t i) {
        DeviceGuard guard(devlist ? devlist[i] : static_cast<int>(i));
        ncclResult_t result =
            initRank(&comms[i], ndev, &native, static_cast<int>(i), nullptr, "ncclCommInitAll");
        if (result != ncclSuccess)
          mscclpp_nccl::logWarn("ncclCommInitAll: rank %zu: %s", i, mscclpp_nccl::lastError());
        return result;
      },
      &results, "ncclCommInitAll"));
  for (int i = 0; i < ndev; ++i) {
    if (results[i] != ncclSuccess) {
      for (int j = 0; j < ndev; ++j) {
        if (comms[j] != nullptr) ncclCommDestroy(comms[j]);
        comms[j] = nullptr;
      }
      return toNccl(
          fail(static_cast<Status>(results[i]), "ncclCommInitAll: rank %d failed to initialize", i));
    }
  }
  return ncclSuccess;
}
