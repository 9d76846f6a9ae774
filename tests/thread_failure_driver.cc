// Drives native/common/threads.cc on the CPU with thread creation refused (tests/thread_refusal.cc), for
// tests/test_thread_failure.py: after MSCCLPP_TEST_THREADS_ALLOWED creations (unset: no limit) the
// system "refuses" a thread.
//
//   thread_failure_driver start       startThread with creation refused: prints "STATUS <code> <text>"
//   thread_failure_driver concurrent  runConcurrently of 3 tasks: prints "RAN <n> INLINE <m>"
//   thread_failure_driver throw       a body that throws: prints "SURVIVED"
// Each then prints "DONE" and exits 0; the process ending any other way is the failure tested for.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "native/common/logging.h"
#include "native/common/threads.h"
#include "tests/thread_refusal.h"

using namespace mscclpp_nccl;

int main(int argc, char** argv) {
  const char* mode = argc > 1 ? argv[1] : "";
  if (const char* allowed = getenv("MSCCLPP_TEST_THREADS_ALLOWED")) threadsAllowed = atoi(allowed);
  if (strcmp(mode, "start") == 0) {
    std::thread thread;
    bool ran = false;
    const Status status = startThread(&thread, [&] { ran = true; }, "driver", "Driver");
    joinThread(&thread);
    printf("STATUS %d ran %d %s\n", static_cast<int>(status), ran ? 1 : 0, lastError());
  } else if (strcmp(mode, "concurrent") == 0) {
    std::atomic<int> ran{0}, onCaller{0};
    const std::thread::id caller = std::this_thread::get_id();
    auto task = [&] {
      ran.fetch_add(1);
      if (std::this_thread::get_id() == caller) onCaller.fetch_add(1);
    };
    runConcurrently({task, task, task}, "driver", "Driver");
    printf("RAN %d INLINE %d\n", ran.load(), onCaller.load());
  } else if (strcmp(mode, "throw") == 0) {
    std::thread thread;
    const Status status =
        startThread(&thread, [] { throw std::runtime_error("thrown by the body"); }, "driver", "Driver");
    joinThread(&thread);
    printf("SURVIVED %d\n", static_cast<int>(status));
  } else {
    fprintf(stderr, "usage: %s start|concurrent|throw\n", argv[0]);
    return 2;
  }
  printf("DONE\n");
  return 0;
}
