// A device buffer that every rank of a communicator allocates and every other rank maps.
//
// Ranks in one process use each other's pointers directly (a process cannot open its own IPC
// handle); ranks in other processes on the host open a CUDA IPC handle (which also works between
// processes sharing one GPU, under MPS or not). Creation is collective over the bootstrap.
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
  // Allocates `bytes` (zeroed) on the current device and maps every peer's buffer.
  static Status create(Bootstrap& bootstrap, const Topology& topology, size_t bytes,
                       std::unique_ptr<PeerBuffer>* out);
  ~PeerBuffer();
  PeerBuffer(const PeerBuffer&) = delete;
  PeerBuffer& operator=(const PeerBuffer&) = delete;

  void* local() const { return local_; }
  size_t bytes() const { return bytes_; }
  // Device memory it holds here: the buffer and its table of peers.
  size_t deviceBytes() const { return bytes_ + sizeof(void*) * peers_.size(); }
  // Rank `rank`'s buffer as mapped in this process.
  void* peer(int rank) const { return peers_[rank]; }
  // Device array of every rank's buffer as mapped in this process (own entry is local()).
  void* const* devicePeerTable() const { return deviceTable_; }

 private:
  PeerBuffer() = default;

  void* local_ = nullptr;
  size_t bytes_ = 0;
  std::vector<void*> peers_;
  std::vector<bool> openedByIpc_;
  void** deviceTable_ = nullptr;
};

}  // namespace mscclpp_nccl
