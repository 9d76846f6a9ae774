// NCCL-style diagnostics: `NCCL WARN` / `NCCL INFO` lines gated by NCCL_DEBUG and NCCL_DEBUG_SUBSYS,
// and the per-thread "last error" text that ncclGetLastError returns.
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

bool logInfoEnabled(LogSubsys subsys);
void logInfo(LogSubsys subsys, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
void logWarn(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// A WARN line printed whatever NCCL_DEBUG says: for what a user must see without asking (a call that
// has stalled, a rendezvous anyone may join).
void logWarnAlways(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

// Records `fmt` as this thread's last error, prints it as a WARN line when NCCL_DEBUG asks, and
// returns `status` so that call sites read `return fail(Status::kInvalidArgument, "...")`.
Status fail(Status status, const char* fmt, ...) __attribute__((format(printf, 2, 3)));

// The text of the last failure on this thread ("" when none).
const char* lastError();
void setLastError(const char* text);

}  // namespace mscclpp_nccl

#define MSCCLPP_INFO(subsys, ...)                                              \
  do {                                                                         \
    if (::mscclpp_nccl::logInfoEnabled(::mscclpp_nccl::LogSubsys::subsys))     \
      ::mscclpp_nccl::logInfo(::mscclpp_nccl::LogSubsys::subsys, __VA_ARGS__); \
  } while (0)
