#include "native/transport/peer_buffer.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "native/common/arithmetic.h"
#include "native/common/logging.h"
#include "native/transport/cuda_check.h"
#include "native/transport/setup_copy.h"

namespace mscclpp_nccl {
namespace {

// Regions start on their own page, so that each keeps any alignment a kernel asks of its slots.
constexpr size_t kRegionAlignment = 4096;
// cudaMalloc hands out large buffers in whole 2 MiB pages: asking for the last page whole makes
// deviceBytes() what cudaMemGetInfo sees (ncclCommMemStats).
constexpr size_t kDevicePageBytes = 2 << 20;

struct ExportedBuffer {
  cudaIpcMemHandle_t handle;
  uint64_t address;
};

}  // namespace

Status enablePeerAccess(int device, int peerDevice) {
  if (device == peerDevice) return Status::kSuccess;
  int canAccess = 0;
  MSCCLPP_CUDA_TRY(cudaDeviceCanAccessPeer(&canAccess, device, peerDevice));
  if (!canAccess)
    return fail(Status::kInvalidUsage, "GPU %d cannot access GPU %d directly; no native path between them",
                device, peerDevice);
  cudaError_t err = cudaDeviceEnablePeerAccess(peerDevice, 0);
  if (err == cudaErrorPeerAccessAlreadyEnabled) {
    cudaGetLastError();
    return Status::kSuccess;
  }
  MSCCLPP_CUDA_TRY(err);
  return Status::kSuccess;
}

Status PeerBuffer::create(Bootstrap& bootstrap, const Topology& topology,
                          const std::vector<size_t>& regionBytes, std::unique_ptr<PeerBuffer>* out) {
  std::unique_ptr<PeerBuffer> buffer(new PeerBuffer());
  const int rank = bootstrap.rank();
  const int nranks = bootstrap.size();
  buffer->nranks_ = nranks;
  buffer->bytes_ = regionBytes;
  for (size_t bytes : regionBytes) {
    buffer->offsets_.push_back(buffer->total_);
    buffer->total_ += roundUp(bytes, kRegionAlignment);
  }
  buffer->total_ = roundUp(buffer->total_, kDevicePageBytes);
  MSCCLPP_CUDA_TRY(cudaMalloc(&buffer->local_, std::max<size_t>(buffer->total_, 1)));
  MSCCLPP_TRY(zeroDeviceMemory(buffer->local_, buffer->total_));

  std::vector<ExportedBuffer> exported(nranks);
  memset(exported.data(), 0, sizeof(ExportedBuffer) * nranks);
  MSCCLPP_CUDA_TRY(cudaIpcGetMemHandle(&exported[rank].handle, buffer->local_));
  exported[rank].address = reinterpret_cast<uint64_t>(buffer->local_);
  MSCCLPP_TRY(bootstrap.allGather(exported.data(), sizeof(ExportedBuffer)));

  buffer->peers_.assign(nranks, nullptr);
  buffer->openedByIpc_.assign(nranks, false);
  for (int peer = 0; peer < nranks; ++peer) {
    if (peer == rank) {
      buffer->peers_[peer] = buffer->local_;
    } else if (topology.sameProcess(rank, peer)) {
      MSCCLPP_TRY(enablePeerAccess(topology.ranks[rank].cudaDevice, topology.ranks[peer].cudaDevice));
      buffer->peers_[peer] = reinterpret_cast<void*>(exported[peer].address);
    } else {
      MSCCLPP_CUDA_TRY(
          cudaIpcOpenMemHandle(&buffer->peers_[peer], exported[peer].handle, cudaIpcMemLazyEnablePeerAccess));
      buffer->openedByIpc_[peer] = true;
    }
  }
  std::vector<void*> table;
  for (size_t region = 0; region < regionBytes.size(); ++region)
    for (int r = 0; r < nranks; ++r) table.push_back(buffer->peer(static_cast<int>(region), r));
  const size_t tableBytes = sizeof(void*) * table.size();
  MSCCLPP_CUDA_TRY(cudaMalloc(&buffer->deviceTable_, std::max<size_t>(tableBytes, 1)));
  MSCCLPP_TRY(copyToDevice(buffer->deviceTable_, table.data(), tableBytes));
  *out = std::move(buffer);
  return Status::kSuccess;
}

PeerBuffer::~PeerBuffer() {
  // Errors are ignored here: teardown must finish even when the device is in a bad state.
  for (size_t peer = 0; peer < peers_.size(); ++peer)
    if (openedByIpc_[peer]) cudaIpcCloseMemHandle(peers_[peer]);
  if (deviceTable_) cudaFree(deviceTable_);
  if (local_) cudaFree(local_);
  cudaGetLastError();
}

}  // namespace mscclpp_nccl
