// Integer arithmetic shared by host code and kernels (kernels compile with --expt-relaxed-constexpr).
#pragma once

#include <cstddef>

namespace mscclpp_nccl {

// a / b rounded up.
constexpr size_t divCeil(size_t a, size_t b) { return (a + b - 1) / b; }

// a rounded up to a multiple of b.
constexpr size_t roundUp(size_t a, size_t b) { return divCeil(a, b) * b; }

}  // namespace mscclpp_nccl
