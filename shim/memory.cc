// Memory allocation, buffer registration and windows.
//
// ncclCommRegister is local in NCCL: the buffer's allocation is exported to the peers at once, and they
// map it in the background, so that large collectives on it go zero-copy from their first call
// (native/transport/mapped_allocations.h); deregistering makes every peer close its mapping. Windows are
// collective: registering one maps every peer's (native/transport/symmetric_window.h), and with
// NCCL_WIN_COLL_SYMMETRIC, collectives whose buffers lie in windows go zero-copy. ncclMemAlloc memory of
// 1 MB or more is exported by every communicator on its device as it is allocated, without registration.
#include <cuda_runtime.h>

#include <memory>

#include "native/transport/device_memory.h"
#include "native/transport/mapped_allocations.h"
#include "shim/arg_checks.h"
#include "shim/comm_handle.h"
#include "shim/group.h"
#include "shim/live_handles.h"
#include "shim/window_lookup.h"

using mscclpp_nccl::fail;
using mscclpp_nccl::Status;

struct ncclWindow_vidmem {
  static constexpr uint64_t kMagic = 0x77696e646f77ull;  // "window"
  uint64_t magic = kMagic;
  ncclComm* comm;
  void* userPtr;
  size_t size;
  int flags;
  // The native window: set when the collective registration ran (at ncclGroupEnd inside a group).
  std::atomic<mscclpp_nccl::SymmetricWindow*> native{nullptr};
};

namespace {

struct Registration {
  static constexpr uint64_t kMagic = 0x7265676973746572ull;  // "register"
  uint64_t magic = kMagic;
  ncclComm* comm;
  void* buffer;
  size_t size;
};

LiveHandles& liveHandles() {
  static LiveHandles* handles = new LiveHandles();  // never destroyed: calls may come during exit
  return *handles;
}

}  // namespace

NCCL_API(ncclResult_t, ncclMemAlloc, (void** ptr, size_t size), ptr, size) {
  if (ptr == nullptr) return toNccl(fail(Status::kInvalidArgument, "ncclMemAlloc: ptr is NULL"));
  *ptr = nullptr;
  if (size == 0) return ncclSuccess;
  NCCL_TRY(toNccl(mscclpp_nccl::allocateShareable(size, ptr)));
  // Memory allocated for NCCL is shared with the peers now, not at its first large call.
  mscclpp_nccl::MappedAllocations::offerToAll(*ptr, size);
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclMemFree, (void* ptr), ptr) {
  if (ptr == nullptr) return ncclSuccess;
  return toNccl(mscclpp_nccl::freeShareable(ptr));
}

NCCL_API(ncclResult_t, ncclCommRegister, (const ncclComm_t comm, void* buff, size_t size, void** handle),
         comm, buff, size, handle) {
  NCCL_TRY(checkReadyComm(comm, "ncclCommRegister"));
  if (buff == nullptr || handle == nullptr)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommRegister: buff or handle is NULL"));
  std::unique_ptr<Registration> registration(new Registration{Registration::kMagic, comm, buff, size});
  liveHandles().add(registration.get());  // may throw: the registration is not leaked
  *handle = registration.release();
  // Best effort: a buffer that cannot be shared still registers (as in NCCL) and copies through scratch.
  withImpl(comm, "ncclCommRegister: comm was aborted", [&](mscclpp_nccl::Communicator& impl) {
    impl.registerBuffer(buff, size);
    return Status::kSuccess;
  });
  return ncclSuccess;
}

NCCL_API(ncclResult_t, ncclCommDeregister, (const ncclComm_t comm, void* handle), comm, handle) {
  NCCL_TRY(checkKnownComm(comm, "ncclCommDeregister"));
  auto* registration = static_cast<Registration*>(handle);
  // NCCL answers ncclInvalidUsage to a handle it does not know (so does the loser of two racing calls).
  if (!liveHandles().take(registration, [&] {
        return registration->magic == Registration::kMagic && registration->comm == comm;
      }))
    return toNccl(fail(Status::kInvalidUsage, "ncclCommDeregister: not a registration of this comm"));
  registration->magic = 0;
  withImpl(comm, "ncclCommDeregister: comm was aborted", [&](mscclpp_nccl::Communicator& impl) {
    impl.unregisterBuffer(registration->buffer, registration->size);
    return Status::kSuccess;
  });
  delete registration;
  return ncclSuccess;
}

