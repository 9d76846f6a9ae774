#include "native/transport/rank_info.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <random>
#include <string>

#include "native/transport/cuda_check.h"
#include "native/transport/host_identity.h"

namespace mscclpp_nccl {
namespace {

uint64_t thisProcessId() {
  static const uint64_t id = [] {
    std::random_device device;
    return (static_cast<uint64_t>(device()) << 32) ^ device() ^ static_cast<uint64_t>(getpid());
  }();
  return id;
}

}  // namespace

Status describeThisRank(int cudaDevice, RankInfo* out, std::string* gpuName, std::string* gpuArch) {
  memset(out, 0, sizeof(*out));
  out->hostId = physicalHostId();
  out->layoutHostId = layoutHostIdFromEnv(out->hostId);
  out->processId = thisProcessId();
  out->cudaDevice = cudaDevice;
  MSCCLPP_CUDA_TRY(cudaDeviceGetAttribute(&out->smCount, cudaDevAttrMultiProcessorCount, cudaDevice));
  cudaDeviceProp prop;
  MSCCLPP_CUDA_TRY(cudaGetDeviceProperties(&prop, cudaDevice));
  memcpy(out->gpuUuid, &prop.uuid, sizeof(out->gpuUuid));
  if (gpuName) *gpuName = prop.name;
  if (gpuArch) *gpuArch = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  return Status::kSuccess;
}

bool Topology::sameGpu(int a, int b) const {
  return ranks[a].hostId == ranks[b].hostId &&
         memcmp(ranks[a].gpuUuid, ranks[b].gpuUuid, sizeof(ranks[a].gpuUuid)) == 0;
}

int Topology::ranksOnGpuOf(int rank) const {
  int sharing = 0;
  for (size_t r = 0; r < ranks.size(); ++r) sharing += sameGpu(rank, static_cast<int>(r)) ? 1 : 0;
  return sharing;
}

Status discoverTopology(Bootstrap& bootstrap, int cudaDevice, Topology* out) {
  out->ranks.assign(bootstrap.size(), RankInfo{});
  MSCCLPP_TRY(describeThisRank(cudaDevice, &out->ranks[bootstrap.rank()], &out->myGpuName, &out->myGpuArch));
  MSCCLPP_TRY(bootstrap.allGather(out->ranks.data(), sizeof(RankInfo)));
  out->ranksOnMyGpu = out->ranksOnGpuOf(bootstrap.rank());
  out->singleHost = true;
  for (const RankInfo& info : out->ranks)
    if (info.hostId != out->ranks[0].hostId) out->singleHost = false;
  return Status::kSuccess;
}

}  // namespace mscclpp_nccl
