// MSCCLPP_NCCL_FALLBACK, the one switch between our transport and stock NCCL (native/fallback/DESIGN.md),
// read here only:
//   0              a communicator over several hosts fails at init, as before the fallback existed
//   unset, "", 1   the default: several hosts go the hierarchical way (native/fallback/hierarchy.h)
//   all            every communicator goes through stock NCCL, for comparisons ("ALL" too)
// Anything else is warned about and read as the default: a typo must not silently disable the fallback
// or send a whole job through stock. Read at communicator init (native/communicator.cc).
#pragma once

namespace mscclpp_nccl {

enum class FallbackMode { kOff, kHierarchical, kAll };

// `text` as above; nullptr is unset.
FallbackMode parseFallbackMode(const char* text);

// This process's MSCCLPP_NCCL_FALLBACK, read at each call (communicators are created rarely).
FallbackMode fallbackMode();

// "0", "1" or "all", as the variable spells the mode, for logs.
const char* fallbackModeName(FallbackMode mode);

}  // namespace mscclpp_nccl
