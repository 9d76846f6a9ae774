"""The host entry points of NCCL's device API (stock's nccl_device/host.h) that the library implements:
window pointers and teams. nccl.h does not declare them, so the package's binding, generated from it,
does not either; the GPU workers reach them through this declaration of their own."""

from __future__ import annotations

from typing import Any

import cffi

from mscclpp_nccl.binding import Nccl
from mscclpp_nccl.binding import ffi as nccl_ffi

ffi = cffi.FFI()
ffi.cdef(
    """
    typedef struct { int nRanks; int rank; int stride; } ncclTeam_t;
    int ncclGetPeerDevicePointer(void* window, size_t offset, int peer, void** outPtr);
    int ncclGetLsaDevicePointer(void* window, size_t offset, int lsaRank, void** outPtr);
    ncclTeam_t ncclTeamWorld(void* comm);
    ncclTeam_t ncclTeamLsa(void* comm);
    ncclTeam_t ncclTeamRail(void* comm);
    int ncclTeamRankToWorld(void* comm, ncclTeam_t team, int rank);
    int ncclTeamRankToLsa(void* comm, ncclTeam_t team, int rank);
    """
)


def load(nccl: Nccl) -> Any:
    """The same library as `nccl`'s (dlopen finds the one already loaded), through these declarations."""
    return ffi.dlopen(nccl.path)


def handle(cdata: Any) -> Any:
    """A communicator or window handle of the package's binding, as a pointer of these declarations."""
    return ffi.cast("void*", int(nccl_ffi.cast("uintptr_t", cdata)))
