#include "native/common/logging.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>

#include "native/common/version.h"

namespace mscclpp_nccl {

// Defined in native/transport/log_device.cc, which needs CUDA; absent (null) where that file is not linked.
int logCurrentDevice() __attribute__((weak));

namespace {

// In stock NCCL's order: each level prints what the ones before it print.
enum class Level { kNone, kVersion, kWarn, kInfo };

constexpr unsigned levelBit(Level level) { return 1u << static_cast<unsigned>(level); }

struct LogConfig {
  Level level = Level::kNone;
  unsigned subsysMask = ~0u;
  unsigned tsLevels = levelBit(Level::kWarn);  // stock's default: WARN lines carry a timestamp
  char tsFormat[256] = {};
  int tsFractionAt = -1;  // where %Nf is in tsFormat, or -1
  int tsFractionDigits = 0;
  char host[1024] = {};
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

struct NamedBits {
  const char* name;
  unsigned bits;
};

// NCCL's syntax for a set: a comma-separated list of names, or ALL; with invertible, a leading '^' takes
// the complement of the list.
template <size_t N>
unsigned parseNamedBits(const char* text, const NamedBits (&names)[N], bool invertible) {
  const bool invert = invertible && text[0] == '^';
  if (invert) ++text;
  unsigned mask = 0;
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", text);
  for (char *save = nullptr, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(nullptr, ",", &save)) {
    if (strcasecmp(tok, "ALL") == 0) mask = ~0u;
    for (const NamedBits& entry : names)
      if (strcasecmp(tok, entry.name) == 0) mask |= entry.bits;
  }
  return invert ? ~mask : mask;
}

constexpr unsigned subsysBit(LogSubsys subsys) { return static_cast<unsigned>(subsys); }

// NCCL_DEBUG_SUBSYS.
unsigned parseSubsys(const char* text) {
  static const NamedBits kNames[] = {{"INIT", subsysBit(LogSubsys::kInit)},
                                     {"COLL", subsysBit(LogSubsys::kColl)},
                                     {"P2P", subsysBit(LogSubsys::kP2p)},
                                     {"BOOTSTRAP", subsysBit(LogSubsys::kBootstrap)},
                                     {"TRANSPORT", subsysBit(LogSubsys::kTransport)},
                                     {"TUNING", subsysBit(LogSubsys::kTuning)},
                                     {"ALLOC", subsysBit(LogSubsys::kAlloc)},
                                     {"ENV", subsysBit(LogSubsys::kEnv)}};
  return parseNamedBits(text, kNames, true);
}

// NCCL_DEBUG_TIMESTAMP_LEVELS: VERSION, WARN, INFO, ABORT and TRACE (the last two print as INFO).
unsigned parseTimestampLevels(const char* text) {
  static const NamedBits kNames[] = {{"VERSION", levelBit(Level::kVersion)},
                                     {"WARN", levelBit(Level::kWarn)},
                                     {"INFO", levelBit(Level::kInfo)},
                                     {"ABORT", levelBit(Level::kInfo)},
                                     {"TRACE", levelBit(Level::kInfo)}};
  return parseNamedBits(text, kNames, false);
}

// NCCL_DEBUG_TIMESTAMP_FORMAT as stock reads it: strftime with `_` for a space, and %1f..%9f for that
// many digits of the second's fraction.
void timestampFormat(const char* text, LogConfig* c) {
  snprintf(c->tsFormat, sizeof(c->tsFormat), "%s", text);
  for (char* p = c->tsFormat; *p; ++p)
    if (*p == '_') *p = ' ';
  for (char* p = c->tsFormat; p[0] && p[1] && p[2]; ++p) {
    if (p[0] == '%' && p[1] == '%') {
      ++p;
      continue;
    }
    if (p[0] == '%' && p[1] >= '1' && p[1] <= '9' && p[2] == 'f') {
      c->tsFractionAt = static_cast<int>(p - c->tsFormat);
      c->tsFractionDigits = p[1] - '0';
      break;
    }
  }
}

// The host name as stock NCCL prints it: up to the first '.', with '%' and '/' made '-'.
void shortHostName(char* host, size_t size) {
  if (gethostname(host, size - 1) != 0) snprintf(host, size, "unknown");
  host[size - 1] = '\0';
  for (char* p = host; *p; ++p) {
    if (*p == '.') {
      *p = '\0';
      break;
    }
    if (*p == '%' || *p == '/') *p = '-';
  }
}

const LogConfig& config() {
  static LogConfig cfg = [] {
    LogConfig c;
    if (const char* level = getenv("NCCL_DEBUG")) {
      if (strcasecmp(level, "VERSION") == 0) c.level = Level::kVersion;
      if (strcasecmp(level, "WARN") == 0) c.level = Level::kWarn;
      if (strcasecmp(level, "INFO") == 0 || strcasecmp(level, "ABORT") == 0 ||
          strcasecmp(level, "TRACE") == 0)
        c.level = Level::kInfo;
    }
    if (const char* subsys = getenv("NCCL_DEBUG_SUBSYS")) c.subsysMask = parseSubsys(subsys);
    if (const char* levels = getenv("NCCL_DEBUG_TIMESTAMP_LEVELS")) c.tsLevels = parseTimestampLevels(levels);
    const char* tsFormat = getenv("NCCL_DEBUG_TIMESTAMP_FORMAT");
    timestampFormat(tsFormat != nullptr ? tsFormat : "[%F %T] ", &c);
    shortHostName(c.host, sizeof(c.host));
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
        fprintf(stderr, "%s:%d:%ld [0] NCCL WARN cannot open NCCL_DEBUG_FILE %s: %s; logging to stderr\n",
                c.host, getpid(), syscall(SYS_gettid), name.c_str(), strerror(why));
      }
    }
    return c;
  }();
  return cfg;
}

// The calling thread's current CUDA device for the [dev] field, from native/transport/log_device.cc where
// the library links it (a build of this file without CUDA, as the CPU test drivers are, prints 0).
int currentDeviceOrZero() { return logCurrentDevice != nullptr ? logCurrentDevice() : 0; }

long threadId() {
  thread_local long tid = syscall(SYS_gettid);
  return tid;
}

// Appends the timestamp to line[len..] when `level` wants one; returns the new length.
size_t addTimestamp(const LogConfig& cfg, Level level, char* line, size_t size, size_t len) {
  if (!(cfg.tsLevels & levelBit(level)) || cfg.tsFormat[0] == '\0') return len;
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  struct tm local;
  localtime_r(&now.tv_sec, &local);
  char format[sizeof(cfg.tsFormat) + 16];
  if (cfg.tsFractionAt >= 0) {
    // %Nf -> N digits of the fraction, then strftime for the rest.
    long fraction = now.tv_nsec;
    for (int d = cfg.tsFractionDigits; d < 9; ++d) fraction /= 10;
    snprintf(format, sizeof(format), "%.*s%0*ld%s", cfg.tsFractionAt, cfg.tsFormat, cfg.tsFractionDigits,
             fraction, cfg.tsFormat + cfg.tsFractionAt + 3);
  } else {
    snprintf(format, sizeof(format), "%s", cfg.tsFormat);
  }
  return len + strftime(line + len, size - len, format, &local);
}

// The file's name without its directories, as stock prints `init.cc:123`.
const char* baseName(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != nullptr ? slash + 1 : path;
}

// The function's name as its caller knows it: an API body `ncclXBody` (shim/api.h) is `ncclX`.
std::string functionName(const char* function) {
  std::string name = function != nullptr ? function : "";
  const std::string suffix = "Body";
  if (name.size() > suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
    name.resize(name.size() - suffix.size());
  return name;
}

std::mutex& outputMutex() {
  static std::mutex mutex;
  return mutex;
}

bool bannerShown = false;  // guarded by outputMutex()

// Writes one line; `site` is for WARN lines, `device` the [dev] field. The caller holds outputMutex().
void writeLine(Level level, const LogSite* site, int device, const char* msg) {
  const LogConfig& cfg = config();
  char line[5120];
  size_t len = 0;
  if (level == Level::kWarn) line[len++] = '\n';  // stock's empty line before a WARN
  len = addTimestamp(cfg, level, line, sizeof(line), len);
  if (level != Level::kVersion) {
    len +=
        snprintf(line + len, sizeof(line) - len, "%s:%d:%ld [%d] ", cfg.host, getpid(), threadId(), device);
    len = std::min(len, sizeof(line) - 1);
  }
  if (level == Level::kWarn && site != nullptr) {
    const std::string function = functionName(site->function);
    if (!function.empty())
      snprintf(line + len, sizeof(line) - len, "%s:%d (%s) NCCL WARN %s\n", baseName(site->file), site->line,
               function.c_str(), msg);
    else
      snprintf(line + len, sizeof(line) - len, "%s:%d NCCL WARN %s\n", baseName(site->file), site->line, msg);
  } else if (level == Level::kWarn) {
    snprintf(line + len, sizeof(line) - len, "NCCL WARN %s\n", msg);
  } else if (level == Level::kInfo) {
    snprintf(line + len, sizeof(line) - len, "NCCL INFO %s\n", msg);
  } else {
    snprintf(line + len, sizeof(line) - len, "%s\n", msg);
  }
  fputs(line, cfg.out);
  if (strchr(line, '\0')[-1] != '\n') fputc('\n', cfg.out);  // a line cut at the buffer still ends
}

// The banner, before the first line this process prints, at the level it is printed at. The caller holds
// outputMutex().
void showBannerLocked(int device) {
  if (bannerShown) return;
  bannerShown = true;
  const Level level = config().level;
  if (level == Level::kNone) return;
  writeLine(level == Level::kInfo ? Level::kInfo : Level::kVersion, nullptr, device, bannerText());
}

void writeMessage(Level level, const LogSite* site, const char* msg) {
  const int device = currentDeviceOrZero();  // outside the lock: a CUDA call
  std::lock_guard<std::mutex> lock(outputMutex());
  showBannerLocked(device);
  writeLine(level, site, device, msg);
}

void emit(Level level, const LogSite* site, const char* fmt, va_list ap) {
  char msg[4096];  // room for a search report naming every place it looked
  vsnprintf(msg, sizeof(msg), fmt, ap);
  writeMessage(level, site, msg);
}

thread_local char tlsLastError[4096];

// The process's last warning or failure, from any thread and whatever NCCL_DEBUG says: stock NCCL keeps
// one such text for the process, and callers read it from other threads than the one that failed (a
// watchdog reporting a peer's loss).
// Constant-initialised, so that recording allocates nothing (it runs when an allocation has failed),
// and with nothing to undo at exit.
std::mutex processWarningMutex;
char processWarning[4096];
thread_local char tlsLastWarningCopy[4096];

void recordWarning(const char* text) {
  std::lock_guard<std::mutex> lock(processWarningMutex);
  snprintf(processWarning, sizeof(processWarning), "%s", text);
}

void warn(bool always, LogSite site, const char* fmt, va_list ap) {
  char msg[4096];
  vsnprintf(msg, sizeof(msg), fmt, ap);
  recordWarning(msg);
  if (always || config().level >= Level::kWarn) writeMessage(Level::kWarn, &site, msg);
}

// The git commit in build_info.json beside the library ("" when there is none).
std::string buildCommit() {
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&buildCommit), &info) == 0 || info.dli_fname == nullptr) return "";
  std::string path = info.dli_fname;
  const size_t slash = path.rfind('/');
  path = (slash == std::string::npos ? std::string(".") : path.substr(0, slash)) + "/build_info.json";
  FILE* f = fopen(path.c_str(), "re");
  if (f == nullptr) return "";
  char text[8192];
  const size_t n = fread(text, 1, sizeof(text) - 1, f);
  fclose(f);
  text[n] = '\0';
  // {"git_commit": "0123abcd...[-dirty]"}: the first string after the key, when it is one.
  const char* key = strstr(text, "\"git_commit\"");
  if (key == nullptr) return "";
  const char* colon = strchr(key + 12, ':');
  if (colon == nullptr) return "";
  const char* p = colon + 1;
  while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') ++p;
  if (*p != '"') return "";  // null: not built from a git checkout
  const char* end = strchr(p + 1, '"');
  if (end == nullptr) return "";
  std::string commit(p + 1, end);
  for (char ch : commit)
    if (!isalnum(static_cast<unsigned char>(ch)) && ch != '-') return "";
  const size_t dirty = commit.find("-dirty");
  const std::string hash = commit.substr(0, std::min<size_t>(commit.find('-'), 12));
  return dirty == std::string::npos ? hash : hash + "-dirty";
}

}  // namespace

