#include "native/transport/device_memory.h"

#include <cuda_runtime.h>

#include <cstdarg>
#include <cstdio>
#include <iterator>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "native/common/logging.h"
#include "native/common/parameters.h"
#include "native/transport/cuda_check.h"
#include "native/transport/cuda_driver.h"

namespace mscclpp_nccl {
namespace {

constexpr CUmemAllocationHandleType kHandleType = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

// One allocateShareable allocation: a single physical handle mapped over its whole reservation.
struct Allocation {
  CUmemGenericAllocationHandle handle;
  size_t size;  // reserved = mapped = physical size (a multiple of the granularity)
};

struct Registry {
  std::mutex mutex;
  std::map<uintptr_t, Allocation> byBase;
};

// Never destroyed, so that an ncclMemFree from another static destructor at exit stays safe.
Registry& registry() {
  static Registry* r = new Registry();
  return *r;
}

CUdeviceptr devptr(const void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }

// cuFail with a printf-formatted description of the step.
Status cuStep(CUresult result, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
Status cuStep(CUresult result, const char* fmt, ...) {
  if (result == CUDA_SUCCESS) return Status::kSuccess;
  char what[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof(what), fmt, ap);
  va_end(ap);
  return cuFail(result, what);
}

Status allocateWithCudaMalloc(size_t bytes, void** ptr) {
  cudaError_t err = cudaMalloc(ptr, bytes);
  if (err != cudaSuccess) {
    cudaGetLastError();  // not left behind for the caller's next error check
    *ptr = nullptr;
    return fail(Status::kCudaError, "cudaMalloc(%zu) failed: %s (%s)", bytes, cudaGetErrorString(err),
                cudaGetErrorName(err));
  }
  return Status::kSuccess;
}

// Whether this device can back allocateShareable with exportable cuMem memory.
Status cuMemUsable(const CudaDriver* drv, CUdevice dev, int ordinal, bool* usable, bool* rdma) {
  *usable = false;
  *rdma = false;
  if (readInteger(Param::kCumemEnable) == 0) {
    MSCCLPP_INFO(kAlloc, "NCCL_CUMEM_ENABLE=0: device memory comes from cudaMalloc");
    return Status::kSuccess;
  }
  int vmm = 0, fd = 0, gdr = 0;
  MSCCLPP_TRY(
      cuStep(drv->cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev),
             "cuDeviceGetAttribute(VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, GPU %d)", ordinal));
  MSCCLPP_TRY(cuStep(
      drv->cuDeviceGetAttribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, dev),
      "cuDeviceGetAttribute(HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, GPU %d)", ordinal));
  if (!vmm || !fd) {
    MSCCLPP_INFO(kAlloc, "GPU %d lacks %s: device memory comes from cudaMalloc", ordinal,
                 !vmm ? "virtual memory management" : "POSIX file-descriptor handles");
    return Status::kSuccess;
  }
  // Optional: lets a stock NCCL (the multi-host fallback) register the memory for GPUDirect RDMA.
  if (drv->cuDeviceGetAttribute(&gdr, CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED, dev) !=
      CUDA_SUCCESS)
    gdr = 0;
  *usable = true;
  *rdma = gdr != 0;
  return Status::kSuccess;
}

// Read/write access for `device` and every device that can access it as a peer.
std::vector<CUmemAccessDesc> accessList(const CudaDriver* drv, int device, CUdevice cuDevice) {
  std::vector<CUmemAccessDesc> list;
  CUmemAccessDesc own{};
  own.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  own.location.id = cuDevice;
  own.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  list.push_back(own);
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return list;
  }
  for (int peer = 0; peer < count; ++peer) {
    int canAccess = 0;
    CUdevice cuPeer;
    if (peer == device) continue;
    if (cudaDeviceCanAccessPeer(&canAccess, peer, device) != cudaSuccess) {
      cudaGetLastError();
      continue;
    }
    if (!canAccess || drv->cuDeviceGet(&cuPeer, peer) != CUDA_SUCCESS) {
      MSCCLPP_INFO(kAlloc, "GPU %d has no peer access to GPU %d; not mapped there", peer, device);
      continue;
    }
    CUmemAccessDesc desc = own;
    desc.location.id = cuPeer;
    list.push_back(desc);
  }
  return list;
}

