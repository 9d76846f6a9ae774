// NCCL-style diagnostics: `NCCL WARN` / `NCCL INFO` lines gated by NCCL_DEBUG and NCCL_DEBUG_SUBSYS, in
// stock NCCL's format, the version banner, and the per-thread "last error" text that ncclGetLastError
// returns.
//
// Lines as stock NCCL 2.32 prints them (so that tools that parse NCCL logs read ours):
//   [2026-12-04 10:00:00] host:pid:tid [dev] file.cc:123 (function) NCCL WARN text   (after an empty line)
//   host:pid:tid [dev] NCCL INFO text
// dev is the calling thread's current CUDA device. WARN lines carry a timestamp by default; which levels
// do is NCCL_DEBUG_TIMESTAMP_LEVELS, its format NCCL_DEBUG_TIMESTAMP_FORMAT (strftime, `_` for a space,
// %Nf for N digits of the second's fraction). NCCL_DEBUG is VERSION, WARN, INFO (ABORT and TRACE read as
// INFO); NCCL_DEBUG_FILE (%h host, %p pid) replaces stderr from VERSION up.
//
// The banner, `mscclpp-nccl X.Y.Z (commit), NCCL ABI A.B.C`, is printed once per process: at
// NCCL_DEBUG=VERSION or WARN as a plain line when a communicator is created (logBanner), as stock prints
// "NCCL version"; at INFO as an INFO line, the process's first.
#pragma once

#include <cstdarg>

#include "native/common/status.h"

namespace mscclpp_nccl {

enum class LogSubsys : unsigned {
  kInit = 1u << 0,
  kColl = 1u << 1,
  kP2p = 1u << 2,
  kBootstrap = 1u << 3,
  kTransport = 1u << 4,
  kTuning = 1u << 5,
  kAlloc = 1u << 6,
  kEnv = 1u << 7,
};

// Where a WARN line comes from: the call site of logWarn, logWarnAlways or fail (the macros below fill it).
struct LogSite {
  const char* file;
  int line;
  const char* function;
};

bool logInfoEnabled(LogSubsys subsys);
void logInfo(LogSubsys subsys, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void logWarnAt(LogSite site, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// A WARN line printed whatever NCCL_DEBUG says: for what a user must see without asking (a call that
// has stalled, a rendezvous anyone may join).
void logWarnAlwaysAt(LogSite site, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// Records `fmt` as this thread's last error, prints it as a WARN line when NCCL_DEBUG asks, and
// returns `status` so that call sites read `return fail(Status::kInvalidArgument, "...")`.
Status failAt(LogSite site, Status status, const char* fmt, ...) __attribute__((format(printf, 3, 4)));

// The names call sites use; the macros below turn each call into the *At function with its call site.
// Declared so that `using mscclpp_nccl::fail;` keeps working; never defined.
void logWarn(const char* fmt, ...);
void logWarnAlways(const char* fmt, ...);
Status fail(Status status, const char* fmt, ...);

// The version banner (see above), once per process; what comm creation calls.
void logBanner();
// `mscclpp-nccl X.Y.Z (commit), NCCL ABI A.B.C`, the commit read from build_info.json beside the library.
const char* bannerText();

// The text of the last failure on this thread ("" when none).
const char* lastError();
void setLastError(const char* text);
// The process's last warning or failure, from any thread: stock NCCL keeps one such text for the
// process, and a watchdog thread asks about failures that other threads saw. A copy, valid on this
// thread until its next call.
const char* lastWarning();

}  // namespace mscclpp_nccl

#define MSCCLPP_LOG_SITE (::mscclpp_nccl::LogSite{__FILE__, __LINE__, __func__})

// Unqualified on purpose: `mscclpp_nccl::logWarn(...)` becomes `mscclpp_nccl::logWarnAt(...)`, and an
// unqualified call finds the function through its LogSite argument (argument-dependent lookup).
#define logWarn(...) logWarnAt(MSCCLPP_LOG_SITE, __VA_ARGS__)
#define logWarnAlways(...) logWarnAlwaysAt(MSCCLPP_LOG_SITE, __VA_ARGS__)
// `fail()` without arguments is left alone: std::basic_ios::fail() and the like.
#define fail(...) MSCCLPP_LOG_FAIL_PICK(__VA_OPT__(1))(__VA_ARGS__)
#define MSCCLPP_LOG_FAIL_PICK(nonempty) MSCCLPP_LOG_FAIL_PICK_(nonempty)
#define MSCCLPP_LOG_FAIL_PICK_(nonempty) MSCCLPP_LOG_FAIL##nonempty
#define MSCCLPP_LOG_FAIL() fail()
#define MSCCLPP_LOG_FAIL1(...) failAt(MSCCLPP_LOG_SITE, __VA_ARGS__)

#define MSCCLPP_INFO(subsys, ...)                                              \
  do {                                                                         \
    if (::mscclpp_nccl::logInfoEnabled(::mscclpp_nccl::LogSubsys::subsys))     \
      ::mscclpp_nccl::logInfo(::mscclpp_nccl::LogSubsys::subsys, __VA_ARGS__); \
  } while (0)
