// ncclCommQueryProperties: what this communicator is, and which device-API capabilities it has (none).
#include "shim/comm_properties.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "shim/arg_checks.h"

using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

namespace {

// NVML's index of CUDA device `cudaDev` (NCCL reports it as nvmlDev; CUDA_VISIBLE_DEVICES renumbers
// CUDA's devices but not NVML's), found by PCI bus id; -1 where NVML is not there to ask.
int nvmlIndexOf(int cudaDev) {
  using Init = int (*)();
  using ByBusId = int (*)(const char*, void**);
  using GetIndex = int (*)(void*, unsigned*);
  static std::once_flag once;
  static ByBusId byBusId = nullptr;
  static GetIndex getIndex = nullptr;
  std::call_once(once, [] {
    void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!nvml) return;
    auto init = reinterpret_cast<Init>(dlsym(nvml, "nvmlInit_v2"));
    if (!init || init() != 0) return;
    byBusId = reinterpret_cast<ByBusId>(dlsym(nvml, "nvmlDeviceGetHandleByPciBusId_v2"));
    getIndex = reinterpret_cast<GetIndex>(dlsym(nvml, "nvmlDeviceGetIndex"));
  });
  char busId[32] = {};
  void* device = nullptr;
  unsigned index = 0;
  if (!byBusId || !getIndex || cudaDeviceGetPCIBusId(busId, sizeof(busId), cudaDev) != cudaSuccess) {
    cudaGetLastError();
    return -1;
  }
  if (byBusId(busId, &device) != 0 || getIndex(device, &index) != 0) return -1;
  return static_cast<int>(index);
}

}  // namespace

CommProperties describeComm(int rank, int nranks, int cudaDev, int nvmlDev, uint64_t commHash,
                            int nLsaTeams) {
  CommProperties props{};
  props.nLsaTeams = nLsaTeams;
  props.rank = rank;
  props.nRanks = nranks;
  props.cudaDev = cudaDev;
  props.nvmlDev = nvmlDev;
  props.commHash = commHash;
  return props;  // every capability false, every count 0, every GIN type "none"
}

NCCL_API(ncclResult_t, ncclCommQueryProperties, (ncclComm_t comm, CommProperties* props), comm, props) {
  NCCL_TRY(checkManageableComm(comm, "ncclCommQueryProperties"));
  constexpr size_t kFirstAnswer = offsetof(CommProperties, rank);
  if (props == nullptr)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommQueryProperties: props is NULL"));
  if (props->magic != NCCL_API_MAGIC || props->size < kFirstAnswer)
    return toNccl(fail(Status::kInvalidArgument,
                       "ncclCommQueryProperties: props has a bad magic or size: initialize it with "
                       "NCCL_COMM_PROPERTIES_INITIALIZER"));
  uint64_t commHash = 0;
  int nLsaTeams = 0;
  NCCL_TRY(toNccl(withImpl(comm, "ncclCommQueryProperties: comm was aborted or destroyed",
                           [&](mscclpp_nccl::Communicator& impl) {
                             commHash = impl.commHash();
                             nLsaTeams = impl.size() / impl.loadStoreSize();
                             return Status::kSuccess;
                           })));
  const CommProperties answer =
      describeComm(comm->rank, comm->nranks, comm->device, nvmlIndexOf(comm->device), commHash, nLsaTeams);
  // A caller built against an older header passes a smaller struct: fill what it has.
  const size_t end = std::min(props->size, sizeof(CommProperties));
  memcpy(reinterpret_cast<char*>(props) + kFirstAnswer, reinterpret_cast<const char*>(&answer) + kFirstAnswer,
         end - kFirstAnswer);
  return ncclSuccess;
}
