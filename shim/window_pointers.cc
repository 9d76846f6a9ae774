// ncclGetPeerDevicePointer and ncclGetLsaDevicePointer: where this process's kernels reach a rank's window
// by load and store (PyTorch's and XLA's symmetric memory build their peer tables from them).
//
// A window's load/store team is the communicator's (ncclTeamLsa: this host's ranks, see
// Communicator::loadStoreRank) where the registration mapped every peer's window; where it did not
// (registered without NCCL_WIN_COLL_SYMMETRIC, or some rank could not map some peer's memory), no peer
// is reachable and the team is this rank alone. A peer outside the team has no pointer: NULL and
// success, as in stock NCCL.
#include "native/transport/symmetric_window.h"
#include "shim/arg_checks.h"
#include "shim/window_lookup.h"

using mscclpp_nccl::Communicator;
using mscclpp_nccl::fail;
using mscclpp_nccl::Status;
using mscclpp_nccl::SymmetricWindow;

namespace {

// The window's load/store team: the communicator's (Communicator::loadStoreRank) where the window is
// mapped, else this rank alone.
class LoadStoreTeam {
 public:
  LoadStoreTeam(const Communicator& impl, const SymmetricWindow& window)
      : impl_(impl), mapped_(window.mapped()) {}
  int size() const { return mapped_ ? impl_.loadStoreSize() : 1; }
  // The team rank of world rank `rank`, or -1 where it is not in the team.
  int rankOf(int rank) const {
    if (mapped_) return impl_.loadStoreRank(rank);
    return rank == impl_.rank() ? 0 : -1;
  }
  int self() const { return rankOf(impl_.rank()); }

 private:
  const Communicator& impl_;
  bool mapped_;
};

// `offset` into the window of team rank `teamRank` (in the team), as this process maps it.
Status teamPointer(const SymmetricWindow& window, const LoadStoreTeam& team, int teamRank, size_t offset,
                   const char* function, void** out) {
  // Every team member's window holds sharedBytes() (this rank's own size where no peer is mapped).
  if (offset >= window.sharedBytes())
    return fail(Status::kInvalidArgument, "%s: offset %zu is not inside the window (%zu bytes)", function,
                offset, window.sharedBytes());
  char* const base = teamRank == team.self() ? static_cast<char*>(window.local()) : window.peerBase(teamRank);
  *out = base + offset;
  return Status::kSuccess;
}

// Finds the window a query names and runs query(impl, window, team) on it.
template <typename Query>
ncclResult_t queryWindow(ncclWindow_t win, void** outPtr, const char* function, Query query) {
  const SymmetricWindow* window = nullptr;
  ncclComm* comm = windowComm(win, &window);
  if (comm == nullptr)
    return toNccl(fail(Status::kInvalidArgument, "%s: window is not a registered window", function));
  if (outPtr == nullptr) return toNccl(fail(Status::kInvalidArgument, "%s: outPtr is NULL", function));
  *outPtr = nullptr;
  NCCL_TRY(checkReadyComm(comm, function));
  if (window == nullptr)  // registered inside a group that has not ended
    return toNccl(fail(Status::kInvalidUsage, "%s: the window's registration has not run yet (end its group)",
                       function));
  return toNccl(withImpl(comm, "window pointer: comm was aborted", [&](Communicator& impl) {
    return query(impl, *window, LoadStoreTeam(impl, *window));
  }));
}

}  // namespace

NCCL_API(ncclResult_t, ncclGetLsaDevicePointer,
         (ncclWindow_t window, size_t offset, int lsaRank, void** outPtr), window, offset, lsaRank, outPtr) {
  constexpr const char* kFunction = "ncclGetLsaDevicePointer";
  return queryWindow(window, outPtr, kFunction,
                     [&](const Communicator&, const SymmetricWindow& native, const LoadStoreTeam& team) {
                       if (lsaRank < 0 || lsaRank >= team.size())
                         return fail(Status::kInvalidArgument,
                                     "%s: lsaRank %d is outside the window's load/store team of %d rank(s)",
                                     kFunction, lsaRank, team.size());
                       return teamPointer(native, team, lsaRank, offset, kFunction, outPtr);
                     });
}

NCCL_API(ncclResult_t, ncclGetPeerDevicePointer,
         (ncclWindow_t window, size_t offset, int peer, void** outPtr), window, offset, peer, outPtr) {
  constexpr const char* kFunction = "ncclGetPeerDevicePointer";
  return queryWindow(window, outPtr, kFunction,
                     [&](const Communicator& impl, const SymmetricWindow& native, const LoadStoreTeam& team) {
                       if (peer < 0 || peer >= impl.size())
                         return fail(Status::kInvalidArgument,
                                     "%s: peer %d is outside the communicator's %d ranks", kFunction, peer,
                                     impl.size());
                       const int teamRank = team.rankOf(peer);
                       if (teamRank < 0) return Status::kSuccess;  // not reachable: NULL
                       return teamPointer(native, team, teamRank, offset, kFunction, outPtr);
                     });
}
