#include "native/transport/host_identity.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "native/common/parameters.h"

namespace mscclpp_nccl {
namespace {

uint64_t fnv1a(const std::string& text) {
  uint64_t hash = 1469598103934665603ull;
  for (unsigned char c : text) hash = (hash ^ c) * 1099511628211ull;
  return hash;
}

}  // namespace

uint64_t physicalHostId() {
  char host[256] = {};
  gethostname(host, sizeof(host) - 1);
  std::string bootId;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> bootId;
  return fnv1a(std::string(host) + "/" + bootId);
}

uint64_t layoutHostId(uint64_t physical, const std::string& override) {
  if (override.empty()) return physical;
  return fnv1a(std::to_string(physical) + "#" + override);
}

uint64_t layoutHostIdFromEnv(uint64_t physical) { return layoutHostId(physical, readText(Param::kHostId)); }

std::string stockHostId(uint64_t physical, uint64_t layout) {
  if (layout == physical) return "";
  char name[40];
  snprintf(name, sizeof(name), "mscclpp-nccl-host-%016llx", static_cast<unsigned long long>(layout));
  return name;
}

}  // namespace mscclpp_nccl
