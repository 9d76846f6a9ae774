// Destroyed handles are held for a while before they are freed: a call on a handle destroyed recently
// still finds it and reports "already destroyed" instead of touching freed memory, while a program that
// creates and destroys communicators without end does not grow without bound. (Stock NCCL frees at
// once; a handle used after that is undefined behaviour there, and here past the quarantine's depth.)
#pragma once

#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>

template <typename T>
class HandleQuarantine {
 public:
  explicit HandleQuarantine(size_t depth) : depth_(depth) {}

  // Takes `object`; frees the oldest held object once more than `depth` are held.
  void add(T* object) {
    std::unique_ptr<T> evicted;
    std::lock_guard<std::mutex> lock(mu_);
    held_.emplace_back(object);
    if (held_.size() <= depth_) return;
    evicted = std::move(held_.front());  // declared before the lock: freed after it is released
    held_.pop_front();
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return held_.size();
  }

 private:
  const size_t depth_;
  mutable std::mutex mu_;
  std::deque<std::unique_ptr<T>> held_;
};
