// Shared helpers of the NCCL C ABI layer: the export macro and Status translation.
#pragma once

#include "native/common/logging.h"
#include "native/common/status.h"
#include "shim/nccl.h"

// Defines the public `ncclX` (weak, so that a profiler or wrapper can interpose) and its strong
// `pncclX` alias, as stock NCCL exports them. Use: NCCL_API(ncclResult_t, ncclFoo, int a) { ... }
#define NCCL_API(ret, func, ...)                                                            \
  extern "C" __attribute__((visibility("default"), weak)) ret func(__VA_ARGS__);            \
  extern "C" __attribute__((visibility("default"), alias(#func))) ret p##func(__VA_ARGS__); \
  extern "C" ret func(__VA_ARGS__)

inline ncclResult_t toNccl(mscclpp_nccl::Status status) { return static_cast<ncclResult_t>(status); }

// Returns a non-success ncclResult_t to the caller.
#define NCCL_TRY(expr)                          \
  do {                                          \
    ncclResult_t result_ = (expr);              \
    if (result_ != ncclSuccess) return result_; \
  } while (0)

// For an API this library does not implement: ncclInvalidUsage, with ncclGetLastError naming it.
inline ncclResult_t notImplemented(const char* function) {
  return toNccl(mscclpp_nccl::fail(mscclpp_nccl::Status::kInvalidUsage,
                                   "%s is not implemented by mscclpp-nccl", function));
}
