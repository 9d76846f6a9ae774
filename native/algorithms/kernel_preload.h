// Loads every kernel of this library into the current CUDA context at once. Under CUDA's lazy loading
// (the default) a kernel is loaded at its first launch, and that load waits for the device: if a kernel
// of another communicator is then waiting for this rank, the rank's host blocks in the launch and the
// wait never ends (seen with 8 ranks and 16 communicators on one GPU; CUDA_MODULE_LOADING=EAGER made
// the host stall go away). Loading everything when the process's first communicator on a device is
// set up, before any of our kernels can wait, removes that stall, as stock NCCL does for its kernels.
#pragma once

namespace mscclpp_nccl {

// Once per process and device (later calls return at once). Best effort: where the driver cannot
// enumerate or load functions (before CUDA 12.4) kernels stay lazily loaded, and NCCL_DEBUG=INFO says so.
void preloadKernels(int device);

}  // namespace mscclpp_nccl
