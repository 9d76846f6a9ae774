#include "native/transport/allocation_registry.h"

#include <algorithm>

namespace mscclpp_nccl {

void AllocationRegistry::retire(uint64_t bufferId, std::vector<RegistryEvent>* events) {
  auto it = byId_.find(bufferId);
  if (it == byId_.end()) return;
  const Entry& entry = it->second;
  events->push_back({RegistryEvent::Kind::kRetire, entry.index, entry.generation, entry.key});
  freeIndices_.push_back(entry.index);
  if (entry.key.pieces.empty()) byBase_.erase(entry.key.base);
  byId_.erase(it);
}

std::unordered_map<uint64_t, AllocationRegistry::Entry>::const_iterator
AllocationRegistry::leastRecentlyUsed() const {
  auto oldest = byId_.end();
  for (auto it = byId_.begin(); it != byId_.end(); ++it)
    if (!it->second.captured && !it->second.registered &&
        (oldest == byId_.end() || it->second.lastCall < oldest->second.lastCall))
      oldest = it;
  return oldest;
}

bool AllocationRegistry::wouldEvict(const AllocationKey& key) const {
  return byId_.count(key.bufferId) == 0 && byId_.size() >= capacity_;
}

uint16_t AllocationRegistry::use(const AllocationKey& key, uint64_t call, RegistryUse how,
                                 std::vector<RegistryEvent>* events) {
  const bool captured = how == RegistryUse::kCaptured, registered = how == RegistryUse::kRegistered;
  auto found = byId_.find(key.bufferId);
  if (found != byId_.end()) {
    found->second.lastCall = call;
    found->second.captured = found->second.captured || captured;
    found->second.registered = found->second.registered || registered;
    return found->second.index;
  }
  // Single allocations registered before whose range meets this one's were freed (CUDA handed their
  // memory out again).
  if (key.pieces.empty()) {
    std::vector<uint64_t> stale;
    auto next = byBase_.lower_bound(key.base);
    for (auto it = next; it != byBase_.end() && it->first < key.base + key.bytes; ++it)
      stale.push_back(it->second);
    if (next != byBase_.begin()) {
      const Entry& before = byId_.at(std::prev(next)->second);
      if (before.key.base + before.key.bytes > key.base) stale.push_back(before.key.bufferId);
    }
    for (uint64_t id : stale) retire(id, events);
  }
  if (byId_.size() >= capacity_) {
    auto oldest = leastRecentlyUsed();
    if (oldest == byId_.end()) return kNoIndex;
    retire(oldest->first, events);
  }
  uint16_t index;
  if (!freeIndices_.empty()) {
    // The lowest free index, so that indices stay small and reuse is predictable.
    auto lowest = std::min_element(freeIndices_.begin(), freeIndices_.end());
    index = *lowest;
    freeIndices_.erase(lowest);
    ++generations_[index];
  } else {
    index = static_cast<uint16_t>(generations_.size());
    generations_.push_back(0);
  }
  byId_[key.bufferId] = Entry{key, index, generations_[index], call, captured, registered};
  if (key.pieces.empty()) byBase_[key.base] = key.bufferId;
  events->push_back({RegistryEvent::Kind::kExport, index, generations_[index], key});
  return index;
}

void AllocationRegistry::unregister(uint64_t bufferId, std::vector<RegistryEvent>* events) {
  auto it = byId_.find(bufferId);
  if (it == byId_.end()) return;
  it->second.registered = false;
  if (!it->second.captured) retire(bufferId, events);
}

std::vector<AllocationKey> AllocationRegistry::allocations() const {
  std::vector<AllocationKey> keys;
  keys.reserve(byId_.size());
  for (const auto& entry : byId_) keys.push_back(entry.second.key);
  return keys;
}

bool AllocationRegistry::find(uint64_t bufferId, uint16_t* index, uint32_t* generation) const {
  auto it = byId_.find(bufferId);
  if (it == byId_.end()) return false;
  *index = it->second.index;
  *generation = it->second.generation;
  return true;
}

}  // namespace mscclpp_nccl
