// The allocations of one rank that its peers may map, for zero-copy without windows (design:
// native/transport/DESIGN-zero-copy.md). Pure bookkeeping, CUDA-free: the caller looks up an
// allocation's identity (CU_POINTER_ATTRIBUTE_BUFFER_ID and its range) and carries out the events, which
// say what to announce to the peers (transport/mapped_allocations.h).
//
// An allocation gets a small index, which kernels use to find the peers' mappings of it. Identity is the
// buffer id, which CUDA never reuses in a process, so an address that was freed and allocated again is a
// new allocation: the old one is retired, and a peer never reaches memory through a stale mapping.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <unordered_map>
#include <vector>

namespace mscclpp_nccl {

// One of the allocations mapped side by side under a buffer that spans several (a run).
struct AllocationPiece {
  uint64_t bufferId;
  size_t bytes;  // its extent; the next piece starts where it ends
};

struct AllocationKey {
  uint64_t bufferId;  // a run's: one that no allocation has (see AllocationPiece)
  uintptr_t base;     // start of the allocation (of a run: of its first piece)
  size_t bytes;       // its extent
  uint32_t sharing;   // how peers map it: the caller's, carried along
  // A run's pieces, in address order; empty for a single allocation. Runs may share pieces (two tensors
  // that cross the same boundary), so a run never retires another for overlapping it: the caller finds
  // freed pieces instead.
  std::vector<AllocationPiece> pieces;
};

// Why an allocation is used: for one call, for a call captured into a CUDA graph (which may hold its
// index for as long as it lives), or for a registration (ncclCommRegister), held until unregistered.
enum class RegistryUse { kCall, kCaptured, kRegistered };

struct RegistryEvent {
  enum class Kind { kExport, kRetire };
  Kind kind;
  uint16_t index;
  uint32_t generation;  // bumped each time an index is given to another allocation
  AllocationKey key;
};

class AllocationRegistry {
 public:
  // What use() returns when the registry is full of allocations that graphs or registrations hold.
  static constexpr uint16_t kNoIndex = 0xffff;

  explicit AllocationRegistry(uint16_t capacity) : capacity_(capacity) {}

  // The index of `key`'s allocation, used by call number `call`. A new allocation is exported; one whose
  // range overlaps single allocations registered before retires them (they were freed); at capacity, the
  // least recently used allocation that is held by neither a graph nor a registration is retired first
  // (kNoIndex: none is, nothing changes). What the peers must learn is appended to `events`, in order.
  uint16_t use(const AllocationKey& key, uint64_t call, RegistryUse how, std::vector<RegistryEvent>* events);
  // Ends the registration of allocation `bufferId`; it is retired unless a graph holds it.
  void unregister(uint64_t bufferId, std::vector<RegistryEvent>* events);
  // Retires allocation `bufferId` (its memory was freed).
  void forget(uint64_t bufferId, std::vector<RegistryEvent>* events) { retire(bufferId, events); }
  // Every registered allocation.
  std::vector<AllocationKey> allocations() const;
  // Whether use(key) would retire a live allocation for room (callers make sure no queued work still
  // reaches it through the peers' mappings first).
  bool wouldEvict(const AllocationKey& key) const;

  // The index and generation of a registered allocation.
  bool find(uint64_t bufferId, uint16_t* index, uint32_t* generation) const;
  // The generation of an index that use() returned.
  uint32_t generationOf(uint16_t index) const { return generations_[index]; }
  size_t size() const { return byId_.size(); }

 private:
  struct Entry {
    AllocationKey key;
    uint16_t index;
    uint32_t generation;
    uint64_t lastCall;
    bool captured;    // a graph holds it
    bool registered;  // a registration holds it
  };
  // The least recently used allocation that nothing holds (byId_.end(): none).
  std::unordered_map<uint64_t, Entry>::const_iterator leastRecentlyUsed() const;
  void retire(uint64_t bufferId, std::vector<RegistryEvent>* events);

  uint16_t capacity_;
  std::unordered_map<uint64_t, Entry> byId_;
  std::map<uintptr_t, uint64_t> byBase_;  // base -> buffer id of single allocations, for overlap
  std::vector<uint16_t> freeIndices_;
  std::vector<uint32_t> generations_;  // per index ever handed out
};

}  // namespace mscclpp_nccl
