// Device memory that other processes can map (ncclMemAlloc / ncclMemFree), and the helpers that
// zero-copy paths use to share it.
//
// Where the device supports virtual memory management and POSIX file-descriptor handles, memory comes
// from cuMemCreate (exportable as a file descriptor, passed to another process over a unix socket) and
// is mapped read/write for this device and every device with peer access to it. Elsewhere, or with
// NCCL_CUMEM_ENABLE=0 (stock NCCL's switch), it comes from cudaMalloc. Note that legacy CUDA IPC
// (cudaIpcGetMemHandle) does not work on cuMem memory: share it through exportShareable.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "native/common/status.h"

namespace mscclpp_nccl {

// Allocates at least `bytes` on the current device. `bytes == 0` gives *ptr = nullptr.
Status allocateShareable(size_t bytes, void** ptr);
// Frees what allocateShareable returned (nullptr is a no-op); other pointers go to cudaFree.
Status freeShareable(void* ptr);

// Whether `ptr` lies in cuMem memory exportable as a POSIX file descriptor (ours, or another
// allocator's); if so, optionally the base and size of the mapped allocation that contains it.
// Records no error.
bool isShareableAllocation(const void* ptr, void** base = nullptr, size_t* size = nullptr);

// Exports the allocation that contains `ptr` as a new file descriptor (the caller owns and closes it),
// with `ptr`'s offset in that allocation and the allocation's size (what importShareable needs).
Status exportShareable(const void* ptr, int* fd, size_t* offsetInAllocation, size_t* allocationSize);
// One allocation exported by exportShareable (possibly in another process): its descriptor and size.
struct ImportedPiece {
  int fd;
  size_t bytes;
};
// Maps `pieces` side by side, in order, in one range on the current device (a buffer that spans several
// allocations stays contiguous). Closes no descriptor. Undo with unmapImported(*mapped, their sizes).
Status importShareable(const std::vector<ImportedPiece>& pieces, void** mapped);
Status unmapImported(void* mapped, const std::vector<size_t>& pieceBytes);

}  // namespace mscclpp_nccl
