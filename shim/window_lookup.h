// Windows as the one-sided operations and the pointer queries find them (the handles live in
// shim/memory.cc).
#pragma once

#include "native/transport/symmetric_window.h"
#include "shim/comm_handle.h"

// The native window of `win`, a window of `comm` whose registration has run; null otherwise (a stale or
// made-up handle, another comm's window, or a registration still queued for ncclGroupEnd).
const mscclpp_nccl::SymmetricWindow* nativeWindow(ncclComm* comm, ncclWindow_t win);
// The communicator that registered `win` (null for a stale or made-up handle), and in *native its native
// window (null until its registration has run), read together.
ncclComm* windowComm(ncclWindow_t win, const mscclpp_nccl::SymmetricWindow** native);
