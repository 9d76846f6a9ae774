#include "native/fallback/fallback_mode.h"

#include <strings.h>

#include <cstring>

#include "native/common/logging.h"
#include "native/common/parameters.h"

namespace mscclpp_nccl {

FallbackMode parseFallbackMode(const char* text) {
  if (text == nullptr || *text == '\0' || strcmp(text, "1") == 0) return FallbackMode::kHierarchical;
  if (strcmp(text, "0") == 0) return FallbackMode::kOff;
  if (strcasecmp(text, "all") == 0) return FallbackMode::kAll;
  logWarn("ignoring MSCCLPP_NCCL_FALLBACK=%s: expected 0, 1 or all; using 1", text);
  return FallbackMode::kHierarchical;
}

FallbackMode fallbackMode() { return parseFallbackMode(readText(Param::kFallback).c_str()); }

const char* fallbackModeName(FallbackMode mode) {
  switch (mode) {
    case FallbackMode::kOff:
      return "0";
    case FallbackMode::kAll:
      return "all";
    case FallbackMode::kHierarchical:
      break;
  }
  return "1";
}

}  // namespace mscclpp_nccl