// The calling thread's device, as a runtime ordinal and a driver handle. The cuMem calls use the
// current context, so the device's primary context is made current when there is none.
Status currentDevice(const CudaDriver* drv, int* device, CUdevice* cuDevice) {
  MSCCLPP_CUDA_TRY(cudaGetDevice(device));
  CUdevice current;
  if (drv->cuCtxGetDevice(&current) != CUDA_SUCCESS) MSCCLPP_CUDA_TRY(cudaSetDevice(*device));
  return cuStep(drv->cuDeviceGet(cuDevice, *device), "cuDeviceGet(%d)", *device);
}

}  // namespace

Status allocateShareable(size_t bytes, void** ptr) {
  if (ptr == nullptr) return fail(Status::kInvalidArgument, "allocateShareable: ptr is NULL");
  *ptr = nullptr;
  if (bytes == 0) return Status::kSuccess;
  const CudaDriver* drv = nullptr;
  MSCCLPP_TRY(loadCudaDriver(&drv));
  int device = 0;
  CUdevice cuDevice;
  MSCCLPP_TRY(currentDevice(drv, &device, &cuDevice));

  bool usable = false, rdma = false;
  MSCCLPP_TRY(cuMemUsable(drv, cuDevice, device, &usable, &rdma));
  if (!usable) return allocateWithCudaMalloc(bytes, ptr);

  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = cuDevice;
  prop.requestedHandleTypes = kHandleType;
  prop.allocFlags.gpuDirectRDMACapable = rdma ? 1 : 0;
  size_t granularity = 0;
  MSCCLPP_TRY(
      cuStep(drv->cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
             "cuMemGetAllocationGranularity(GPU %d)", device));
  if (granularity == 0) granularity = 1;
  if (bytes > SIZE_MAX - (granularity - 1))
    return fail(Status::kCudaError, "cannot allocate %zu bytes of device memory: too large", bytes);
  const size_t size = (bytes + granularity - 1) / granularity * granularity;

  CUmemGenericAllocationHandle handle;
  CUresult result = drv->cuMemCreate(&handle, size, &prop, 0);
  if (result == CUDA_ERROR_NOT_SUPPORTED || result == CUDA_ERROR_NOT_PERMITTED) {
    // Some virtualised or restricted setups refuse exportable memory although the attributes say yes.
    MSCCLPP_INFO(kAlloc, "cuMemCreate(%zu bytes, GPU %d) refused (CUresult %d): using cudaMalloc", size,
                 device, static_cast<int>(result));
    return allocateWithCudaMalloc(bytes, ptr);
  }
  MSCCLPP_TRY(cuStep(result, "cuMemCreate(%zu bytes, GPU %d)", size, device));

  CUdeviceptr va = 0;
  result = drv->cuMemAddressReserve(&va, size, granularity, 0, 0);
  if (result != CUDA_SUCCESS) {
    drv->cuMemRelease(handle);
    return cuStep(result, "cuMemAddressReserve(%zu bytes)", size);
  }
  result = drv->cuMemMap(va, size, 0, handle, 0);
  if (result != CUDA_SUCCESS) {
    drv->cuMemAddressFree(va, size);
    drv->cuMemRelease(handle);
    return cuStep(result, "cuMemMap(%zu bytes, GPU %d)", size, device);
  }
  std::vector<CUmemAccessDesc> access = accessList(drv, device, cuDevice);
  result = drv->cuMemSetAccess(va, size, access.data(), access.size());
  if (result != CUDA_SUCCESS) {
    drv->cuMemUnmap(va, size);
    drv->cuMemAddressFree(va, size);
    drv->cuMemRelease(handle);
    return cuStep(result, "cuMemSetAccess(%zu bytes, GPU %d and %zu peers)", size, device, access.size() - 1);
  }
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    r.byBase[static_cast<uintptr_t>(va)] = Allocation{handle, size};
  }
  *ptr = reinterpret_cast<void*>(static_cast<uintptr_t>(va));
  MSCCLPP_INFO(kAlloc, "allocated %zu bytes (%zu requested) of exportable memory on GPU %d at %p", size,
               bytes, device, *ptr);
  return Status::kSuccess;
}

