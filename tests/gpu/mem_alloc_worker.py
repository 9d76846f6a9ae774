"""ncclMemAlloc / ncclMemFree on one GPU, through our binding and CuPy (one process, no launcher).

Allocates several sizes, checks that CUDA sees device memory of the current device, writes and reads
it from the host and from kernels, and frees it. Where the device supports VMM with POSIX
file-descriptor handles (and NCCL_CUMEM_ENABLE is not 0), the memory must be an exportable cuMem
allocation; otherwise plain cudaMalloc memory. Prints PASS lines; any failure raises.
"""

from __future__ import annotations

import ctypes
import os

import cupy as cp
import numpy as np

from mscclpp_nccl.binding import Nccl, ffi

SIZES = [1, 4096 + 1, 64 << 20]
CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102
CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103
CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 0x1
MEMORY_TYPE_DEVICE = 2  # cudaMemoryTypeDevice


class Driver:
    """The few driver calls that tell a cuMem allocation from a cudaMalloc one (the test may link libcuda)."""

    def __init__(self) -> None:
        self.cuda = ctypes.CDLL("libcuda.so.1")
        assert self.cuda.cuInit(0) == 0

    def attribute(self, attr: int, device: int) -> int:
        value = ctypes.c_int(0)
        assert self.cuda.cuDeviceGetAttribute(ctypes.byref(value), attr, device) == 0
        return value.value

    def cumem_handle_types(self, ptr: int) -> int | None:
        """requestedHandleTypes of the cuMem allocation containing ptr; None for non-cuMem memory."""
        handle = ctypes.c_ulonglong(0)
        if self.cuda.cuMemRetainAllocationHandle(ctypes.byref(handle), ctypes.c_void_p(ptr)) != 0:
            return None
        prop = (ctypes.c_int * 16)()  # CUmemAllocationProp is 32 bytes; type, requestedHandleTypes, ...
        try:
            assert self.cuda.cuMemGetAllocationPropertiesFromHandle(prop, handle) == 0
        finally:
            assert self.cuda.cuMemRelease(handle) == 0
        return prop[1]


def expect_cumem(driver: Driver, device: int) -> bool:
    if os.environ.get("NCCL_CUMEM_ENABLE", "").strip() == "0":
        return False
    return bool(
        driver.attribute(CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device)
        and driver.attribute(CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device)
    )


def alloc(nccl: Nccl, size: int) -> int:
    out = ffi.new("void**")
    nccl.check(nccl.lib.ncclMemAlloc(out, size))
    ptr = int(ffi.cast("uintptr_t", out[0]))
    assert ptr != 0, f"ncclMemAlloc({size}) returned NULL"
    return ptr


def wrap(ptr: int, size: int, device: int) -> cp.ndarray:
    mem = cp.cuda.UnownedMemory(ptr, size, owner=None, device_id=device)
    return cp.ndarray((size,), dtype=cp.uint8, memptr=cp.cuda.MemoryPointer(mem, 0))


def check_size(nccl: Nccl, driver: Driver, device: int, cumem: bool, size: int) -> None:
    ptr = alloc(nccl, size)
    attrs = cp.cuda.runtime.pointerGetAttributes(ptr)
    kind = getattr(attrs, "type", getattr(attrs, "memoryType", None))  # CuPy renamed it
    assert kind == MEMORY_TYPE_DEVICE, f"{size}: cudaPointerGetAttributes type {kind}"
    assert attrs.device == device, f"{size}: on device {attrs.device}, expected {device}"
    types = driver.cumem_handle_types(ptr)
    if cumem:
        assert types is not None, f"{size}: expected a cuMem allocation, got cudaMalloc-like memory"
        assert types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, f"{size}: handle types {types:#x}"
        # The last byte lies inside the same allocation.
        assert driver.cumem_handle_types(ptr + size - 1) == types
    else:
        assert types is None, f"{size}: expected cudaMalloc memory, got a cuMem allocation"

    arr = wrap(ptr, size, device)
    expected = (np.arange(size, dtype=np.uint32) * np.uint32(2654435761) >> 7).astype(np.uint8)
    arr.set(expected)  # host -> device
    np.testing.assert_array_equal(arr.get(), expected)  # device -> host
    arr += 3  # a kernel reads and writes it
    copy = arr.copy()  # device -> device
    cp.cuda.Device(device).synchronize()
    np.testing.assert_array_equal(copy.get(), expected + np.uint8(3))
    arr.fill(0xA5)
    assert int(cp.count_nonzero(arr != 0xA5)) == 0
    del arr, copy
    cp.cuda.Device(device).synchronize()
    nccl.check(nccl.lib.ncclMemFree(ffi.cast("void*", ptr)))
    print(f"PASS size {size} ({'cuMem' if cumem else 'cudaMalloc'})", flush=True)


def check_many(nccl: Nccl) -> None:
    """Interleaved allocations and frees, out of order; size 0 and NULL behave like stock."""
    ptrs = [alloc(nccl, s) for s in (5, 3 << 20, 1, 8 << 20)]
    assert len(set(ptrs)) == len(ptrs)
    for p in (ptrs[1], ptrs[3], ptrs[0], ptrs[2]):
        nccl.check(nccl.lib.ncclMemFree(ffi.cast("void*", p)))
    out = ffi.new("void**")
    nccl.check(nccl.lib.ncclMemAlloc(out, 0))
    assert out[0] == ffi.NULL
    nccl.check(nccl.lib.ncclMemFree(ffi.NULL))
    assert int(nccl.lib.ncclMemAlloc(ffi.NULL, 8)) == 4  # ncclInvalidArgument
    print("PASS many", flush=True)


def check_foreign_free(nccl: Nccl) -> None:
    """ncclMemFree of memory it did not allocate falls back to cudaFree, as stock's does."""
    ptr = cp.cuda.runtime.malloc(1 << 16)
    nccl.check(nccl.lib.ncclMemFree(ffi.cast("void*", ptr)))
    print("PASS foreign_free", flush=True)


def check_huge_fails(nccl: Nccl) -> None:
    """An impossible size is an error with a message, not a crash, and later allocations still work."""
    out = ffi.new("void**")
    result = int(nccl.lib.ncclMemAlloc(out, 1 << 62))
    assert result == 1, f"ncclMemAlloc(2^62) returned {result}"  # ncclUnhandledCudaError
    assert out[0] == ffi.NULL
    assert nccl.last_error(), "no ncclGetLastError text"
    ptr = alloc(nccl, 4096)
    nccl.check(nccl.lib.ncclMemFree(ffi.cast("void*", ptr)))
    print("PASS huge_fails", flush=True)


def main() -> None:
    device = 0
    cp.cuda.Device(device).use()
    nccl = Nccl.load()
    driver = Driver()
    cumem = expect_cumem(driver, device)
    for size in SIZES:
        check_size(nccl, driver, device, cumem, size)
    check_many(nccl)
    check_foreign_free(nccl)
    check_huge_fails(nccl)
    print("PASS", flush=True)


if __name__ == "__main__":
    main()
