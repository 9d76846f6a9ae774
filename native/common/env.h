// Typed reads of environment variables. The library's own go through native/common/parameters.h.
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

}  // namespace mscclpp_nccl
