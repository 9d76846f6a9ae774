// Drives shim/handle_quarantine.h on the CPU: `handle_quarantine_driver DEPTH COUNT` retires COUNT
// objects into a quarantine of DEPTH from 4 threads at once and prints "freed F held H", where F counts
// destructor runs; a freed object is checked to be one of the oldest (under the sanitizers, a double
// free or a leak fails the run). `handle_quarantine_driver DEPTH COUNT in_use` retires first an object
// still in use (as a handle whose initialisation thread still runs), then COUNT others, and prints
// "in_use freed B", then ends that use, retires one more, and prints "after_use freed A" (B and A: 0 or
// 1, whether that object was freed).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "shim/handle_quarantine.h"

namespace {

std::atomic<long> freed{0};
std::atomic<long> newestFreed{-1};
std::atomic<bool> busyFreed{false};  // the object in use (serial -1) was freed

struct Tracked {
  explicit Tracked(long serial) : serial(serial) {}
  ~Tracked() {
    if (serial < 0) busyFreed = true;
    freed.fetch_add(1);
    long seen = newestFreed.load();
    while (serial > seen && !newestFreed.compare_exchange_weak(seen, serial)) {
    }
  }
  bool inUse() const { return busy.load(); }
  long serial;
  std::atomic<bool> busy{false};
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3 && !(argc == 4 && strcmp(argv[3], "in_use") == 0)) return 2;
  const long depth = atol(argv[1]), count = atol(argv[2]);
  auto* quarantine = new HandleQuarantine<Tracked>(static_cast<size_t>(depth));
  if (argc == 4) {
    auto* busy = new Tracked(-1);
    busy->busy = true;
    quarantine->add(busy);
    for (long serial = 0; serial < count; ++serial) quarantine->add(new Tracked(serial));
    printf("in_use freed %d\n", busyFreed.load() ? 1 : 0);
    if (!busyFreed) busy->busy = false;
    quarantine->add(new Tracked(count));
    printf("after_use freed %d\n", busyFreed.load() ? 1 : 0);
    delete quarantine;
    return 0;
  }
  std::atomic<long> next{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (long serial; (serial = next.fetch_add(1)) < count;) quarantine->add(new Tracked(serial));
    });
  for (std::thread& t : threads) t.join();
  printf("freed %ld held %zu newest_freed %ld\n", freed.load(), quarantine->size(), newestFreed.load());
  delete quarantine;  // frees the rest: the sanitizers see no leak
  printf("after delete freed %ld\n", freed.load());
  return 0;
}