// One literal, so that `strings libnccl.so.2 | grep mscclpp-nccl` finds the version too.
const char kVersionText[] = "mscclpp-nccl " MSCCLPP_NCCL_VERSION;

const char* bannerText() {
  static const std::string text = [] {
    const std::string commit = buildCommit();
    return std::string(kVersionText) + " (" + (commit.empty() ? std::string("commit unknown") : commit) +
           "), NCCL ABI " MSCCLPP_NCCL_ABI_VERSION;
  }();
  return text.c_str();
}

void logBanner() {
  if (config().level == Level::kNone) return;
  const int device = currentDeviceOrZero();
  std::lock_guard<std::mutex> lock(outputMutex());
  showBannerLocked(device);
}

bool logInfoEnabled(LogSubsys subsys) {
  const LogConfig& cfg = config();
  return cfg.level == Level::kInfo && (cfg.subsysMask & static_cast<unsigned>(subsys));
}

void logInfo(LogSubsys, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit(Level::kInfo, nullptr, fmt, ap);
  va_end(ap);
}

void logWarnAt(LogSite site, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  warn(/*always=*/false, site, fmt, ap);
  va_end(ap);
}

void logWarnAlwaysAt(LogSite site, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  warn(/*always=*/true, site, fmt, ap);
  va_end(ap);
}

Status failAt(LogSite site, Status status, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(tlsLastError, sizeof(tlsLastError), fmt, ap);
  va_end(ap);
  logWarnAt(site, "%s", tlsLastError);
  return status;
}

const char* lastError() { return tlsLastError; }

const char* lastWarning() {
  std::lock_guard<std::mutex> lock(processWarningMutex);
  snprintf(tlsLastWarningCopy, sizeof(tlsLastWarningCopy), "%s", processWarning);
  return tlsLastWarningCopy;
}

void setLastError(const char* text) { snprintf(tlsLastError, sizeof(tlsLastError), "%s", text); }

}  // namespace mscclpp_nccl
