// Drives native/fallback/init_variable.cc on the CPU for tests/test_init_variable.py: several threads
// hold the variable at once, as the members of one stock communicator in one process initialise
// together. Prints what each of them saw, and the variable after the last one ended.
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "native/fallback/init_variable.h"

namespace {

std::string read(const char* name) {
  const char* value = getenv(name);
  return value ? value : "<unset>";
}

}  // namespace

int main(int argc, char** argv) {
  const int threads = argc > 1 ? atoi(argv[1]) : 2;
  const bool needed = argc > 2 ? atoi(argv[2]) != 0 : true;
  const char* name = "MSCCLPP_NCCL_TEST_INIT_VARIABLE";
  std::mutex printing;
  int inside = 0;
  std::mutex gate;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      mscclpp_nccl::InitVariable held(name, "1", needed);
      // Every thread is inside before any leaves: a lock held across an init would deadlock here.
      {
        std::lock_guard<std::mutex> lock(gate);
        ++inside;
      }
      for (;;) {
        std::lock_guard<std::mutex> lock(gate);
        if (inside == threads) break;
      }
      std::lock_guard<std::mutex> lock(printing);
      printf("thread %d saw %s\n", t, read(name).c_str());
    });
  for (std::thread& thread : pool) thread.join();
  printf("after %s\n", read(name).c_str());
  return 0;
}
