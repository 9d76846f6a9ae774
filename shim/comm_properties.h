// ncclCommQueryProperties' struct, ncclCommProperties_t of stock's nccl_device/host.h, field for field:
// its layout is ABI (tests/test_comm_properties.py checks it against stock's header). Callers fill size,
// magic and version (NCCL_COMM_PROPERTIES_INITIALIZER) and read the rest.
#pragma once

#include <cstddef>
#include <cstdint>

struct CommProperties {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int rank;
  int nRanks;
  int cudaDev;
  int nvmlDev;  // -1 where NVML cannot name it
  bool deviceApiSupport;
  bool multimemSupport;
  int ginType;  // ncclGinType_t: NCCL_GIN_TYPE_NONE (0) here
  int nLsaTeams;
  bool hostRmaSupport;
  int railedGinType;
  uint64_t commHash;
  int ginMinStride;
  int ginConnectionType;  // ncclGinConnectionType_t: NCCL_GIN_CONNECTION_NONE (0) here
  bool ginSupport[64];
  size_t devCommRuntimeVersionSize;
  bool cftSupport;
  bool cftMulticastSupport;
  bool cftCountedSupport;
};

// What mscclpp-nccl answers for a communicator: who it is, how many load/store teams its ranks form
// (ncclTeamLsa), and no device-API capability (no device communicators, multimem, GIN, host RMA or CFT),
// since none is implemented.
CommProperties describeComm(int rank, int nranks, int cudaDev, int nvmlDev, uint64_t commHash, int nLsaTeams);
