// A window (ncclCommWindowRegister): a user buffer that every rank registers collectively and every
// other rank maps, so kernels can read and write peers' buffers directly (zero-copy).
//
// With NCCL_WIN_COLL_SYMMETRIC the caller promises that every rank's window has the same size and that
// a collective's buffers sit at the same offset in every rank's window: a peer's buffer is then its
// window's base here plus this rank's offset. How a peer's buffer is reached depends on its memory:
// same process: its pointer; cuMem memory exportable as a file descriptor (ncclMemAlloc): the
// descriptor, passed over a unix socket and mapped here; cudaMalloc memory: a CUDA IPC handle. Where any
// rank cannot map any peer, no rank uses the window for zero-copy (ranks must choose alike); the
// registration still succeeds and collectives copy through scratch as for any buffer.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

#include "native/bootstrap/bootstrap.h"
#include "native/common/status.h"
#include "native/transport/rank_info.h"

namespace mscclpp_nccl {

class SymmetricWindow {
 public:
  // Collective over the bootstrap. `symmetric`: the caller's NCCL_WIN_COLL_SYMMETRIC promise; without
  // it nothing is mapped.
  static Status create(Bootstrap& bootstrap, const Topology& topology, void* buffer, size_t bytes,
                       bool symmetric, std::unique_ptr<SymmetricWindow>* out);
  ~SymmetricWindow();
  SymmetricWindow(const SymmetricWindow&) = delete;
  SymmetricWindow& operator=(const SymmetricWindow&) = delete;

  void* local() const { return local_; }
  size_t bytes() const { return bytes_; }
  // Whether every rank mapped every peer's window (the same answer on every rank).
  bool mapped() const { return deviceTable_ != nullptr; }
  // Where mapped(): the smallest window any rank registered (the same on every rank), within which an
  // offset is valid in every peer's window; else bytes().
  size_t sharedBytes() const { return sharedBytes_; }
  // Whether [ptr, ptr + bytes) lies within sharedBytes() of the local window: where mapped(), every
  // rank, given the same offsets, decides alike and no peer's window is passed.
  bool contains(const void* ptr, size_t bytes) const;
  // Device array of every rank's window base as mapped here (own entry is local()); null if !mapped().
  char* const* devicePeerTable() const { return deviceTable_; }
  // Rank `rank`'s window base as mapped here (meaningful where mapped()).
  char* peerBase(int rank) const { return peers_[rank].base; }

 private:
  SymmetricWindow() = default;
  Status mapPeers(Bootstrap& bootstrap, const Topology& topology, bool* mappedAll);
  void unmapPeers();

  void* local_ = nullptr;
  size_t bytes_ = 0;
  size_t sharedBytes_ = 0;
  struct PeerMapping {
    char* base = nullptr;     // the peer's window base as mapped here
    void* mapping = nullptr;  // what to undo: an IPC mapping or an imported range (else null)
    size_t mappingBytes = 0;  // imported range size (0: IPC mapping)
  };
  std::vector<PeerMapping> peers_;
  char** deviceTable_ = nullptr;
};

}  // namespace mscclpp_nccl
