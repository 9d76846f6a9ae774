// Drives shim/live_handles.h on the CPU as shim/memory.cc uses it: `deregister_race_driver ROUNDS`
// registers a handle each round; thread 1 starts to deregister it (even rounds) or to read it as
// ncclWinGetUserPtr does (odd rounds), and while it is still checking the handle's fields, thread 0
// deregisters it. Prints "rounds R won W lost L read D". A deregistration that freed the handle while
// thread 1 was still reading it shows as a heap-use-after-free under AddressSanitizer.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "shim/live_handles.h"

namespace {

using Clock = std::chrono::steady_clock;

struct Handle {
  static constexpr uint64_t kMagic = 0x7265676973746572ull;
  uint64_t magic = kMagic;
  const void* comm;
  void* userPtr;
};

int comm;  // the communicator every handle belongs to
LiveHandles handles;
std::atomic<Handle*> current{nullptr};
std::atomic<long> round{0};     // the round open now
std::atomic<long> checking{0};  // the round whose handle thread 1 is checking
std::atomic<long> trying{0};    // the round whose handle thread 0 is about to deregister
std::atomic<long> freed{0};     // the round whose deregistration by thread 0 returned
std::atomic<int> arrived{0};
std::atomic<long> won{0}, lost{0}, reads{0};

bool fieldsValid(const Handle* handle) {
  return static_cast<const volatile Handle*>(handle)->magic == Handle::kMagic && handle->comm == &comm;
}

// Waits (at most a second) until `flag` reaches round `r`.
void awaitRound(const std::atomic<long>& flag, long r) {
  const Clock::time_point limit = Clock::now() + std::chrono::seconds(1);
  while (flag.load() < r && Clock::now() < limit) std::this_thread::yield();
}

// Thread 1's check: once thread 0 has started to deregister, it keeps reading the handle until that
// deregistration returns (then once more), or for 20 ms when the deregistration waits for this check
// to end, as it must.
bool slowCheck(const Handle* handle, long r) {
  checking = r;
  awaitRound(trying, r);
  const Clock::time_point deadline = Clock::now() + std::chrono::milliseconds(20);
  bool valid = fieldsValid(handle);
  while (freed.load() < r && Clock::now() < deadline) valid = valid && fieldsValid(handle);
  return valid && fieldsValid(handle);
}

// The body of ncclCommDeregister: true for the call that freed the handle.
template <typename Check>
bool deregister(Handle* handle, Check check) {
  if (!handles.take(handle, check)) return false;
  handle->magic = 0;
  delete handle;
  return true;
}

// The body of ncclWinGetUserPtr.
bool userPtr(Handle* handle, void** out, long r) {
  bool valid = false;
  handles.read(handle, [&] {
    valid = slowCheck(handle, r);
    if (valid) *out = handle->userPtr;
  });
  return valid;
}

void thread0(long rounds) {
  for (long r = 1; r <= rounds; ++r) {
    while (round.load() < r) std::this_thread::yield();
    awaitRound(checking, r);  // thread 1 is inside its check
    Handle* handle = current.load();
    trying = r;
    (deregister(handle, [&] { return fieldsValid(handle); }) ? won : lost).fetch_add(1);
    freed = r;
    arrived.fetch_add(1);
  }
}

void thread1(long rounds) {
  for (long r = 1; r <= rounds; ++r) {
    while (round.load() < r) std::this_thread::yield();
    Handle* handle = current.load();
    void* ptr = nullptr;
    if (r % 2 == 0)
      (deregister(handle, [&] { return slowCheck(handle, r); }) ? won : lost).fetch_add(1);
    else if (userPtr(handle, &ptr, r))
      reads.fetch_add(1);
    arrived.fetch_add(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const long rounds = atol(argv[1]);
  std::thread first(thread0, rounds), second(thread1, rounds);
  for (long r = 1; r <= rounds; ++r) {
    Handle* handle = new Handle{Handle::kMagic, &comm, &comm};
    handles.add(handle);
    current = handle;
    arrived = 0;
    round = r;
    while (arrived.load() < 2) std::this_thread::yield();
  }
  first.join();
  second.join();
  printf("rounds %ld won %ld lost %ld read %ld\n", rounds, won.load(), lost.load(), reads.load());
  return 0;
}
