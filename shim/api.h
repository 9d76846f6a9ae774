// Shared helpers of the NCCL C ABI layer: the export macro and Status translation.
#pragma once

#include <exception>
#include <new>
#include <system_error>
#include <type_traits>

#include "native/common/logging.h"
#include "native/common/status.h"
#include "nccl.h"
#include "shim/nvtx_range.h"

inline ncclResult_t toNccl(mscclpp_nccl::Status status) { return static_cast<ncclResult_t>(status); }

// What an entry point returns after a failure it could not report itself: the error for
// ncclResult_t, nothing for void, a zero value otherwise.
template <typename R>
R apiFailure(mscclpp_nccl::Status status) {
  if constexpr (std::is_same_v<R, ncclResult_t>)
    return toNccl(status);
  else if constexpr (!std::is_void_v<R>)
    return R{};
}

// Runs `body` so that no exception leaves the C API or a thread body (allocation failures, thread
// creation refused under `ulimit -u`): each becomes an error return with a message.
template <typename Body>
auto guardApi(const char* function, Body body) noexcept -> decltype(body()) {
  using R = decltype(body());
  using mscclpp_nccl::fail;
  using mscclpp_nccl::Status;
  try {
    return body();
  } catch (const std::bad_alloc&) {
    return apiFailure<R>(fail(Status::kSystemError, "%s: out of memory", function));
  } catch (const std::system_error& e) {
    return apiFailure<R>(fail(Status::kSystemError, "%s: %s", function, e.what()));
  } catch (const std::exception& e) {
    return apiFailure<R>(fail(Status::kInternalError, "%s: unexpected exception: %s", function, e.what()));
  } catch (...) {
    return apiFailure<R>(fail(Status::kInternalError, "%s: unexpected exception", function));
  }
}

// For the calls that take part in a group (collectives, transfers, initialisations, window registrations,
// one-sided calls): a failure inside a group fails the group. Its outermost ncclGroupEnd then runs
// nothing that was queued and returns the first such failure, as stock NCCL does. Returns `result`.
ncclResult_t failsGroup(ncclResult_t result);  // shim/group.cc

// Defines the public `ncclX` (weak, so that a profiler or wrapper can interpose) and its strong
// `pncclX` alias, as stock NCCL exports them; both run the body that follows under guardApi, inside an
// NVTX range named after the function (shim/nvtx_range.h).
// Use: NCCL_API(ncclResult_t, ncclFoo, (int a, int* b), a, b) { ... } (the parameters, then their names).
#define NCCL_API(ret, func, params, ...) \
  NCCL_API_WITH(ApiRange nvtxRange_(#func), , ret, func, params, __VA_ARGS__)
// The same for a call that takes part in a group (failsGroup).
#define NCCL_GROUP_API(ret, func, params, ...) \
  NCCL_API_WITH(ApiRange nvtxRange_(#func), failsGroup, ret, func, params, __VA_ARGS__)
// The same for collectives and point-to-point calls, whose bodies open their range with its payload.
#define NCCL_CALL_API(ret, func, params, ...) \
  NCCL_API_WITH((void)0, failsGroup, ret, func, params, __VA_ARGS__)
#define NCCL_API_WITH(range, filter, ret, func, params, ...)                          \
  static ret func##Body params;                                                       \
  extern "C" __attribute__((visibility("default"), weak)) ret func params;            \
  extern "C" __attribute__((visibility("default"), alias(#func))) ret p##func params; \
  extern "C" ret func params {                                                        \
    range;                                                                            \
    return filter(guardApi(#func, [&]() -> ret { return func##Body(__VA_ARGS__); })); \
  }                                                                                   \
  static ret func##Body params

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
