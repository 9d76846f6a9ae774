"""Stand-ins that let the benchmark's and the tuner's worker loops run without a GPU: a host "CUDA
runtime" for the CuPy calls they make, device memory that is host memory, and the pieces every stand-in
libnccl shares (ranks are threads that rendezvous through a World). Plain module: the tests put tests/
on sys.path."""

from __future__ import annotations

import ctypes
import socket
import threading
from types import SimpleNamespace
from typing import Any

import numpy as np

from mscclpp_nccl import bench as b
from mscclpp_nccl.binding import ffi

TYPE_BY_CODE = {dt.nccl: dt for dt in b.TYPES}


class World:
    """What the ranks of a stand-in library share: a rendezvous for every call."""

    def __init__(self, n: int) -> None:
        self.n = n
        self.barrier = threading.Barrier(n, timeout=30)
        self.slots: list[Any] = [None] * n

    def exchange(self, rank: int, value: Any) -> list[Any]:
        """Every rank's `value`, once every rank has given one."""
        self.slots[rank] = value
        self.barrier.wait()
        values = list(self.slots)
        self.barrier.wait()
        return values


def view(p: Any, count: int, dt: b.DType) -> np.ndarray:
    """The `count` elements at cffi pointer `p` (host memory), as a NumPy array over the same bytes."""
    if count == 0:
        return np.zeros(0, dt.storage)
    raw = (ctypes.c_char * (count * dt.size)).from_address(int(ffi.cast("uintptr_t", p)))
    return np.frombuffer(raw, dtype=dt.storage)


class HostRuntime:
    """cupy.cuda.runtime as the workers use it; copies happen at once."""

    memcpyDefault = 4
    streamCaptureModeGlobal = 0
    streamCaptureModeThreadLocal = 1

    @staticmethod
    def memcpyAsync(dst: int, src: int, n: int, kind: int, stream: int) -> None:
        ctypes.memmove(dst, src, n)

    @staticmethod
    def memsetAsync(ptr: int, value: int, n: int, stream: int) -> None:
        ctypes.memset(ptr, value, n)

    @staticmethod
    def getDeviceCount() -> int:
        return 1

    @staticmethod
    def getDeviceProperties(device: int) -> dict[str, Any]:
        return {
            "name": b"Fake H200",
            "multiProcessorCount": 132,
            "pciDomainID": 0,
            "pciBusID": 0x18,
            "pciDeviceID": 0,
            "major": 9,
            "minor": 0,
        }


class Device:
    def __init__(self, device: int) -> None:
        pass

    def use(self) -> None:
        pass


class Mem:
    """cupy.cuda.alloc: `size` bytes of host memory."""

    def __init__(self, size: int) -> None:
        self.buf = ctypes.create_string_buffer(size)
        self.ptr = ctypes.addressof(self.buf)


def fake_cupy(runtime: type, stream: type) -> SimpleNamespace:
    """A `cupy` module with this runtime and stream class."""
    return SimpleNamespace(
        cuda=SimpleNamespace(runtime=runtime, Stream=stream, Device=Device, alloc=Mem), __version__="fake"
    )


class FakeLibResources:
    """The calls of a stand-in libnccl that only manage resources: memory from the host, no errors."""

    def __init__(self) -> None:
        self.buffers: list[Any] = []
        self.registered: list[str] = []  # "buffer" (ncclCommRegister) or "window", in call order
        self.deregistered = 0

    def ncclMemAlloc(self, p: Any, size: int) -> int:
        buf = ctypes.create_string_buffer(size)
        self.buffers.append(buf)
        p[0] = ffi.cast("void*", ctypes.addressof(buf))
        return 0

    def ncclMemFree(self, p: Any) -> int:
        return 0

    def ncclCommRegister(self, comm: Any, buff: Any, size: int, handle: Any) -> int:
        self.registered.append("buffer")
        handle[0] = ffi.cast("void*", 0x7000 + len(self.registered))
        return 0

    def ncclCommWindowRegister(self, comm: Any, buff: Any, size: int, win: Any, flags: int) -> int:
        assert flags == 1  # NCCL_WIN_COLL_SYMMETRIC, as nccl-tests -R 2
        self.registered.append("window")
        win[0] = ffi.cast("ncclWindow_t", 0x7000 + len(self.registered))
        return 0

    def ncclCommDeregister(self, comm: Any, handle: Any) -> int:
        self.deregistered += 1
        return 0

    def ncclCommWindowDeregister(self, comm: Any, win: Any) -> int:
        self.deregistered += 1
        return 0

    def ncclCommGetAsyncError(self, comm: Any, err: Any) -> int:
        err[0] = 0
        return 0

    def ncclCommFinalize(self, comm: Any) -> int:
        return 0

    def ncclCommDestroy(self, comm: Any) -> int:
        return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class FileWorld:
    """A World whose ranks are processes: every exchange goes through files in a shared directory (one per
    rank and call; the ranks make the same calls in the same order)."""

    def __init__(self, directory: str, rank: int, n: int, timeout: float = 60.0) -> None:
        import pathlib

        self.dir = pathlib.Path(directory)
        self.rank, self.n, self.timeout = rank, n, timeout
        self.calls = 0

    def exchange(self, rank: int, value: Any) -> list[Any]:
        import os
        import pickle
        import time

        call, self.calls = self.calls, self.calls + 1
        tmp = self.dir / f"{call}.{rank}.tmp"
        tmp.write_bytes(pickle.dumps(value))
        os.replace(tmp, self.dir / f"{call}.{rank}")
        deadline = time.monotonic() + self.timeout
        values = []
        for r in range(self.n):
            path = self.dir / f"{call}.{r}"
            while not path.exists():
                if time.monotonic() > deadline:
                    raise TimeoutError(f"rank {r} did not reach exchange {call}")
                time.sleep(0.001)
            values.append(pickle.loads(path.read_bytes()))
        return values
