#include "native/common/env.h"

#include <cmath>
#include <cstdlib>

#include "native/common/logging.h"

namespace mscclpp_nccl {

std::string envString(const char* name, const char* fallback) {
  const char* value = getenv(name);
  return (value && *value) ? std::string(value) : std::string(fallback);
}

int64_t envInt(const char* name, int64_t fallback) {
  const char* value = getenv(name);
  if (!value || !*value) return fallback;
  char* end = nullptr;
  long long parsed = strtoll(value, &end, 0);
  if (*end != '\0') {
    logWarn("ignoring %s=%s: not an integer", name, value);
    return fallback;
  }
  return parsed;
}

double envDouble(const char* name, double fallback) {
  const char* value = getenv(name);
  if (!value || !*value) return fallback;
  char* end = nullptr;
  double parsed = strtod(value, &end);
  // Timeouts are made from these: inf, NaN or 1e300 would overflow the integer they become.
  if (*end != '\0' || !std::isfinite(parsed)) {
    logWarn("ignoring %s=%s: not a number", name, value);
    return fallback;
  }
  return parsed;
}

}  // namespace mscclpp_nccl
