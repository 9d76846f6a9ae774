// Result codes of the native runtime. The values match ncclResult_t one for one so that the shim
// translates with a cast, but no NCCL type appears in native/.
#pragma once

namespace mscclpp_nccl {

enum class Status : int {
  kSuccess = 0,
  kCudaError = 1,
  kSystemError = 2,
  kInternalError = 3,
  kInvalidArgument = 4,
  kInvalidUsage = 5,
  kRemoteError = 6,
  kInProgress = 7,
  kTimeout = 8,
};

inline bool ok(Status s) { return s == Status::kSuccess; }

}  // namespace mscclpp_nccl

// Propagates a non-success Status to the caller.
#define MSCCLPP_TRY(expr)                                            \
  do {                                                               \
    ::mscclpp_nccl::Status status_ = (expr);                         \
    if (status_ != ::mscclpp_nccl::Status::kSuccess) return status_; \
  } while (0)