Status freeShareable(void* ptr) {
  if (ptr == nullptr) return Status::kSuccess;
  Allocation allocation{};
  bool ours = false;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.byBase.find(reinterpret_cast<uintptr_t>(ptr));
    if (it != r.byBase.end()) {
      allocation = it->second;
      r.byBase.erase(it);
      ours = true;
    }
  }
  if (!ours) {
    cudaError_t err = cudaFree(ptr);
    if (err == cudaSuccess) return Status::kSuccess;
    cudaGetLastError();
    return fail(Status::kCudaError, "cudaFree(%p) failed: %s (%s)", ptr, cudaGetErrorString(err),
                cudaGetErrorName(err));
  }
  const CudaDriver* drv = cudaDriverOrNull();  // loaded: the allocation came from it
  // Every step that can still succeed runs, so that as much as possible is returned; the first error
  // is reported. cuMemUnmap waits for work using the range, as cudaFree does.
  Status unmapped =
      cuStep(drv->cuMemUnmap(devptr(ptr), allocation.size), "cuMemUnmap(%p, %zu)", ptr, allocation.size);
  Status released = cuStep(drv->cuMemRelease(allocation.handle), "cuMemRelease(%p)", ptr);
  Status freed = Status::kSuccess;
  if (ok(unmapped))  // a reservation that is still mapped cannot be freed
    freed = cuStep(drv->cuMemAddressFree(devptr(ptr), allocation.size), "cuMemAddressFree(%p, %zu)", ptr,
                   allocation.size);
  return !ok(unmapped) ? unmapped : !ok(released) ? released : freed;
}

bool isShareableAllocation(const void* ptr, void** base, size_t* size) {
  if (ptr == nullptr) return false;
  const uintptr_t address = reinterpret_cast<uintptr_t>(ptr);
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    auto it = r.byBase.upper_bound(address);
    if (it != r.byBase.begin()) {
      --it;
      if (address - it->first < it->second.size) {
        if (base) *base = reinterpret_cast<void*>(it->first);
        if (size) *size = it->second.size;
        return true;
      }
    }
  }
  // Another allocator's cuMem memory (e.g. PyTorch's expandable segments) qualifies if it asked for
  // file-descriptor handles. cudaMalloc memory has no retainable handle.
  const CudaDriver* drv = cudaDriverOrNull();
  if (drv == nullptr) return false;
  CUmemGenericAllocationHandle handle;
  if (drv->cuMemRetainAllocationHandle(&handle, const_cast<void*>(ptr)) != CUDA_SUCCESS) return false;
  CUmemAllocationProp prop{};
  CUresult result = drv->cuMemGetAllocationPropertiesFromHandle(&prop, handle);
  drv->cuMemRelease(handle);
  if (result != CUDA_SUCCESS || !(prop.requestedHandleTypes & kHandleType)) return false;
  CUdeviceptr rangeBase = 0;
  size_t rangeSize = 0;
  if (drv->cuMemGetAddressRange(&rangeBase, &rangeSize, devptr(ptr)) != CUDA_SUCCESS) return false;
  if (base) *base = reinterpret_cast<void*>(static_cast<uintptr_t>(rangeBase));
  if (size) *size = rangeSize;
  return true;
}

Status exportShareable(const void* ptr, int* fd, size_t* offsetInAllocation, size_t* allocationSize) {
  if (ptr == nullptr || fd == nullptr || offsetInAllocation == nullptr || allocationSize == nullptr)
    return fail(Status::kInvalidArgument, "exportShareable: NULL argument");
  const CudaDriver* drv = nullptr;
  MSCCLPP_TRY(loadCudaDriver(&drv));
  void* base = nullptr;
  size_t size = 0;
  if (!isShareableAllocation(ptr, &base, &size))
    return fail(Status::kInvalidUsage,
                "%p is not exportable device memory (allocate it with ncclMemAlloc with cuMem enabled)", ptr);
  CUmemGenericAllocationHandle handle;
  MSCCLPP_TRY(cuStep(drv->cuMemRetainAllocationHandle(&handle, const_cast<void*>(ptr)),
                     "cuMemRetainAllocationHandle(%p)", ptr));
  int exported = -1;
  CUresult result = drv->cuMemExportToShareableHandle(&exported, handle, kHandleType, 0);
  drv->cuMemRelease(handle);  // drops the reference that Retain took
  MSCCLPP_TRY(cuStep(result, "cuMemExportToShareableHandle(%p, POSIX fd)", ptr));
  *fd = exported;
  *offsetInAllocation = reinterpret_cast<uintptr_t>(ptr) - reinterpret_cast<uintptr_t>(base);
  *allocationSize = size;
  return Status::kSuccess;
}

