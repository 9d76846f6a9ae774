"""One rank's hold on the GPU: the library under test, its communicator, a stream, device buffers, and
the copies, fills and graph captures on that stream."""

from __future__ import annotations

import contextlib
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..gpus import local_device
from .collectives import DType, Layout
from .data import input_for
from .hostgroup import HostGroup
from .options import Options
from .process import BenchError, RankInfo, Watchdog


@dataclass
class DeviceBuffer:
    ptr: int
    size: int
    release: Callable[[], Any]
    owner: Any = None  # what keeps the memory alive (CuPy's allocations)


_EXT_CDEF = """
int ncclGather(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root, void* comm,
               void* stream);
int ncclScatter(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root, void* comm,
                void* stream);
"""


def _load_ext(path: str) -> Any:
    """ncclGather/ncclScatter (NCCL 2.28+), which the shared binding does not declare."""
    import cffi

    ext = cffi.FFI()
    ext.cdef(_EXT_CDEF)
    return ext, ext.dlopen(path)


def rank_device(ndev: int) -> int:
    """This rank's device: NCCL_TESTS_DEVICE for every rank when set (as nccl-tests), else the launcher's
    MSCCLPP_NCCL_DEVICE, else the local rank (torchrun's or MPI's) over the GPUs (gpus.local_device)."""
    fixed = os.environ.get("NCCL_TESTS_DEVICE", "").strip()
    if fixed:
        try:
            return int(fixed)
        except ValueError:
            raise BenchError(f"NCCL_TESTS_DEVICE={fixed!r} is not a device index") from None
    return local_device(ndev)


