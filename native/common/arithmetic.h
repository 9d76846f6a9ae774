// Integer arithmetic shared by host code and kernels (kernels compile with --expt-relaxed-constexpr).
#pragma once

#include <cstddef>
#include <cstdint>

namespace mscclpp_nccl {

// a / b rounded up.
constexpr size_t divCeil(size_t a, size_t b) { return (a + b - 1) / b; }

// divCeil for kernels' hot paths: on a GPU a 64-bit division is a long chain of dependent instructions
// (a few hundred cycles, which a small packet call feels), a 32-bit one a short one; sizes almost always
// fit in 32 bits. b > 0.
constexpr size_t divCeilNarrow(size_t a, size_t b) {
  if (((a | b) >> 32) != 0) return divCeil(a, b);
  const uint32_t a32 = static_cast<uint32_t>(a), b32 = static_cast<uint32_t>(b);
  return a32 == 0 ? 0 : (a32 - 1) / b32 + 1;
}

// a rounded up to a multiple of b.
constexpr size_t roundUp(size_t a, size_t b) { return divCeil(a, b) * b; }

}  // namespace mscclpp_nccl
