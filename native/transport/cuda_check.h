// Turns a failing CUDA runtime call into a Status with a message naming the call.
#pragma once

#include <cuda_runtime.h>

#include "native/common/logging.h"

#define MSCCLPP_CUDA_TRY(call)                                                                        \
  do {                                                                                                \
    cudaError_t err_ = (call);                                                                        \
    if (err_ != cudaSuccess)                                                                          \
      return ::mscclpp_nccl::fail(::mscclpp_nccl::Status::kCudaError, "%s failed: %s (%s:%d)", #call, \
                                  cudaGetErrorString(err_), __FILE__, __LINE__);                      \
  } while (0)