class Rank:
    """One rank of a run: its communicator, stream and buffers, and the stream's copies and captures.

    cupy and nccl (a binding.Nccl) are looked up when not given; tests pass stand-ins.
    """

    def __init__(self, opts: Options, where: RankInfo, cupy: Any = None, nccl: Any = None) -> None:
        from ..binding import Nccl, ffi

        if cupy is None:
            import cupy
        cp = cupy
        self.cp = cp
        self.ffi = ffi
        self.opts = opts
        self.rank = where.rank
        self.nranks = where.nranks
        self.watchdog = Watchdog(self.rank)
        self.comm: Any = None
        self.watchdog.on_fire = self.abort
        self.group = HostGroup(self.rank, self.nranks, where.host, where.port, opts.timeout)
        if nccl is None:
            nccl = Nccl.load(opts.lib) if opts.lib else Nccl.load()
        self.nccl = nccl
        self.lib = nccl.lib
        self.version = nccl.version()
        # ncclGather/ncclScatter, which the shared binding does not declare (a stand-in may bring its own).
        self.ext_ffi, self.ext = getattr(nccl, "ext", None) or (None, None)
        if self.ext is None:
            with contextlib.suppress(OSError):
                self.ext_ffi, self.ext = _load_ext(nccl.path)
        self.device = rank_device(cp.cuda.runtime.getDeviceCount())
        cp.cuda.Device(self.device).use()
        # Every copy, fill, collective and capture of this rank is ordered on this one stream (-y 1: the
        # NULL stream, as nccl-tests).
        self.stream = cp.cuda.Stream.null if opts.stream_null else cp.cuda.Stream(non_blocking=True)
        self.stream.use()
        self.stream_ptr = ffi.cast("void*", self.stream.ptr)
        self.send: DeviceBuffer | None = None
        self.recv: DeviceBuffer | None = None
        self.registrations: list[tuple[Any, Any]] = []  # (deregistering function, handle) for -R

    # --- set-up and teardown ---------------------------------------------------------------------------
    def init_comm(self) -> None:
        from ..binding import new_config, unique_id_to_hex

        uid = unique_id_to_hex(self.nccl.get_unique_id()) if self.rank == 0 else None
        uid = self.group.allgather(uid)[0]
        fields: dict[str, int] = {}
        if self.version >= 22800:
            fields["nvlinkCentricSched"] = 1  # as nccl-tests built against 2.28+ headers
        if self.version >= 23000 and self.opts.collective == "sendrecv":
            fields["maxP2pPeers"] = 2
        if self.opts.cta_policy >= 0:  # -x, as nccl-tests
            fields["CTAPolicy"] = self.opts.cta_policy
        config = new_config(**fields) if fields else None
        with self.watchdog.phase(self.opts.timeout, "ncclCommInitRank"):
            self.comm = self.nccl.comm_init_rank(self.nranks, uid, self.rank, config)

    def alloc(self) -> None:
        size = max(self.opts.max_bytes, 64)
        self.send = self._alloc(size)
        self.recv = self._alloc(size)
        if self.opts.local_register:
            self._register(size)

    def _register(self, size: int) -> None:
        """-R 1: ncclCommRegister both buffers; -R 2: ncclCommWindowRegister them as symmetric windows;
        inside one group, as nccl-tests does."""
        assert self.send is not None and self.recv is not None
        lib, ffi = self.lib, self.ffi
        self.nccl.check(lib.ncclGroupStart())
        try:
            for buf in (self.send, self.recv):
                ptr = ffi.cast("void*", buf.ptr)
                if self.opts.local_register == 2:
                    win = ffi.new("ncclWindow_t*")
                    self.nccl.check(lib.ncclCommWindowRegister(self.comm, ptr, size, win, 1), self.comm)
                    self.registrations.append((lib.ncclCommWindowDeregister, win[0]))
                else:
                    handle = ffi.new("void**")
                    self.nccl.check(lib.ncclCommRegister(self.comm, ptr, size, handle), self.comm)
                    self.registrations.append((lib.ncclCommDeregister, handle[0]))
        finally:
            self.nccl.check(lib.ncclGroupEnd(), self.comm)

    def _alloc(self, size: int) -> DeviceBuffer:
        if self.opts.alloc == "ncclmem":
            p = self.ffi.new("void**")
            rc = self.lib.ncclMemAlloc(p, size)
            if rc == 0:
                ptr = int(self.ffi.cast("uintptr_t", p[0]))
                return DeviceBuffer(ptr, size, lambda: self.lib.ncclMemFree(self.ffi.cast("void*", ptr)))
            raise BenchError(
                f"ncclMemAlloc({size}) failed: {self.nccl.last_error() or self.nccl.error_string(rc)}"
                " (--alloc cuda uses cudaMalloc instead)"
            )
        mem = self.cp.cuda.alloc(size)
        return DeviceBuffer(int(mem.ptr), size, lambda: None, owner=mem)

    def device_line(self) -> dict[str, Any]:
        props = self.cp.cuda.runtime.getDeviceProperties(self.device)
        name = props.get("name", b"?")
        name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        if "major" in props:
            cc = int(props["major"]) * 10 + int(props.get("minor", 0))
        else:
            cc = int(self.cp.cuda.Device(self.device).compute_capability)
        pci = (int(props.get(k, 0)) for k in ("pciDomainID", "pciBusID", "pciDeviceID"))
        return {
            "rank": self.rank,
            "group": 0,
            "pid": os.getpid(),
            "hostname": socket.gethostname().split(".")[0],
            "device": self.device,
            "device_hex": "{:04x}:{:02x}:{:02x}".format(*pci),
            "device_info": name,
            "cc": cc,
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        }

    def abort(self) -> None:
        """Aborts the communicator, so that this rank's kernels stop (after a failure or a timeout)."""
        comm, self.comm = self.comm, None
        self.abort_comm(comm)

    def abort_comm(self, comm: Any) -> None:
        """ncclCommAbort(comm), a failure of it ignored (nothing more can be done); nothing for None."""
        if comm is not None:
            with contextlib.suppress(Exception):
                self.lib.ncclCommAbort(comm)

    def teardown(self) -> None:
        with self.watchdog.phase(min(self.opts.timeout, 120.0), "ncclCommFinalize/ncclCommDestroy"):
            self.wait("the last work before teardown")
            comm, self.comm = self.comm, None
            registrations, self.registrations = self.registrations, []
            for deregister, handle in registrations:
                self.nccl.check(deregister(comm, handle), comm)
            if comm is not None:
                self.nccl.check(self.lib.ncclCommFinalize(comm), comm)
                self.nccl.check(self.lib.ncclCommDestroy(comm))
            for buf in (self.send, self.recv):  # after the communicator, as nccl-tests frees them
                if buf is not None:
                    buf.release()
            self.send = self.recv = None
        self.group.close()

    # --- stream helpers ---------------------------------------------------------------------------------
    def stream_failure(self, timeout: float) -> str | None:
        """Waits for the stream, polling (as nccl-tests) with async-error checks; the failure as text (an
        asynchronous error, or not done within timeout seconds), None when the work finished."""
        start = time.monotonic()
        err = self.ffi.new("ncclResult_t*")
        poll_errors = self.comm is not None
        stream = self.stream
        while not stream.done:
            if poll_errors:
                if self.lib.ncclCommGetAsyncError(self.comm, err) != 0:
                    poll_errors = False  # the query itself is not supported: stop asking
                elif err[0] not in (0, 7):
                    code = int(err[0])
                    return f"asynchronous error {code}: {self.nccl.error_string(code)}"
            if time.monotonic() - start > timeout:
                return f"not done after {timeout:g} s (-T)"
            os.sched_yield()
        return None

    def wait(self, what: str) -> None:
        """Synchronise the stream with the -T timeout; on a failure, abort the communicator and raise."""
        failure = self.stream_failure(self.opts.timeout)
        if failure is not None:
            self.abort()
            timed_out = failure.startswith("not done")
            raise BenchError(f"{what}: {failure}{'; aborted the communicator' if timed_out else ''}")

    def memset(self, ptr: int, nbytes: int) -> None:
        if nbytes:
            self.cp.cuda.runtime.memsetAsync(ptr, 0, nbytes, self.stream.ptr)

    def write(self, ptr: int, host: np.ndarray) -> None:
        if host.nbytes:
            host = np.ascontiguousarray(host)
            kind = self.cp.cuda.runtime.memcpyDefault
            self.cp.cuda.runtime.memcpyAsync(ptr, host.ctypes.data, host.nbytes, kind, self.stream.ptr)
            self.wait("copying input to the GPU")  # the host array must outlive the copy

    def read(self, ptr: int, count: int, dt: DType) -> np.ndarray:
        out = np.empty(count, dtype=dt.storage)
        if out.nbytes:
            kind = self.cp.cuda.runtime.memcpyDefault
            self.cp.cuda.runtime.memcpyAsync(out.ctypes.data, ptr, out.nbytes, kind, self.stream.ptr)
            self.wait("copying the output to the host")
        return out

    def capture(self, issue: Callable[[], None], mode_name: str) -> Any:
        """A CUDA graph of what issue() enqueues on the stream."""
        rt = self.cp.cuda.runtime
        mode = getattr(rt, mode_name, 1 if mode_name == "streamCaptureModeThreadLocal" else 0)
        try:
            self.stream.begin_capture(mode=mode)
        except TypeError:  # an older CuPy without the argument
            self.stream.begin_capture()
        try:
            issue()
        except BaseException:
            with contextlib.suppress(Exception):
                self.stream.end_capture()
            raise
        return self.stream.end_capture()

    # --- data ------------------------------------------------------------------------------------------
    def init_data(self, lay: Layout, dt: DType, kind: str, root: int, in_place: bool, seed: int) -> None:
        """Zero the receive side, then write this rank's input where the call reads it (iteration 0)."""
        assert self.send is not None and self.recv is not None
        self.memset(self.recv.ptr, lay.size)
        data = input_for(self.opts.collective, dt, kind, self.nranks, self.rank, root, lay, seed)
        if data is not None:
            dst = self.recv.ptr + lay.send_inplace * dt.size * self.rank if in_place else self.send.ptr
            self.write(dst, data)
        self.wait("initialising the buffers")
