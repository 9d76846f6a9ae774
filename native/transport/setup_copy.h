// Device memory written while a communicator is set up. It goes through a stream of its own that waits for
// nothing else: the legacy default stream (cudaMemcpy, cudaMemset) and cudaDeviceSynchronize would wait
// for the application's queued kernels, and one of those may be a kernel of another communicator that
// waits for a rank which is itself inside this setup (PyTorch creates communicators lazily, at their
// first call, while others run).
#pragma once

#include <cstddef>

#include "native/common/status.h"

namespace mscclpp_nccl {

// Zeroes `bytes` of device memory at `dst`, and waits for that alone.
Status zeroDeviceMemory(void* dst, size_t bytes);
// Copies `bytes` from host memory to device memory, and waits for that alone.
Status copyToDevice(void* dst, const void* src, size_t bytes);

}  // namespace mscclpp_nccl
