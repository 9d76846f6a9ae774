// ncclTeam_t (stock's nccl_device/core.h), which the team and device-resource entry points pass by value:
// the ranks world(i) = rank - rank_in_team * stride + i * stride for i < nRanks, this rank at `rank`.
#pragma once

struct Team {
  int nRanks, rank, stride;
};
