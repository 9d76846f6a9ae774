// Who each rank is: host, process and GPU. Exchanged once at communicator init; decides how peers'
// memory is reached (direct pointer in one process, CUDA IPC across processes) and how many ranks
// share each GPU (which bounds every kernel's grid so that waiting kernels stay co-resident).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "native/bootstrap/bootstrap.h"
#include "native/common/status.h"

namespace mscclpp_nccl {

struct RankInfo {
  uint64_t hostId;        // physical host: decides IPC reach (host_identity.h)
  uint64_t layoutHostId;  // host for the hierarchical path; hostId unless MSCCLPP_NCCL_HOST_ID is set
  uint64_t processId;     // random per process (pids repeat across containers)
  int32_t cudaDevice;     // ordinal in that process
  int32_t smCount;
  uint8_t gpuUuid[16];
};

// Fills `out` for `cudaDevice`; `gpuName` (optional) receives the device's name.
Status describeThisRank(int cudaDevice, RankInfo* out, std::string* gpuName = nullptr,
                        std::string* gpuArch = nullptr);

struct Topology {
  std::vector<RankInfo> ranks;
  int ranksOnMyGpu = 0;
  bool singleHost = true;  // by physical host: MSCCLPP_NCCL_HOST_ID does not change it
  std::string myGpuName;   // cudaDeviceProp::name of this rank's GPU
  std::string myGpuArch;   // its architecture: "sm_" and the compute capability ("sm_90")

  // Whether every rank runs on this rank's GPU.
  bool oneGpu() const { return ranksOnMyGpu == static_cast<int>(ranks.size()); }
  // How many ranks share rank `rank`'s GPU (itself included).
  int ranksOnGpuOf(int rank) const;

  bool sameProcess(int a, int b) const {
    return ranks[a].hostId == ranks[b].hostId && ranks[a].processId == ranks[b].processId;
  }
  bool sameGpu(int a, int b) const;
};

Status discoverTopology(Bootstrap& bootstrap, int cudaDevice, Topology* out);

}  // namespace mscclpp_nccl
