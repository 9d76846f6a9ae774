// Starting helper threads without letting a failure end the process. std::thread's constructor throws
// std::system_error when the system refuses a thread (EAGAIN: a process or memory limit), and an
// exception that leaves a thread body calls std::terminate; here both become an error code or a log
// line, since the C API never aborts.
#pragma once

#include <functional>
#include <thread>
#include <vector>

#include "native/common/status.h"

namespace mscclpp_nccl {

// Names the calling thread "NCCL <name>" (cut to the system's 15 characters) where NCCL_SET_THREAD_NAME
// is set, as stock names its threads then; else does nothing.
void nameThisThread(const char* name);

// Starts `body` on a new thread in `*out` (which must not hold a running thread), named `name` as above.
// An exception that escapes `body` is logged, not rethrown. When the thread cannot start, returns
// kSystemError naming `what`, leaves `*out` empty and `body` unrun, so the caller may run it itself.
Status startThread(std::thread* out, const std::function<void()>& body, const char* what, const char* name);

// Joins `thread` if it runs; where joining fails (the caller is that thread), detaches it instead.
void joinThread(std::thread* thread);

// Runs every task at the same time, each on a thread of its own, and returns when all have ended. A
// task whose thread cannot start runs on the caller's thread once the others have started: its
// neighbours then no longer overlap it, which a warning says.
void runConcurrently(const std::vector<std::function<void()>>& tasks, const char* what, const char* name);

}  // namespace mscclpp_nccl
