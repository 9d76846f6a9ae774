// Zero-copy without windows (design: DESIGN-zero-copy.md): the allocations that this rank's
// large collectives use are exported to the peers the first time they appear, and the peers' are mapped
// here as they arrive, so that kernels can read and write the users' buffers on every rank directly.
//
// Nothing waits on the critical path. A call describes its buffers (allocation index, offset) and says
// whether every peer has acknowledged mapping them ("ready"); the kernel exchanges these descriptions
// and takes the zero-copy path only when every rank's are ready, so all ranks choose alike
// (algorithms/zero_copy.h). A helper thread maps what the peers export and acknowledges it; a recurring
// buffer goes zero-copy from its second or third use. Inside CUDA graph capture the call waits (briefly,
// bounded) for the acknowledgements instead, since the captured description is replayed for the graph's
// life.
//
// Identity is CUDA's buffer id, never reused in a process: an address freed and allocated again is a new
// allocation with a new index generation, and the old mapping is retired (allocation_registry.h). The
// helper thread also looks for freed allocations a few times a second and retires them, so that the
// peers close their mappings and the memory goes back to the driver without waiting for another call.
//
// cudaMalloc memory is shared through CUDA IPC; cuMem memory (ncclMemAlloc, PyTorch's expandable
// segments) through a POSIX file descriptor that each peer fetches from this process's descriptor
// server (descriptor_server.h). Memory neither can share (managed, host, cudaMallocAsync pools, cuMem
// without descriptor handles) is never ready: scratch serves it, and NCCL_DEBUG=INFO says why once.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "native/bootstrap/bootstrap.h"
#include "native/common/status.h"
#include "native/transport/allocation_registry.h"
#include "native/transport/mapped_buffers.h"
#include "native/transport/rank_info.h"

namespace mscclpp_nccl {

struct AllocationMessage;  // the protocol's messages (mapped_allocations.cc)
struct RunPieceOffer;

class MappedAllocations {
 public:
  // Collective only in that every rank creates one (no exchange). Starts the helper thread.
  static Status create(Bootstrap& bootstrap, const Topology& topology, int device,
                       std::unique_ptr<MappedAllocations>* out);
  // Closes the mappings; the caller has stopped() this first and drained the kernels that use them.
  ~MappedAllocations();
  MappedAllocations(const MappedAllocations&) = delete;
  MappedAllocations& operator=(const MappedAllocations&) = delete;

  // Ends the helper thread. The owner calls it before the bootstrap goes; later calls (the destructor's)
  // do nothing.
  void stop();

  // Describes `ptr` (`bytes` long) for call number `call`: its allocation's index and the offset in it,
  // exporting the allocation first if it is new. `captured`: the call is being captured into a graph,
  // which holds the index for its life: the allocation is pinned, and the call waits up to
  // `waitSeconds` for every peer to map it. False when the memory cannot be shared (or no index is free);
  // *out is then left not ready.
  bool describe(const void* ptr, size_t bytes, uint64_t call, bool captured, double waitSeconds,
                MappedBuffer* out);
  // ncclCommRegister: exports the allocation that holds `ptr` now, so that peers have mapped it by the
  // first call that uses it, and keeps it until unregister(). False where it cannot be shared.
  bool registerBuffer(const void* ptr, size_t bytes);
  // ncclCommDeregister of what registerBuffer(ptr, bytes) registered: the allocation is no longer held
  // for the registration, and unless a graph holds it, it is retired (every peer closes its mapping) once
  // this rank's queued calls are done.
  void unregisterBuffer(const void* ptr, size_t bytes);
  // ncclMemAlloc: memory allocated for NCCL's use is exported by every communicator of this process on the
  // current device at once, as its first call would export it (never held: the least recently used index
  // when room is needed), so that the peers have mapped it before the first large call on it.
  static void offerToAll(const void* ptr, size_t bytes);
  // After an eager call's kernels that used described buffers, on their stream: retiring an allocation
  // for room waits for them, so no queued kernel reaches a peer's slot after it changes.
  void markUsed(cudaStream_t stream);

  // Device array [nranks][kMaxMappedAllocations]: every peer's allocations as mapped here.
  const MappedRegion* deviceTable() const { return deviceTable_; }
  // Device memory of the table (the mapped allocations are the peers').
  size_t deviceBytes() const { return sizeof(MappedRegion) * kMaxMappedAllocations * nranks_; }

 private:
  struct Slot {
    void* mapping = nullptr;           // what this process opened (null: nothing, or a same-process pointer)
    std::vector<size_t> mappedPieces;  // nonempty: `mapping` holds imported cuMem allocations of these sizes
    uint32_t generation = 0;
  };
  MappedAllocations(Bootstrap& bootstrap, const Topology& topology, int device);
  // The allocation that holds [ptr, ptr + bytes) and how peers can map it; false (and why) if none can.
  static bool identify(const void* ptr, size_t bytes, AllocationKey* key, const char** why);
  // offerToAll's export of the allocation `key` names, for this communicator.
  void offer(const AllocationKey& key);
  // Registers the allocation of `key` for `call` and exports it if new; the events go to the peers.
  bool use(const AllocationKey& key, uint64_t call, RegistryUse how, std::unique_lock<std::mutex>* lock,
           uint16_t* index);
  void serve();
  void retireFreedAllocations();
  void mapPeerAllocation(int peer, const AllocationMessage& message,
                         const std::vector<RunPieceOffer>& pieces);
  bool importPeerDescriptors(int peer, const AllocationMessage& message,
                             const std::vector<RunPieceOffer>& pieces, Slot* slot);
  void offerDescriptors(const RegistryEvent& event, AllocationMessage* message,
                        std::vector<RunPieceOffer>* pieces);
  void unmapSlot(int peer, uint16_t index);
  bool writeTableEntry(int peer, uint16_t index, const MappedRegion& region);
  void announce(const RegistryEvent& event);
  void noteUnshared(const char* why);

  Bootstrap& bootstrap_;
  const Topology& topology_;
  const int device_;
  const int rank_;
  const int nranks_;
  MappedRegion* deviceTable_ = nullptr;
  cudaStream_t copyStream_ = nullptr;    // table writes; non-blocking, so it never waits for users' streams
  cudaEvent_t lastUse_ = nullptr;        // the latest eager call that used described buffers
  MappedRegion* hostStaging_ = nullptr;  // pinned source of those writes
  std::vector<int32_t> remotePids_;      // the peers' processes other than this one (descriptor passing)

  std::mutex mu_;  // guards what the owner and the helper both touch: registry_, acks_, offers_
  std::condition_variable acked_;
  AllocationRegistry registry_{kMaxMappedAllocations};
  std::vector<uint32_t> ackGeneration_;  // [index]: the generation the acks below count
  std::vector<int> acks_;                // [index]: peers that mapped it
  struct Offered {
    std::vector<uint64_t> tokens;  // one per allocation (a run's pieces); empty: none
    uint32_t generation = 0;
  };
  std::vector<Offered> offers_;               // [index]: its descriptor offers
  std::atomic<uint32_t> unsharedReasons_{0};  // reasons already logged (noteUnshared)
  std::vector<std::vector<Slot>> peerSlots_;  // [peer][index], helper thread only
  std::thread helper_;
  bool stopping_ = false;
};

}  // namespace mscclpp_nccl
