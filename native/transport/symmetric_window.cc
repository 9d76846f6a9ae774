#include "native/transport/symmetric_window.h"

#include <cuda_runtime.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "native/common/logging.h"
#include "native/transport/cuda_check.h"
#include "native/transport/cuda_driver.h"
#include "native/transport/device_memory.h"
#include "native/transport/fd_passing.h"
#include "native/transport/peer_buffer.h"
#include "native/transport/setup_copy.h"

namespace mscclpp_nccl {
namespace {

enum class Reach : int32_t { kNone, kFd, kIpc };

struct Exported {
  uint64_t address;          // the window in its owner's process
  uint64_t offset;           // of the window in its allocation
  uint64_t allocationBytes;  // of that allocation (what an imported descriptor maps)
  uint64_t windowBytes;      // of the window as its owner registered it
  cudaIpcMemHandle_t ipc;
  Reach reach;
};

// How peers in other processes can reach `buffer`; *fd is set for Reach::kFd (the caller closes it).
Reach exportWindow(void* buffer, Exported* out, int* fd) {
  *fd = -1;
  size_t offset = 0, allocationBytes = 0;
  if (isShareableAllocation(buffer)) {
    if (ok(exportShareable(buffer, fd, &offset, &allocationBytes))) {
      out->offset = offset;
      out->allocationBytes = allocationBytes;
      return Reach::kFd;
    }
    return Reach::kNone;
  }
  // cudaMalloc memory: the IPC handle names the allocation, so send the window's offset in it.
  const CudaDriver* drv = cudaDriverOrNull();
  CUdeviceptr base = 0;
  size_t size = 0;
  if (drv == nullptr ||
      drv->cuMemGetAddressRange(
          &base, &size, static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(buffer))) != CUDA_SUCCESS)
    return Reach::kNone;
  if (cudaIpcGetMemHandle(&out->ipc, reinterpret_cast<void*>(static_cast<uintptr_t>(base))) != cudaSuccess) {
    cudaGetLastError();
    return Reach::kNone;
  }
  out->offset = reinterpret_cast<uintptr_t>(buffer) - static_cast<uintptr_t>(base);
  return Reach::kIpc;
}

}  // namespace

Status SymmetricWindow::create(Bootstrap& bootstrap, const Topology& topology, void* buffer, size_t bytes,
                               bool symmetric, std::unique_ptr<SymmetricWindow>* out) {
  std::unique_ptr<SymmetricWindow> window(new SymmetricWindow());
  window->local_ = buffer;
  window->bytes_ = bytes;
  window->sharedBytes_ = bytes;  // until mapPeers learns the peers'
  // Whether ranks map depends on the flag every rank passed: agree on it first.
  std::vector<int32_t> wants(bootstrap.size());
  wants[bootstrap.rank()] = symmetric && buffer != nullptr && bytes > 0;
  MSCCLPP_TRY(bootstrap.allGather(wants.data(), sizeof(int32_t)));
  bool everyone = true;
  for (int32_t w : wants) everyone = everyone && w;
  if (everyone) {
    bool mappedAll = false;
    MSCCLPP_TRY(window->mapPeers(bootstrap, topology, &mappedAll));
    MSCCLPP_INFO(kInit, "window %p (%zu bytes): %s", buffer, bytes,
                 mappedAll ? "every rank maps every peer's: zero-copy collectives"
                           : "not every peer's could be mapped: collectives copy through scratch");
  }
  *out = std::move(window);
  return Status::kSuccess;
}

Status SymmetricWindow::mapPeers(Bootstrap& bootstrap, const Topology& topology, bool* mappedAll) {
  const int rank = bootstrap.rank(), nranks = bootstrap.size();
  std::vector<Exported> exported(nranks);
  memset(exported.data(), 0, sizeof(Exported) * nranks);
  int fd = -1;
  exported[rank].reach = exportWindow(local_, &exported[rank], &fd);
  exported[rank].address = reinterpret_cast<uintptr_t>(local_);
  exported[rank].windowBytes = bytes_;
  Status status = bootstrap.allGather(exported.data(), sizeof(Exported));
  std::vector<int> fds;
  if (ok(status)) status = exchangeFds(bootstrap, topology, fd, &fds);
  if (fd >= 0) close(fd);
  MSCCLPP_TRY(status);

  peers_.assign(nranks, PeerMapping{});
  int32_t mine = 1;
  for (int peer = 0; peer < nranks; ++peer) {
    const Exported& e = exported[peer];
    PeerMapping& m = peers_[peer];
    if (peer == rank) {
      m.base = static_cast<char*>(local_);
    } else if (topology.sameProcess(rank, peer)) {
      if (ok(enablePeerAccess(topology.ranks[rank].cudaDevice, topology.ranks[peer].cudaDevice)))
        m.base = reinterpret_cast<char*>(e.address);
    } else if (e.reach == Reach::kFd && fds[peer] >= 0) {
      if (ok(importShareable({{fds[peer], e.allocationBytes}}, &m.mapping))) {
        m.mappingBytes = e.allocationBytes;
        m.base = static_cast<char*>(m.mapping) + e.offset;
      }
    } else if (e.reach == Reach::kIpc) {
      if (cudaIpcOpenMemHandle(&m.mapping, e.ipc, cudaIpcMemLazyEnablePeerAccess) == cudaSuccess)
        m.base = static_cast<char*>(m.mapping) + e.offset;
      else
        cudaGetLastError();
    }
    if (fds[peer] >= 0) close(fds[peer]);
    mine = mine && m.base != nullptr;
  }
  std::vector<int32_t> mappedBy(nranks);
  mappedBy[rank] = mine;
  MSCCLPP_TRY(bootstrap.allGather(mappedBy.data(), sizeof(int32_t)));
  *mappedAll = true;
  for (int32_t m : mappedBy) *mappedAll = *mappedAll && m;
  if (!*mappedAll) {
    unmapPeers();
    return Status::kSuccess;
  }
  for (const Exported& e : exported) sharedBytes_ = std::min<size_t>(sharedBytes_, e.windowBytes);
  std::vector<char*> bases(nranks);
  for (int peer = 0; peer < nranks; ++peer) bases[peer] = peers_[peer].base;
  MSCCLPP_CUDA_TRY(cudaMalloc(&deviceTable_, sizeof(char*) * nranks));
  MSCCLPP_TRY(copyToDevice(deviceTable_, bases.data(), sizeof(char*) * nranks));
  return Status::kSuccess;
}

void SymmetricWindow::unmapPeers() {
  // Teardown must finish even when the device is in a bad state: errors are ignored.
  for (PeerMapping& m : peers_) {
    if (m.mapping && m.mappingBytes > 0)
      unmapImported(m.mapping, {m.mappingBytes});
    else if (m.mapping)
      cudaIpcCloseMemHandle(m.mapping);
    m = PeerMapping{};
  }
  if (deviceTable_) cudaFree(deviceTable_);
  deviceTable_ = nullptr;
  cudaGetLastError();
}

SymmetricWindow::~SymmetricWindow() { unmapPeers(); }

bool SymmetricWindow::contains(const void* ptr, size_t bytes) const {
  const uintptr_t start = reinterpret_cast<uintptr_t>(local_), address = reinterpret_cast<uintptr_t>(ptr);
  return address >= start && address - start <= sharedBytes_ && bytes <= sharedBytes_ - (address - start);
}

}  // namespace mscclpp_nccl
