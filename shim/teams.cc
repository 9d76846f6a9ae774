// The host's team queries (nccl_device/host.h). World is every rank; LSA, the ranks this rank reaches by
// load and store (Communicator::loadStoreRank: its host's, or itself alone); rail, one rank of each LSA
// team, at this rank's place in it. They return what stock returns for the same layout; on a
// communicator that is not usable, an empty team (or rank -1) with ncclGetLastError saying why.
#include "shim/arg_checks.h"
#include "shim/team.h"

using mscclpp_nccl::Communicator;
using mscclpp_nccl::Status;

namespace {

struct Teams {
  Team world{0, 0, 0};
  Team lsa{0, 0, 0};
};

bool teamsOf(ncclComm_t comm, const char* function, Teams* out) {
  if (checkManageableComm(comm, function) != ncclSuccess) return false;
  const Status status = withImpl(comm, "team query: comm was aborted", [&](Communicator& impl) {
    out->world = Team{impl.size(), impl.rank(), 1};
    out->lsa = Team{impl.loadStoreSize(), impl.loadStoreRank(impl.rank()), 1};
    return Status::kSuccess;
  });
  return mscclpp_nccl::ok(status);
}

}  // namespace

NCCL_API(Team, ncclTeamWorld, (ncclComm_t comm), comm) {
  Teams teams;
  teamsOf(comm, "ncclTeamWorld", &teams);
  return teams.world;
}

NCCL_API(Team, ncclTeamLsa, (ncclComm_t comm), comm) {
  Teams teams;
  teamsOf(comm, "ncclTeamLsa", &teams);
  return teams.lsa;
}

// LSA teams are consecutive ranks of equal size (loadStoreRank makes a team of one otherwise), so the
// rail strides over them.
NCCL_API(Team, ncclTeamRail, (ncclComm_t comm), comm) {
  Teams teams;
  if (!teamsOf(comm, "ncclTeamRail", &teams)) return Team{0, 0, 0};
  const int lsa = teams.lsa.nRanks;
  return Team{teams.world.nRanks / lsa, teams.world.rank / lsa, lsa};
}

NCCL_API(int, ncclTeamRankToWorld, (ncclComm_t comm, Team team, int rank), comm, team, rank) {
  Teams teams;
  if (!teamsOf(comm, "ncclTeamRankToWorld", &teams)) return -1;
  return teams.world.rank + (rank - team.rank) * team.stride;
}

NCCL_API(int, ncclTeamRankToLsa, (ncclComm_t comm, Team team, int rank), comm, team, rank) {
  Teams teams;
  if (!teamsOf(comm, "ncclTeamRankToLsa", &teams)) return -1;
  return teams.lsa.rank + (rank - team.rank) * team.stride;
}