namespace {

// Imports one exported allocation and maps it at `va`. Does not close `fd`.
Status mapImportedPiece(const CudaDriver* drv, const ImportedPiece& piece, CUdeviceptr va) {
  CUmemGenericAllocationHandle handle;
  MSCCLPP_TRY(cuStep(drv->cuMemImportFromShareableHandle(
                         &handle, reinterpret_cast<void*>(static_cast<uintptr_t>(piece.fd)), kHandleType),
                     "cuMemImportFromShareableHandle(fd %d)", piece.fd));
  CUmemAllocationProp prop{};
  size_t granularity = 0;
  CUresult result = drv->cuMemGetAllocationPropertiesFromHandle(&prop, handle);
  if (result == CUDA_SUCCESS)
    result = drv->cuMemGetAllocationGranularity(&granularity, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM);
  if (result == CUDA_SUCCESS && (granularity == 0 || piece.bytes % granularity != 0)) {
    drv->cuMemRelease(handle);
    return fail(Status::kInvalidArgument,
                "importShareable: size %zu is not a multiple of the granularity %zu", piece.bytes,
                granularity);
  }
  if (result == CUDA_SUCCESS) result = drv->cuMemMap(va, piece.bytes, 0, handle, 0);
  drv->cuMemRelease(handle);  // the mapping (if any) keeps the memory alive
  return cuStep(result, "mapping imported allocation (fd %d, %zu bytes)", piece.fd, piece.bytes);
}

// Unmaps `count` pieces mapped side by side from `va`, then frees the reservation of `reserved` bytes.
Status unmapPieces(const CudaDriver* drv, CUdeviceptr va, const size_t* pieceBytes, size_t count,
                   size_t reserved) {
  Status status = Status::kSuccess;
  size_t total = 0;
  for (size_t i = 0; i < count; ++i) {
    const Status unmapped =
        cuStep(drv->cuMemUnmap(va + total, pieceBytes[i]), "cuMemUnmap(%p, %zu)",
               reinterpret_cast<void*>(static_cast<uintptr_t>(va + total)), pieceBytes[i]);
    if (ok(status)) status = unmapped;
    total += pieceBytes[i];
  }
  if (!ok(status)) return status;  // part is still mapped: freeing the reservation would fail too
  return cuStep(drv->cuMemAddressFree(va, reserved), "cuMemAddressFree(%p, %zu)",
                reinterpret_cast<void*>(static_cast<uintptr_t>(va)), reserved);
}

}  // namespace

Status importShareable(const std::vector<ImportedPiece>& pieces, void** mapped) {
  if (mapped == nullptr || pieces.empty())
    return fail(Status::kInvalidArgument, "importShareable: no pieces");
  *mapped = nullptr;
  size_t total = 0;
  for (const ImportedPiece& piece : pieces) {
    if (piece.fd < 0 || piece.bytes == 0)
      return fail(Status::kInvalidArgument, "importShareable: bad piece (fd %d, size %zu)", piece.fd,
                  piece.bytes);
    total += piece.bytes;
  }
  const CudaDriver* drv = nullptr;
  MSCCLPP_TRY(loadCudaDriver(&drv));
  int device = 0;
  CUdevice cuDevice;
  MSCCLPP_TRY(currentDevice(drv, &device, &cuDevice));
  // Aligned for the largest page size cuMem uses, so every piece lands on its granularity.
  constexpr size_t kReserveAlignment = 2 << 20;
  CUdeviceptr va = 0;
  MSCCLPP_TRY(cuStep(drv->cuMemAddressReserve(&va, total, kReserveAlignment, 0, 0),
                     "cuMemAddressReserve(%zu bytes)", total));
  std::vector<size_t> mappedBytes;
  Status status = Status::kSuccess;
  size_t offset = 0;
  for (const ImportedPiece& piece : pieces) {
    status = mapImportedPiece(drv, piece, va + offset);
    if (!ok(status)) break;
    mappedBytes.push_back(piece.bytes);
    offset += piece.bytes;
  }
  if (ok(status)) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = cuDevice;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    status = cuStep(drv->cuMemSetAccess(va, total, &access, 1), "cuMemSetAccess(imported, %zu bytes, GPU %d)",
                    total, device);
  }
  if (!ok(status)) {
    const std::string why = lastError();
    unmapPieces(drv, va, mappedBytes.data(), mappedBytes.size(), total);
    return fail(status, "%s", why.c_str());
  }
  *mapped = reinterpret_cast<void*>(static_cast<uintptr_t>(va));
  return Status::kSuccess;
}

Status unmapImported(void* mapped, const std::vector<size_t>& pieceBytes) {
  if (mapped == nullptr) return Status::kSuccess;
  const CudaDriver* drv = nullptr;
  MSCCLPP_TRY(loadCudaDriver(&drv));
  size_t total = 0;
  for (size_t bytes : pieceBytes) total += bytes;
  return unmapPieces(drv, devptr(mapped), pieceBytes.data(), pieceBytes.size(), total);
}

}  // namespace mscclpp_nccl
