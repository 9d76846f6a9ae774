#include "native/fallback/ld_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace mscclpp_nccl {
namespace {

constexpr char kMagic[] = "glibc-ld.so.cache1.1";
constexpr size_t kMagicBytes = sizeof(kMagic) - 1;
constexpr size_t kHeaderBytes = 48;  // magic, entry count, string bytes, flags, extension offset, spare
constexpr size_t kEntryBytes = 24;   // flags, name offset, path offset, OS version, hardware caps
constexpr off_t kMaxCacheBytes = 64 << 20;

uint32_t word(const std::vector<char>& data, size_t at) {
  uint32_t value;
  memcpy(&value, data.data() + at, sizeof(value));
  return value;
}

// The string at `offset` of the file (offsets count from its start), or "" when it runs off the end.
std::string stringAt(const std::vector<char>& data, uint32_t offset) {
  if (offset >= data.size()) return "";
  const char* start = data.data() + offset;
  const void* end = memchr(start, 0, data.size() - offset);
  return end ? std::string(start, static_cast<const char*>(end) - start) : "";
}

bool readAll(const std::string& file, std::vector<char>* data, std::string* why) {
  const int fd = open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = file + ": " + strerror(errno);
    return false;
  }
  struct stat info;
  bool ok = fstat(fd, &info) == 0 && S_ISREG(info.st_mode) && info.st_size <= kMaxCacheBytes;
  if (ok) {
    data->resize(static_cast<size_t>(info.st_size));
    ok = pread(fd, data->data(), data->size(), 0) == static_cast<ssize_t>(data->size());
  }
  close(fd);
  if (!ok) *why = file + ": not a readable regular file of at most 64 MiB";
  return ok;
}

}  // namespace

std::vector<std::string> ldCachePaths(const std::string& cacheFile, const std::string& name,
                                      std::string* why) {
  std::vector<char> data;
  if (!readAll(cacheFile, &data, why)) return {};
  if (data.size() < kHeaderBytes || memcmp(data.data(), kMagic, kMagicBytes) != 0) {
    *why = cacheFile + ": not in the format glibc 2.32+ writes";
    return {};
  }
  const uint64_t entries = word(data, kMagicBytes);
  if (entries > (data.size() - kHeaderBytes) / kEntryBytes) {
    *why = cacheFile + ": more entries than the file holds";
    return {};
  }
  std::vector<std::string> paths;
  for (uint64_t i = 0; i < entries; ++i) {
    const size_t at = kHeaderBytes + i * kEntryBytes;
    if (stringAt(data, word(data, at + 4)) != name) continue;
    const std::string path = stringAt(data, word(data, at + 8));
    if (!path.empty()) paths.push_back(path);
  }
  return paths;
}

}  // namespace mscclpp_nccl
