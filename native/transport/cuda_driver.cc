#include "native/transport/cuda_driver.h"

#include <cuda_runtime.h>

#include <cstdio>
#include <mutex>
#include <string>
#include <type_traits>

#include "native/common/logging.h"

namespace mscclpp_nccl {
namespace {

struct LoadedDriver {
  CudaDriver table{};
  bool ok = false;
  std::string error;  // why the driver is unavailable (when !ok)
};

// Resolves one symbol at `version`; on failure fills `error` (once) and returns false.
bool resolve(const char* name, unsigned version, void** fn, std::string* error) {
  cudaDriverEntryPointQueryResult query = cudaDriverEntryPointSymbolNotFound;
  cudaError_t err = cudaGetDriverEntryPointByVersion(name, fn, version, cudaEnableDefault, &query);
  if (err == cudaSuccess && query == cudaDriverEntryPointSuccess && *fn != nullptr) return true;
  *fn = nullptr;
  char text[512];
  if (err != cudaSuccess) {
    cudaGetLastError();  // clear it where it is not sticky; the caller reports it through our Status
    snprintf(text, sizeof(text), "%s (%s); is an NVIDIA driver installed and a GPU visible?",
             cudaGetErrorString(err), cudaGetErrorName(err));
  } else if (query == cudaDriverEntryPointVersionNotSufficent) {
    snprintf(text, sizeof(text), "the installed driver is too old for %s (CUDA %u.%u API)", name,
             version / 1000, (version % 1000) / 10);
  } else {
    snprintf(text, sizeof(text), "the installed driver has no %s", name);
  }
  if (error->empty()) *error = text;
  return false;
}

const LoadedDriver& loaded() {
  static LoadedDriver driver;
  static std::once_flag once;
  std::call_once(once, [] {
    CudaDriver& t = driver.table;
    std::string error;
    bool ok = true;
    // `name` is stringified unexpanded (cuda.h renames some functions, e.g. cuMemGetAddressRange to
    // cuMemGetAddressRange_v2, but the entry point takes the base name); the static_assert ties the
    // requested version to the member's PFN_ typedef.
#define MSCCLPP_RESOLVE(name, version)                                                                   \
  static_assert(std::is_same<decltype(t.name), PFN_##name##_v##version>::value, "wrong PFN for " #name); \
  ok = resolve(#name, version, reinterpret_cast<void**>(&t.name), &error) && ok
    MSCCLPP_RESOLVE(cuGetErrorName, 6000);
    MSCCLPP_RESOLVE(cuGetErrorString, 6000);
    MSCCLPP_RESOLVE(cuDeviceGet, 2000);
    MSCCLPP_RESOLVE(cuDeviceGetAttribute, 2000);
    MSCCLPP_RESOLVE(cuCtxGetDevice, 2000);
    MSCCLPP_RESOLVE(cuCtxGetCurrent, 4000);
    MSCCLPP_RESOLVE(cuCtxGetId, 12000);
    MSCCLPP_RESOLVE(cuPointerGetAttribute, 4000);
    MSCCLPP_RESOLVE(cuPointerGetAttributes, 7000);
    MSCCLPP_RESOLVE(cuMemGetAddressRange, 3020);
    MSCCLPP_RESOLVE(cuMemCreate, 10020);
    MSCCLPP_RESOLVE(cuMemRelease, 10020);
    MSCCLPP_RESOLVE(cuMemAddressReserve, 10020);
    MSCCLPP_RESOLVE(cuMemAddressFree, 10020);
    MSCCLPP_RESOLVE(cuMemMap, 10020);
    MSCCLPP_RESOLVE(cuMemUnmap, 10020);
    MSCCLPP_RESOLVE(cuMemSetAccess, 10020);
    MSCCLPP_RESOLVE(cuMemGetAllocationGranularity, 10020);
    MSCCLPP_RESOLVE(cuMemExportToShareableHandle, 10020);
    MSCCLPP_RESOLVE(cuMemImportFromShareableHandle, 10020);
    MSCCLPP_RESOLVE(cuMemGetAllocationPropertiesFromHandle, 10020);
    MSCCLPP_RESOLVE(cuMemRetainAllocationHandle, 11000);
    MSCCLPP_RESOLVE(cuStreamWaitValue64, 11070);
    MSCCLPP_RESOLVE(cuLaunchKernelEx, 11060);
#undef MSCCLPP_RESOLVE
    driver.ok = ok;
    if (ok) {
      MSCCLPP_INFO(kInit, "CUDA driver entry points resolved");
    } else {
      driver.table = CudaDriver{};
      driver.error = error;
    }
  });
  return driver;
}

}  // namespace

Status loadCudaDriver(const CudaDriver** out) {
  const LoadedDriver& driver = loaded();
  if (!driver.ok) {
    if (out) *out = nullptr;
    return fail(Status::kCudaError, "CUDA driver not available: %s", driver.error.c_str());
  }
  if (out) *out = &driver.table;
  return Status::kSuccess;
}

const CudaDriver* cudaDriverOrNull() {
  const LoadedDriver& driver = loaded();
  return driver.ok ? &driver.table : nullptr;
}

Status cuFail(CUresult result, const char* what) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (const CudaDriver* driver = cudaDriverOrNull()) {
    if (driver->cuGetErrorName(result, &name) != CUDA_SUCCESS) name = nullptr;
    if (driver->cuGetErrorString(result, &text) != CUDA_SUCCESS) text = nullptr;
  }
  if (name == nullptr)
    return fail(Status::kCudaError, "%s failed: CUresult %d", what, static_cast<int>(result));
  return fail(Status::kCudaError, "%s failed: %s (%s)", what, name, text ? text : "");
}

}  // namespace mscclpp_nccl
