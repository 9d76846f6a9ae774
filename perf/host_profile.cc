// A sampling profiler of where a process's host time goes, preloaded into a program that we cannot
// otherwise profile (the GPU machine has no perf, gdb or nsys). A wall-clock timer signals the thread
// that loaded it (the program's main thread) every HOST_PROFILE_US microseconds (default 20), and the
// handler keeps that thread's call stack. At exit every stack is written to
// $HOST_PROFILE_DIR/stacks.<pid>, one sample a line of module+offset frames, innermost first;
// perf/host_profile.py names the frames (with addr2line, on any machine that has the same modules) and
// sums them. Wall-clock sampling counts a thread's blocked time too, which is what a caller waits for.
//
// Build:  g++ -O2 -shared -fPIC -o build/host_profile.so perf/host_profile.cc -ldl
// Run:    HOST_PROFILE_DIR=/tmp/prof LD_PRELOAD=$PWD/build/host_profile.so PROGRAM...
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

constexpr int kMaxFrames = 24;
constexpr size_t kMaxSamples = 200000;

struct Sample {
  int frames;
  void* pc[kMaxFrames];
};

Sample* samples = nullptr;
std::atomic<size_t> taken{0};
timer_t timer;
bool running = false;

void onTick(int, siginfo_t*, void*) {
  const size_t at = taken.load(std::memory_order_relaxed);
  if (at >= kMaxSamples) return;
  samples[at].frames = backtrace(samples[at].pc, kMaxFrames);
  taken.store(at + 1, std::memory_order_relaxed);
}

__attribute__((constructor)) void start() {
  const char* dir = getenv("HOST_PROFILE_DIR");
  if (dir == nullptr) return;
  samples = static_cast<Sample*>(calloc(kMaxSamples, sizeof(Sample)));
  void* warm[2];
  backtrace(warm, 2);  // loads the unwinder now, not inside the first signal
  struct sigaction action = {};
  action.sa_sigaction = onTick;
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  const int tickSignal = SIGRTMIN + 5;
  sigaction(tickSignal, &action, nullptr);
  sigevent event = {};
  event.sigev_notify = SIGEV_THREAD_ID;
  event.sigev_signo = tickSignal;
  event._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
  if (timer_create(CLOCK_MONOTONIC, &event, &timer) != 0) return;
  const char* us = getenv("HOST_PROFILE_US");
  const long period = (us ? atol(us) : 20) * 1000;
  itimerspec spec = {{period / 1000000000, period % 1000000000}, {period / 1000000000, period % 1000000000}};
  running = timer_settime(timer, 0, &spec, nullptr) == 0;
}

__attribute__((destructor)) void finish() {
  if (!running) return;
  timer_delete(timer);
  const std::string path = std::string(getenv("HOST_PROFILE_DIR")) + "/stacks." + std::to_string(getpid());
  FILE* out = fopen(path.c_str(), "w");
  if (out == nullptr) return;
  const size_t count = taken.load();
  for (size_t i = 0; i < count; ++i) {
    // Frame 0 is the handler and frame 1 the signal's return trampoline: the program's stack follows.
    for (int f = 2; f < samples[i].frames; ++f) {
      Dl_info info;
      // Return addresses point after their call: one byte back names the calling line.
      void* pc = static_cast<char*>(samples[i].pc[f]) - (f > 2 ? 1 : 0);
      if (dladdr(pc, &info) && info.dli_fname)
        fprintf(out, "%s%s+%#lx", f > 2 ? " " : "", info.dli_fname,
                static_cast<unsigned long>(static_cast<char*>(pc) - static_cast<char*>(info.dli_fbase)));
      else
        fprintf(out, "%s?+%p", f > 2 ? " " : "", pc);
    }
    fputc('\n', out);
  }
  fclose(out);
}

}  // namespace
