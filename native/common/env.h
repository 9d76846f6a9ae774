// Typed reads of environment variables. Every variable the library reads is listed in README.md.
#pragma once

#include <cstdint>
#include <string>

namespace mscclpp_nccl {

// The variable's value, or `fallback` when it is unset or empty.
std::string envString(const char* name, const char* fallback = "");
// The variable parsed as an integer (decimal, or 0x-prefixed hex), or `fallback` when unset or unparsable.
int64_t envInt(const char* name, int64_t fallback);
// The variable parsed as a floating-point number, or `fallback`.
double envDouble(const char* name, double fallback);
// A duration in seconds (e.g. MSCCLPP_NCCL_WAIT_TIMEOUT) as nanoseconds, clamped to [0, 1e9 s] before
// the conversion: a negative or huge value would not convert to uint64_t (undefined behaviour).
uint64_t envSecondsAsNs(const char* name, double fallbackSeconds);

}  // namespace mscclpp_nccl
