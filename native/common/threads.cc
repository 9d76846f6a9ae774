#include "native/common/threads.h"

#include <pthread.h>

#include <cstdio>
#include <exception>
#include <new>
#include <system_error>

#include "native/common/logging.h"
#include "native/common/parameters.h"

namespace mscclpp_nccl {

void nameThisThread(const char* name) {
  static const bool named = readInteger(Param::kSetThreadName) != 0;
  if (!named) return;
  char text[16];  // the kernel keeps 15 characters and the terminator
  snprintf(text, sizeof(text), "NCCL %s", name);
  pthread_setname_np(pthread_self(), text);
}

Status startThread(std::thread* out, const std::function<void()>& body, const char* what, const char* name) {
  if (out->joinable()) return fail(Status::kInternalError, "%s: a thread is already running there", what);
  try {
    *out = std::thread([body, what, name] {
      nameThisThread(name);
      try {
        body();
      } catch (const std::exception& error) {
        logWarn("%s: a helper thread ended with an exception: %s", what, error.what());
      } catch (...) {
        logWarn("%s: a helper thread ended with an unknown exception", what);
      }
    });
    return Status::kSuccess;
  } catch (const std::system_error& error) {
    return fail(Status::kSystemError, "%s: cannot start a thread: %s", what, error.what());
  } catch (const std::bad_alloc&) {
    return fail(Status::kSystemError, "%s: cannot start a thread: out of memory", what);
  }
}

void joinThread(std::thread* thread) {
  if (!thread->joinable()) return;
  try {
    thread->join();
  } catch (const std::system_error& error) {
    logWarn("cannot join a helper thread (%s): it is left to end on its own", error.what());
    thread->detach();
  }
}

void runConcurrently(const std::vector<std::function<void()>>& tasks, const char* what, const char* name) {
  std::vector<std::thread> threads(tasks.size());
  std::vector<const std::function<void()>*> leftOver;
  for (size_t i = 0; i < tasks.size(); ++i)
    if (!ok(startThread(&threads[i], tasks[i], what, name))) leftOver.push_back(&tasks[i]);
  if (!leftOver.empty())
    logWarn("%s: %zu of %zu tasks run one after another on the calling thread", what, leftOver.size(),
            tasks.size());
  for (const std::function<void()>* task : leftOver) {
    try {
      (*task)();
    } catch (...) {
      logWarn("%s: a task ended with an exception", what);
    }
  }
  for (std::thread& thread : threads) joinThread(&thread);
}

}  // namespace mscclpp_nccl
