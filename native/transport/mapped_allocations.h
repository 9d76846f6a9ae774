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
// allocation with a new index generation, and the old mapping is retired (allocation_registry.h).
// Memory that CUDA IPC cannot share (cuMem/VMM, managed or host memory) is never ready: scratch serves it.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "native/algorithms/zero_copy.h"
#include "native/bootstrap/bootstrap.h"
#include "native/common/status.h"
#include "native/transport/allocation_registry.h"
#include "native/transport/rank_info.h"

namespace mscclpp_nccl {

class MappedAllocations {
 public:
  // Collective only in that every rank creates one (no exchange). Starts the helper thread.
  static Status create(Bootstrap& bootstrap, const Topology& topology, int device,
                       std::unique_ptr<MappedAllocations>* out);
  // Closes the mappings; the caller has stopped() this first and drained the kernels that use them.
  ~MappedAllocations();
  MappedAllocations(const MappedAllocations&) = delete;
  MappedAllocations& operator=(const MappedAllocations&) = delete;

  // Ends the helper thread (before the bootstrap goes).
  void stop();

  // Describes `ptr` (`bytes` long) for call number `call`: its allocation's index and the offset in it,
  // exporting the allocation first if it is new. `captured`: the call is being captured into a graph,
  // which holds the index for its life: the allocation is pinned, and the call waits up to
  // `waitSeconds` for every peer to map it. False when the memory cannot be shared (or no index is free);
  // *out is then left not ready.
  bool describe(const void* ptr, size_t bytes, uint64_t call, bool captured, double waitSeconds,
                MappedBuffer* out);
  // After an eager call's kernels that used described buffers, on their stream: retiring an allocation
  // for room waits for them, so no queued kernel reaches a peer's slot after it changes.
  void markUsed(cudaStream_t stream);

  // Device array [nranks][kMaxMappedAllocations]: every peer's allocations as mapped here.
  char* const* deviceTable() const { return deviceTable_; }

 private:
  struct Slot {
    void* mapping = nullptr;  // what this process opened (null: nothing, or a same-process pointer)
    uint32_t generation = 0;
  };
  MappedAllocations(Bootstrap& bootstrap, const Topology& topology, int device);
  void serve();
  void mapPeerAllocation(int peer, const struct AllocationMessage& message);
  void unmapSlot(int peer, uint16_t index);
  bool writeTableEntry(int peer, uint16_t index, char* base);
  void announce(const RegistryEvent& event);

  Bootstrap& bootstrap_;
  const Topology& topology_;
  const int device_;
  const int rank_;
  const int nranks_;
  char** deviceTable_ = nullptr;
  cudaStream_t copyStream_ = nullptr;  // table writes; non-blocking, so it never waits for users' streams
  cudaEvent_t lastUse_ = nullptr;      // the latest eager call that used described buffers
  char** hostStaging_ = nullptr;       // pinned source of those writes

  std::mutex mu_;  // guards what the owner and the helper both touch: registry_, acks_
  std::condition_variable acked_;
  AllocationRegistry registry_{kMaxMappedAllocations};
  std::vector<uint32_t> ackGeneration_;       // [index]: the generation the acks below count
  std::vector<int> acks_;                     // [index]: peers that mapped it
  std::vector<std::vector<Slot>> peerSlots_;  // [peer][index], helper thread only
  std::thread helper_;
  bool stopping_ = false;
};

}  // namespace mscclpp_nccl
