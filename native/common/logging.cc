#include "native/common/logging.h"

#include <strings.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace mscclpp_nccl {
namespace {

enum class Level { kNone, kWarn, kInfo };

struct LogConfig {
  Level level = Level::kNone;
  unsigned subsysMask = ~0u;
  char host[64] = {};
};

unsigned parseSubsys(const char* text) {
  static const struct {
    const char* name;
    LogSubsys bit;
  } kNames[] = {{"INIT", LogSubsys::kInit},
                {"COLL", LogSubsys::kColl},
                {"P2P", LogSubsys::kP2p},
                {"BOOTSTRAP", LogSubsys::kBootstrap},
                {"TRANSPORT", LogSubsys::kTransport},
                {"TUNING", LogSubsys::kTuning},
                {"ALLOC", LogSubsys::kAlloc},
                {"ENV", LogSubsys::kEnv}};
  // NCCL's syntax: a comma-separated list, "ALL", or a leading '^' to invert the list.
  bool invert = text[0] == '^';
  if (invert) ++text;
  unsigned mask = 0;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", text);
  for (char *save = nullptr, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(nullptr, ",", &save)) {
    if (strcasecmp(tok, "ALL") == 0) mask = ~0u;
    for (const auto& entry : kNames)
      if (strcasecmp(tok, entry.name) == 0) mask |= static_cast<unsigned>(entry.bit);
  }
  return invert ? ~mask : mask;
}

const LogConfig& config() {
  static LogConfig cfg = [] {
    LogConfig c;
    if (const char* level = getenv("NCCL_DEBUG")) {
      if (strcasecmp(level, "WARN") == 0) c.level = Level::kWarn;
      if (strcasecmp(level, "INFO") == 0 || strcasecmp(level, "TRACE") == 0) c.level = Level::kInfo;
    }
    if (const char* subsys = getenv("NCCL_DEBUG_SUBSYS")) c.subsysMask = parseSubsys(subsys);
    gethostname(c.host, sizeof(c.host) - 1);
    return c;
  }();
  return cfg;
}

void emit(const char* kind, const char* fmt, va_list ap) {
  char msg[4096];  // room for a search report naming every place it looked
  vsnprintf(msg, sizeof(msg), fmt, ap);
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  fprintf(stderr, "%s:%d:%ld NCCL %s %s\n", config().host, getpid(), syscall(SYS_gettid), kind, msg);
}

thread_local char tlsLastError[4096];

}  // namespace

bool logInfoEnabled(LogSubsys subsys) {
  const LogConfig& cfg = config();
  return cfg.level == Level::kInfo && (cfg.subsysMask & static_cast<unsigned>(subsys));
}

void logInfo(LogSubsys, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("INFO", fmt, ap);
  va_end(ap);
}

void logWarn(const char* fmt, ...) {
  if (config().level == Level::kNone) return;
  va_list ap;
  va_start(ap, fmt);
  emit("WARN", fmt, ap);
  va_end(ap);
}

Status fail(Status status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tlsLastError, sizeof(tlsLastError), fmt, ap);
  va_end(ap);
  logWarn("%s", tlsLastError);
  return status;
}

const char* lastError() { return tlsLastError; }

void setLastError(const char* text) { snprintf(tlsLastError, sizeof(tlsLastError), "%s", text); }

}  // namespace mscclpp_nccl
