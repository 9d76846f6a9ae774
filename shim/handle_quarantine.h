// Destroyed handles are held for a while before they are freed: a call on a handle destroyed recently
// still finds it and reports "already destroyed" instead of touching freed memory, while a program that
// creates and destroys communicators without end does not grow without bound. (Stock NCCL frees at
// once; a handle used after that is undefined behaviour there, and here past the quarantine's depth.)
// A handle that the library itself still uses (an initialisation thread still running on it) is never
// freed, however many handles come after it: it waits, past the depth, until T::inUse() is false.
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

template <typename T>
class HandleQuarantine {
 public:
  explicit HandleQuarantine(size_t depth) : depth_(depth) {}

  // Takes `object`; once more than `depth` are held, frees the oldest, each at the first add() that
  // finds it no longer in use.
  void add(T* object) {
    std::vector<std::unique_ptr<T>> evicted;  // declared before the lock: freed after it is released
    std::lock_guard<std::mutex> lock(mu_);
    held_.emplace_back(object);
    while (held_.size() > depth_) {
      waiting_.push_back(std::move(held_.front()));
      held_.pop_front();
    }
    // Few wait (one per initialisation thread still running), so a scan per add is cheap.
    for (size_t i = 0; i < waiting_.size();) {
      if (waiting_[i]->inUse()) {
        ++i;
        continue;
      }
      evicted.push_back(std::move(waiting_[i]));
      waiting_[i] = std::move(waiting_.back());
      waiting_.pop_back();
    }
  }

  // Objects held, those past the depth still in use included.
  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size() + waiting_.size();
  }

 private:
  const size_t depth_;
  mutable std::mutex mu_;
  std::deque<std::unique_ptr<T>> held_;      // the newest `depth`, oldest first
  std::vector<std::unique_ptr<T>> waiting_;  // past the depth but still in use
};
