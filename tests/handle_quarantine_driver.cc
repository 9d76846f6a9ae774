// Drives shim/handle_quarantine.h on the CPU: `handle_quarantine_driver DEPTH COUNT` retires COUNT
// objects into a quarantine of DEPTH from 4 threads at once and prints "freed F held H", where F counts
// destructor runs; a freed object is checked to be one of the oldest (under the sanitizers, a double
// free or a leak fails the run).
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>

#include "shim/handle_quarantine.h"

namespace {

std::atomic<long> freed{0};
std::atomic<long> newestFreed{-1};

struct Tracked {
  explicit Tracked(long serial) : serial(serial) {}
  ~Tracked() {
    freed.fetch_add(1);
    long seen = newestFreed.load();
    while (serial > seen && !newestFreed.compare_exchange_weak(seen, serial)) {
    }
  }
  long serial;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) return 2;
  const long depth = atol(argv[1]), count = atol(argv[2]);
  auto* quarantine = new HandleQuarantine<Tracked>(static_cast<size_t>(depth));
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
