// The CUDA driver functions this library calls, resolved once through the runtime's
// cudaGetDriverEntryPointByVersion. The library never links libcuda, so it loads (and reports plainly
// that CUDA is missing) on a machine without a GPU or driver.
//
// Each entry is requested at the CUDA version named by its PFN_ typedef's suffix, so the pointer's ABI
// is the typedef's by construction (e.g. cuMemGetAddressRange at 3020 is the size_t `_v2` variant and
// cuCtxGetDevice at 2000 is the one-argument variant, not CUDA 13's `cuCtxGetDevice_v2(dev, ctx)`).
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>

#include "native/common/status.h"

namespace mscclpp_nccl {

struct CudaDriver {
  PFN_cuGetErrorName_v6000 cuGetErrorName;
  PFN_cuGetErrorString_v6000 cuGetErrorString;
  PFN_cuDeviceGet_v2000 cuDeviceGet;
  PFN_cuDeviceGetAttribute_v2000 cuDeviceGetAttribute;
  PFN_cuCtxGetDevice_v2000 cuCtxGetDevice;
  PFN_cuCtxGetCurrent_v4000 cuCtxGetCurrent;
  PFN_cuCtxGetId_v12000 cuCtxGetId;
  PFN_cuPointerGetAttribute_v4000 cuPointerGetAttribute;
  PFN_cuPointerGetAttributes_v7000 cuPointerGetAttributes;
  // cuda.h #defines cuMemGetAddressRange to cuMemGetAddressRange_v2; the member is renamed the same way
  // everywhere, so `driver->cuMemGetAddressRange(...)` reads as usual.
  PFN_cuMemGetAddressRange_v3020 cuMemGetAddressRange;
  PFN_cuMemCreate_v10020 cuMemCreate;
  PFN_cuMemRelease_v10020 cuMemRelease;
  PFN_cuMemAddressReserve_v10020 cuMemAddressReserve;
  PFN_cuMemAddressFree_v10020 cuMemAddressFree;
  PFN_cuMemMap_v10020 cuMemMap;
  PFN_cuMemUnmap_v10020 cuMemUnmap;
  PFN_cuMemSetAccess_v10020 cuMemSetAccess;
  PFN_cuMemGetAllocationGranularity_v10020 cuMemGetAllocationGranularity;
  PFN_cuMemExportToShareableHandle_v10020 cuMemExportToShareableHandle;
  PFN_cuMemImportFromShareableHandle_v10020 cuMemImportFromShareableHandle;
  PFN_cuMemGetAllocationPropertiesFromHandle_v10020 cuMemGetAllocationPropertiesFromHandle;
  PFN_cuMemRetainAllocationHandle_v11000 cuMemRetainAllocationHandle;
  PFN_cuStreamWaitValue64_v11070 cuStreamWaitValue64;  // cuda.h renames it to its _v2, as above
  PFN_cuLaunchKernelEx_v11060 cuLaunchKernelEx;
};

// The driver table, resolved on the first call (thread-safe). Where there is no usable driver, returns
// kCudaError and records "CUDA driver not available: ..." as this thread's last error.
Status loadCudaDriver(const CudaDriver** out);

// The table, or nullptr where there is no usable driver; records no error (for queries).
const CudaDriver* cudaDriverOrNull();

// Records "`what` failed: CUDA_ERROR_X (text)" as the last error and returns kCudaError.
Status cuFail(CUresult result, const char* what);

}  // namespace mscclpp_nccl

// Turns a failing driver call into a Status with a message naming the call.
#define MSCCLPP_CU_TRY(call)                                                        \
  do {                                                                              \
    CUresult cuResult_ = (call);                                                    \
    if (cuResult_ != CUDA_SUCCESS) return ::mscclpp_nccl::cuFail(cuResult_, #call); \
  } while (0)
