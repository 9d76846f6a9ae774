// Device memory that every rank of a communicator allocates and every other rank maps, cut into regions
// that each rank lays out alike.
//
// One allocation and one mapping per peer serve every region: a peer's region is its buffer's base plus
// the region's offset. Ranks in one process use each other's pointers directly (a process cannot open
// its own IPC handle); ranks in other processes on the host open a CUDA IPC handle (which also works
// between processes sharing one GPU, under MPS or not). Creation is collective over the bootstrap.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "native/bootstrap/bootstrap.h"
#include "native/common/status.h"
#include "native/transport/rank_info.h"

namespace mscclpp_nccl {

// Lets `device` reach `peerDevice`'s memory directly (ranks of one process on different GPUs); a no-op
// for one device.
Status enablePeerAccess(int device, int peerDevice);

class PeerBuffer {
 public:
  // Allocates one zeroed buffer on the current device holding region i of `regionBytes[i]` bytes (0: the
  // region is absent), each at a page-aligned offset, and maps every peer's.
  static Status create(Bootstrap& bootstrap, const Topology& topology, const std::vector<size_t>& regionBytes,
                       std::unique_ptr<PeerBuffer>* out);
  ~PeerBuffer();
  PeerBuffer(const PeerBuffer&) = delete;
  PeerBuffer& operator=(const PeerBuffer&) = delete;

  bool has(int region) const { return bytes_[region] > 0; }
  size_t bytes(int region) const { return bytes_[region]; }
  void* local(int region) const { return at(local_, region); }
  // Rank `rank`'s region as mapped in this process.
  void* peer(int region, int rank) const { return at(peers_[rank], region); }
  // Device array of every rank's region as mapped in this process (own entry is local(region)).
  void* const* devicePeerTable(int region) const {
    return deviceTable_ + static_cast<size_t>(region) * nranks_;
  }
  // Device memory it holds here: the buffer and its tables of peers.
  size_t deviceBytes() const { return total_ + sizeof(void*) * offsets_.size() * nranks_; }

 private:
  PeerBuffer() = default;
  void* at(void* base, int region) const {
    return bytes_[region] > 0 ? static_cast<char*>(base) + offsets_[region] : nullptr;
  }

  void* local_ = nullptr;
  size_t total_ = 0;
  int nranks_ = 0;
  std::vector<size_t> offsets_;
  std::vector<size_t> bytes_;
  std::vector<void*> peers_;  // every rank's buffer as mapped here
  std::vector<bool> openedByIpc_;
  void** deviceTable_ = nullptr;  // [region][rank]
};

}  // namespace mscclpp_nccl
