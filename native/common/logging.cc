#include "native/common/logging.h"

#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

namespace mscclpp_nccl {
namespace {

enum class Level { kNone, kWarn, kInfo };

struct LogConfig {
  Level level = Level::kNone;
  unsigned subsysMask = ~0u;
  char host[64] = {};
  FILE* out = stderr;
};

// NCCL_DEBUG_FILE, with NCCL's substitutions: %h the host name, %p the process id, %% a percent sign.
std::string debugFileName(const char* pattern, const char* host) {
  std::string name;
  for (const char* c = pattern; *c; ++c) {
    if (*c != '%' || c[1] == '\0') {
      name += *c;
      continue;
    }
    switch (*++c) {
      case 'h':
        name += host;
        break;
      case 'p':
        name += std::to_string(getpid());
        break;
      default:
        name += *c;  // %% and unknown escapes: the character itself
    }
  }
  return name;
}

// Opens NCCL_DEBUG_FILE for appending without following a symlink planted at its name and without
// leaking into children (O_CLOEXEC). A new file is created exclusively, mode 0644. An existing file is
// appended to, never truncated (this process did not create it), and only if it is a regular file of
// ours with one link: a hard link to another user's file is refused. Returns -1 with errno set.
int openDebugFile(const std::string& name) {
  const int flags = O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC;
  int fd = open(name.c_str(), flags | O_CREAT | O_EXCL, 0644);
  if (fd >= 0 || errno != EEXIST) return fd;
  // O_NONBLOCK: a FIFO at the name must not hang the first log line; it is refused below anyway.
  fd = open(name.c_str(), flags | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_nlink != 1) {
    close(fd);
    errno = EPERM;
    return -1;
  }
  fcntl(fd, F_SETFL, O_APPEND);  // blocking writes again
  return fd;
}

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
    const char* file = getenv("NCCL_DEBUG_FILE");
    if (c.level != Level::kNone && file != nullptr && *file != '\0') {
      const std::string name = debugFileName(file, c.host);
      const int fd = openDebugFile(name);
      FILE* opened = fd >= 0 ? fdopen(fd, "a") : nullptr;
      if (opened != nullptr) {
        setvbuf(opened, nullptr, _IOLBF, 0);  // each line reaches the file as it is written
        c.out = opened;
      } else {
        const int why = errno;
        if (fd >= 0) close(fd);
        fprintf(stderr, "%s:%d NCCL WARN cannot open NCCL_DEBUG_FILE %s: %s; logging to stderr\n", c.host,
                getpid(), name.c_str(), strerror(why));
      }
    }
    return c;
  }();
  return cfg;
}

void emit(const char* kind, const char* fmt, va_list ap) {
  char msg[4096];  // room for a search report naming every place it looked
  vsnprintf(msg, sizeof(msg), fmt, ap);
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  fprintf(config().out, "%s:%d:%ld NCCL %s %s\n", config().host, getpid(), syscall(SYS_gettid), kind, msg);
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

void logWarnAlways(const char* fmt, ...) {
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