NCCL_GROUP_API(ncclResult_t, ncclCommWindowRegister,
               (ncclComm_t comm, void* buff, size_t size, ncclWindow_t* win, int winFlags), comm, buff, size,
               win, winFlags) {
  NCCL_TRY(checkReadyComm(comm, "ncclCommWindowRegister"));
  if (buff == nullptr || win == nullptr)
    return toNccl(fail(Status::kInvalidArgument, "ncclCommWindowRegister: buff or win is NULL"));
  std::unique_ptr<ncclWindow_vidmem> owned(
      new ncclWindow_vidmem{ncclWindow_vidmem::kMagic, comm, buff, size, winFlags});
  liveHandles().add(owned.get());
  ncclWindow_vidmem* window = owned.release();
  *win = window;
  // Collective: inside a group it runs at ncclGroupEnd, concurrently with the other communicators'
  // registrations of this thread (one thread may register for every rank of its process), and after
  // this communicator's earlier ones (every rank must exchange its windows in the same order).
  // The work reads nothing of `window` but under liveHandles(): a deferred registration whose window
  // was deregistered before ncclGroupEnd still takes part in the exchange (peers wait for it), then
  // drops what it mapped.
  const bool symmetric = (winFlags & NCCL_WIN_COLL_SYMMETRIC) != 0;
  auto work = [comm, window, buff, size, symmetric]() -> ncclResult_t {
    return toNccl(
        withImpl(comm, "ncclCommWindowRegister: comm was aborted", [&](mscclpp_nccl::Communicator& impl) {
          DeviceGuard guard(comm->device);
          mscclpp_nccl::SymmetricWindow* native = nullptr;
          MSCCLPP_TRY(impl.registerWindow(buff, size, symmetric, &native));
          if (!liveHandles().read(window, [&] { window->native = native; }))
            return impl.deregisterWindow(native);
          return Status::kSuccess;
        }));
  };
  if (groupDepth() > 0) {
    deferToGroupEnd(work, /*orderKey=*/comm);
    return ncclSuccess;
  }
  ncclResult_t result = work();
  if (result != ncclSuccess) {
    *win = nullptr;
    if (liveHandles().take(window, [] { return true; })) {  // else a racing deregistration freed it
      window->magic = 0;
      delete window;
    }
  }
  return result;
}

NCCL_API(ncclResult_t, ncclCommWindowDeregister, (ncclComm_t comm, ncclWindow_t win), comm, win) {
  NCCL_TRY(checkKnownComm(comm, "ncclCommWindowDeregister"));
  if (!liveHandles().take(win, [&] { return win->magic == ncclWindow_vidmem::kMagic && win->comm == comm; }))
    return toNccl(fail(Status::kInvalidArgument, "ncclCommWindowDeregister: not a window of this comm"));
  ncclResult_t result = ncclSuccess;
  if (mscclpp_nccl::SymmetricWindow* native = win->native.load()) {
    std::shared_lock<std::shared_mutex> lock(comm->implMutex);
    if (comm->impl) {
      DeviceGuard guard(comm->device);
      result = toNccl(comm->impl->deregisterWindow(native));
    }
  }
  win->magic = 0;
  delete win;
  return result;
}

NCCL_API(ncclResult_t, ncclWinGetUserPtr, (ncclComm_t comm, ncclWindow_t win, void** outUserPtr), comm, win,
         outUserPtr) {
  NCCL_TRY(checkKnownComm(comm, "ncclWinGetUserPtr"));
  bool valid = false;
  if (outUserPtr != nullptr)
    liveHandles().read(win, [&] {
      valid = win->magic == ncclWindow_vidmem::kMagic;
      if (valid) *outUserPtr = win->userPtr;
    });
  if (!valid) return toNccl(fail(Status::kInvalidArgument, "ncclWinGetUserPtr: bad window or NULL output"));
  return ncclSuccess;
}

ncclComm* windowComm(ncclWindow_t win, const mscclpp_nccl::SymmetricWindow** native) {
  ncclComm* comm = nullptr;
  *native = nullptr;
  liveHandles().read(win, [&] {
    if (win->magic != ncclWindow_vidmem::kMagic) return;
    comm = win->comm;
    *native = win->native.load();
  });
  return comm;
}

const mscclpp_nccl::SymmetricWindow* nativeWindow(ncclComm* comm, ncclWindow_t win) {
  const mscclpp_nccl::SymmetricWindow* native = nullptr;
  liveHandles().read(win, [&] {
    if (win->magic == ncclWindow_vidmem::kMagic && win->comm == comm) native = win->native.load();
  });
  return native;
}
