"""A segment of cuMem allocations mapped side by side in one reserved range, as PyTorch's expandable
segments grow: a buffer in it may span several allocations. Driven through the CUDA driver with ctypes,
on the current device (CuPy has made its context current)."""

from __future__ import annotations

import ctypes

import cupy as cp

POSIX_FD = 1  # CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
PINNED = 1  # CU_MEM_ALLOCATION_TYPE_PINNED
ON_DEVICE = 1  # CU_MEM_LOCATION_TYPE_DEVICE
READ_WRITE = 3  # CU_MEM_ACCESS_FLAGS_PROT_READWRITE


class Location(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("id", ctypes.c_int)]


class AllocFlags(ctypes.Structure):
    _fields_ = [
        ("compressionType", ctypes.c_ubyte),
        ("gpuDirectRDMACapable", ctypes.c_ubyte),
        ("usage", ctypes.c_ushort),
        ("reserved", ctypes.c_ubyte * 4),
    ]


class AllocationProp(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int),
        ("requestedHandleTypes", ctypes.c_int),
        ("location", Location),
        ("win32HandleMetaData", ctypes.c_void_p),
        ("allocFlags", AllocFlags),
    ]


class AccessDesc(ctypes.Structure):
    _fields_ = [("location", Location), ("flags", ctypes.c_int)]


class Segment:
    """`pieces` allocations of `piece_bytes` each (a multiple of 2 MiB), mapped in order from `base`."""

    def __init__(self, pieces: int, piece_bytes: int) -> None:
        self.cuda = ctypes.CDLL("libcuda.so.1")
        self.piece_bytes = piece_bytes
        self.prop = AllocationProp()
        self.prop.type = PINNED
        self.prop.requestedHandleTypes = POSIX_FD
        self.prop.location = Location(ON_DEVICE, cp.cuda.Device().id)
        reserved = ctypes.c_uint64()
        self.total = pieces * piece_bytes
        self.check(
            self.cuda.cuMemAddressReserve(
                ctypes.byref(reserved),
                ctypes.c_size_t(self.total),
                ctypes.c_size_t(2 << 20),
                ctypes.c_uint64(0),
                ctypes.c_uint64(0),
            ),
            "reserve",
        )
        self.base = reserved.value
        self.handles: list[int | None] = [None] * pieces
        for piece in range(pieces):
            self.map_piece(piece)

    def check(self, result: int, what: str) -> None:
        assert result == 0, f"cuMem {what}: CUresult {result}"

    def address(self, piece: int) -> int:
        return self.base + piece * self.piece_bytes

    def map_piece(self, piece: int) -> None:
        """Backs `piece` with a new allocation (a new buffer id, as a segment that shrank and grew again)."""
        handle = ctypes.c_uint64()
        size = ctypes.c_size_t(self.piece_bytes)
        self.check(
            self.cuda.cuMemCreate(ctypes.byref(handle), size, ctypes.byref(self.prop), ctypes.c_uint64(0)),
            "create",
        )
        self.check(
            self.cuda.cuMemMap(
                ctypes.c_uint64(self.address(piece)), size, ctypes.c_size_t(0), handle, ctypes.c_uint64(0)
            ),
            "map",
        )
        access = AccessDesc(Location(ON_DEVICE, cp.cuda.Device().id), READ_WRITE)
        self.check(
            self.cuda.cuMemSetAccess(
                ctypes.c_uint64(self.address(piece)), size, ctypes.byref(access), ctypes.c_size_t(1)
            ),
            "set access",
        )
        self.handles[piece] = handle.value

    def unmap_piece(self, piece: int) -> None:
        cp.cuda.Device().synchronize()
        size = ctypes.c_size_t(self.piece_bytes)
        self.check(self.cuda.cuMemUnmap(ctypes.c_uint64(self.address(piece)), size), "unmap")
        self.check(self.cuda.cuMemRelease(ctypes.c_uint64(self.handles[piece])), "release")
        self.handles[piece] = None

    def free(self) -> None:
        for piece, handle in enumerate(self.handles):
            if handle is not None:
                self.unmap_piece(piece)
        self.check(
            self.cuda.cuMemAddressFree(ctypes.c_uint64(self.base), ctypes.c_size_t(self.total)), "free"
        )
