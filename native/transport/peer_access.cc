#include "native/transport/peer_access.h"

#include <cuda_runtime.h>

#include <cstring>
#include <map>
#include <vector>

namespace mscclpp_nccl {
namespace {

// The ordinal of the GPU with `uuid` in this process, or -1.
int visibleOrdinal(const uint8_t* uuid, const std::vector<cudaUUID_t>& visible) {
  for (size_t d = 0; d < visible.size(); ++d)
    if (memcmp(visible[d].bytes, uuid, sizeof(visible[d].bytes)) == 0) return static_cast<int>(d);
  return -1;
}

}  // namespace

bool hostSpansGpus(const Topology& topology) {
  std::map<uint64_t, int> firstRankOfHost;
  for (size_t r = 0; r < topology.ranks.size(); ++r) {
    const auto first = firstRankOfHost.emplace(topology.ranks[r].hostId, static_cast<int>(r)).first->second;
    if (!topology.sameGpu(first, static_cast<int>(r))) return true;
  }
  return false;
}

bool peerGpusReachable(const Topology& topology, int myRank, int cudaDevice) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return true;
  }
  std::vector<cudaUUID_t> visible;
  for (int d = 0; d < count; ++d) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      cudaGetLastError();
      return true;
    }
    visible.push_back(prop.uuid);
  }
  const RankInfo& me = topology.ranks[myRank];
  for (size_t r = 0; r < topology.ranks.size(); ++r) {
    const RankInfo& peer = topology.ranks[r];
    if (peer.hostId != me.hostId || topology.sameGpu(myRank, static_cast<int>(r))) continue;
    const int ordinal = visibleOrdinal(peer.gpuUuid, visible);
    if (ordinal < 0 || ordinal == cudaDevice) continue;
    int canAccess = 0;
    if (cudaDeviceCanAccessPeer(&canAccess, cudaDevice, ordinal) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    if (!canAccess) return false;
  }
  return true;
}

}  // namespace mscclpp_nccl
