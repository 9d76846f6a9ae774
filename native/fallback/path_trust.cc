#include "native/fallback/path_trust.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

namespace mscclpp_nccl {
namespace {

bool ownedByUs(const struct stat& info) { return info.st_uid == 0 || info.st_uid == geteuid(); }

std::string parentOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == 0 || slash == std::string::npos ? std::string("/") : path.substr(0, slash);
}

}  // namespace

std::string untrustedReason(const std::string& path, std::string* resolved) {
  if (path.empty() || path[0] != '/') return "is not an absolute path";
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) == nullptr) return std::string("cannot be resolved: ") + strerror(errno);
  const std::string real = buffer;
  const std::string shown = real == path ? "" : " (" + real + ")";
  struct stat info;
  if (stat(real.c_str(), &info) != 0) return std::string("cannot be examined: ") + strerror(errno);
  if (!ownedByUs(info))
    return "is owned by uid " + std::to_string(info.st_uid) + ", neither root nor this user" + shown;
  if (info.st_mode & S_IWOTH) return "is writable by everyone" + shown;
  std::string dir = parentOf(real);
  bool first = true;
  for (;;) {
    if (stat(dir.c_str(), &info) != 0) return "cannot examine " + dir + ": " + strerror(errno);
    if ((info.st_mode & S_IWOTH) && (first || !(info.st_mode & S_ISVTX)))
      return std::string(first ? "lies in" : "lies under") + " a world-writable directory (" + dir + ")";
    if (dir == "/") break;
    dir = parentOf(dir);
    first = false;
  }
  *resolved = real;
  return "";
}

}  // namespace mscclpp_nccl
