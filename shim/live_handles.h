// Registrations and windows handed out and not yet deregistered. A handle is looked up here before it
// is read, so that a stale or made-up one is an error instead of a read of freed or unmapped memory.
// The handle is read only while the lock is held and the handle is in the set: a deregistration takes
// it out under the same lock before freeing it, so a concurrent deregistration or lookup never reads
// freed memory, and of two racing deregistrations exactly one wins.
#pragma once

#include <mutex>
#include <unordered_set>

class LiveHandles {
 public:
  void add(const void* handle) {
    std::lock_guard<std::mutex> lock(mutex_);
    handles_.insert(handle);
  }

  // Runs read() if `handle` is live; returns false (without calling it) if not.
  template <typename Read>
  bool read(const void* handle, Read read) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (handles_.count(handle) == 0) return false;
    read();
    return true;
  }

  // Takes `handle` out if it is live and check() accepts it: true for the one caller that took it,
  // which may then free it.
  template <typename Check>
  bool take(const void* handle, Check check) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto found = handles_.find(handle);
    if (found == handles_.end() || !check()) return false;
    handles_.erase(found);
    return true;
  }

 private:
  std::mutex mutex_;
  std::unordered_set<const void*> handles_;
};
