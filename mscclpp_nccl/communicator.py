"""A communicator over GPU arrays: CuPy, PyTorch, JAX (DLPack) or anything with __cuda_array_interface__
(mscclpp_nccl.arrays), with every collective, send/recv and groups. CuPy is imported on first use (for
the device and a default stream), so this module imports without it."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from types import ModuleType, TracebackType
from typing import Any

from .arrays import DeviceBuffer, device_buffer, stream_handle
from .binding import (
    SPLIT_NOCOLOR,
    Nccl,
    NcclError,
    dtype_code,
    ffi,
    new_config,
    op_code,
    unique_id_from_hex,
    unique_id_to_hex,
)
from .gpus import local_device
from .mpi_world import MpiWorld, broadcast_from_rank0, mpi4py_comm, mpi_world


def _cupy() -> ModuleType:
    import cupy

    return cupy


def _stream_ptr(stream: Any) -> Any:
    """A cudaStream_t from None (CuPy's current stream), a CuPy/PyTorch stream or a raw handle."""
    return ffi.cast("void*", stream_handle(stream))


def _as_config(config: Any) -> Any:
    if config is None or isinstance(config, ffi.CData):
        return config
    if isinstance(config, dict):
        return new_config(**config)
    raise TypeError("config must be None, a dict of ncclConfig_t fields or an ncclConfig_t*")


class Communicator:
    """One rank of an NCCL communicator, bound to one CUDA device."""

    def __init__(
        self,
        nranks: int,
        rank: int,
        unique_id: Any,
        device: int | None = None,
        config: Any = None,
        nccl: Nccl | None = None,
    ) -> None:
        cp = _cupy()
        self._nccl = nccl or Nccl.load()
        if device is None:
            # The launcher's MSCCLPP_NCCL_DEVICE, else the local rank (torchrun's or MPI's) over the GPUs.
            device = local_device(cp.cuda.runtime.getDeviceCount())
        self._device = int(device)
        if isinstance(unique_id, str):
            unique_id = unique_id_from_hex(unique_id)
        elif isinstance(unique_id, bytes | bytearray):
            unique_id = unique_id_from_hex(bytes(unique_id).hex())
        self._config = _as_config(config)  # kept alive while the library may read it
        with cp.cuda.Device(self._device):
            self._comm = self._nccl.comm_init_rank(nranks, unique_id, rank, self._config)
        self._rank = rank
        self._size = nranks
        self._scratch: Any = None

    @classmethod
    def _wrap(cls, nccl: Nccl, comm: Any, device: int) -> Communicator:
        self = cls.__new__(cls)
        self._nccl = nccl
        self._comm = comm
        self._device = device
        self._config = None
        self._rank = nccl.comm_user_rank(comm)
        self._size = nccl.comm_count(comm)
        self._scratch = None
        return self

    # --- properties -------------------------------------------------------------------------------
    rank = property(lambda self: self._rank, doc="This rank's index in the communicator.")
    size = property(lambda self: self._size, doc="The number of ranks.")
    device = property(lambda self: self._device, doc="The CUDA device this rank uses.")

    @property
    def handle(self) -> Any:
        """The ncclComm_t (cffi pointer)."""
        return self._comm

    def _live(self) -> Any:
        if self._comm is None:
            raise RuntimeError("the communicator was destroyed")
        return self._comm

    # --- collectives ------------------------------------------------------------------------------
    # Every collective takes GPU arrays (mscclpp_nccl.arrays.device_buffer: CuPy, PyTorch, DLPack, or
    # __cuda_array_interface__), C-contiguous; dtype overrides the arrays' type (bfloat16 or fp8 data in
    # uint16 or uint8 arrays). A stream is None (CuPy's current one), a raw cudaStream_t or a stream object.
    # The calls enqueue on the stream and return the output array without synchronising.

    def _buffers(self, send: Any, recv: Any, dtype: Any) -> tuple[DeviceBuffer, DeviceBuffer]:
        s = device_buffer(send, dtype)
        r = s if recv is None or recv is send else device_buffer(recv, dtype)
        if r.dtype != s.dtype:
            raise ValueError(f"sendbuf holds {s.dtype}, recvbuf {r.dtype}")
        return s, r

    def _enqueue(self, name: str, *args: Any, stream: Any) -> None:
        """lib.name(*args, comm, stream), checked: every collective's call."""
        comm = self._live()
        self._nccl.check(getattr(self._nccl.lib, name)(*args, comm, _stream_ptr(stream)), comm)

    @staticmethod
    def _ptr(b: DeviceBuffer) -> Any:
        return ffi.cast("void*", b.ptr)

    def _whole(self, b: DeviceBuffer, what: str) -> int:
        """Elements per rank of a buffer that holds one part per rank."""
        if b.count % self._size:
            raise ValueError(f"{what}: {b.count} elements do not split into {self._size} equal parts")
        return b.count // self._size

    def all_reduce(
        self, sendbuf: Any, recvbuf: Any = None, op: str | int = "sum", stream: Any = None, dtype: Any = None
    ) -> Any:
        """recvbuf = reduction of every rank's sendbuf; in place when recvbuf is None or sendbuf."""
        s, r = self._buffers(sendbuf, recvbuf, dtype)
        if s.nbytes != r.nbytes:
            raise ValueError(f"sendbuf has {s.nbytes} bytes, recvbuf {r.nbytes}")
        self._enqueue(
            "ncclAllReduce",
            self._ptr(s),
            self._ptr(r),
            s.count,
            dtype_code(s.dtype),
            op_code(op),
            stream=stream,
        )
        return sendbuf if recvbuf is None else recvbuf

    def broadcast(
        self, sendbuf: Any, recvbuf: Any = None, root: int = 0, stream: Any = None, dtype: Any = None
    ) -> Any:
        """recvbuf on every rank = root's sendbuf (sendbuf is read on the root only); in place when recvbuf
        is None."""
        s, r = self._buffers(sendbuf, recvbuf, dtype)
        if s.nbytes != r.nbytes:
            raise ValueError(f"sendbuf has {s.nbytes} bytes, recvbuf {r.nbytes}")
        self._enqueue(
            "ncclBroadcast",
            self._ptr(s),
            self._ptr(r),
            r.count,
            dtype_code(r.dtype),
            self._root(root),
            stream=stream,
        )
        return sendbuf if recvbuf is None else recvbuf

    def reduce(
        self,
        sendbuf: Any,
        recvbuf: Any = None,
        op: str | int = "sum",
        root: int = 0,
        stream: Any = None,
        dtype: Any = None,
    ) -> Any:
        """root's recvbuf = reduction of every rank's sendbuf (recvbuf is written on the root only)."""
        s, r = self._buffers(sendbuf, recvbuf, dtype)
        if s.nbytes != r.nbytes:
            raise ValueError(f"sendbuf has {s.nbytes} bytes, recvbuf {r.nbytes}")
        self._enqueue(
            "ncclReduce",
            self._ptr(s),
            self._ptr(r),
            s.count,
            dtype_code(s.dtype),
            op_code(op),
            self._root(root),
            stream=stream,
        )
        return sendbuf if recvbuf is None else recvbuf

    def all_gather(self, sendbuf: Any, recvbuf: Any, stream: Any = None, dtype: Any = None) -> Any:
        """recvbuf = every rank's sendbuf, in rank order (recvbuf holds size x sendbuf)."""
        s, r = self._buffers(sendbuf, recvbuf, dtype)
        if r.count != s.count * self._size:
            raise ValueError(f"recvbuf holds {r.count} elements, not {self._size} x {s.count}")
        self._enqueue(
            "ncclAllGather", self._ptr(s), self._ptr(r), s.count, dtype_code(s.dtype), stream=stream
        )
        return recvbuf

    def reduce_scatter(
        self, sendbuf: Any, recvbuf: Any, op: str | int = "sum", stream: Any = None, dtype: Any = None
    ) -> Any:
        """recvbuf = this rank's part of the reduction of every rank's sendbuf (size x recvbuf)."""
        s, r = self._buffers(sendbuf, recvbuf, dtype)
        if s.count != r.count * self._size:
            raise ValueError(f"sendbuf holds {s.count} elements, not {self._size} x {r.count}")
        self._enqueue(
            "ncclReduceScatter",
            self._ptr(s),
            self._ptr(r),
            r.count,
            dtype_code(r.dtype),
            op_code(op),
            stream=stream,
        )
        return recvbuf

    def alltoall(self, sendbuf: Any, recvbuf: Any, stream: Any = None, dtype: Any = None) -> Any:
        """Part p of sendbuf goes to rank p, and recvbuf's part p comes from rank p (equal parts)."""
        s, r = self._buffers(sendbuf, recvbuf, dtype)
        if s.count != r.count:
            raise ValueError(f"sendbuf holds {s.count} elements, recvbuf {r.count}")
        self._enqueue(
            "ncclAlltoAll",
            self._ptr(s),
            self._ptr(r),
            self._whole(s, "sendbuf"),
            dtype_code(s.dtype),
            stream=stream,
        )
        return recvbuf

    def gather(self, sendbuf: Any, recvbuf: Any, root: int = 0, stream: Any = None, dtype: Any = None) -> Any:
        """root's recvbuf = every rank's sendbuf, in rank order (recvbuf, size x sendbuf, on the root only;
        pass None elsewhere)."""
        s = device_buffer(sendbuf, dtype)
        r = device_buffer(recvbuf, dtype) if recvbuf is not None else None
        if r is not None and r.dtype != s.dtype:
            raise ValueError(f"sendbuf holds {s.dtype}, recvbuf {r.dtype}")
        if self._rank == self._root(root):
            if r is None or r.count != s.count * self._size:
                raise ValueError(f"the root's recvbuf must hold {self._size} x {s.count} elements")
        self._enqueue(
            "ncclGather",
            self._ptr(s),
            ffi.NULL if r is None else self._ptr(r),
            s.count,
            dtype_code(s.dtype),
            self._root(root),
            stream=stream,
        )
        return recvbuf

    def scatter(
        self, sendbuf: Any, recvbuf: Any, root: int = 0, stream: Any = None, dtype: Any = None
    ) -> Any:
        """recvbuf = part `rank` of root's sendbuf (size x recvbuf, on the root only; None elsewhere)."""
        r = device_buffer(recvbuf, dtype)
        s = device_buffer(sendbuf, dtype) if sendbuf is not None else None
        if s is not None and r.dtype != s.dtype:
            raise ValueError(f"sendbuf holds {s.dtype}, recvbuf {r.dtype}")
        if self._rank == self._root(root):
            if s is None or s.count != r.count * self._size:
                raise ValueError(f"the root's sendbuf must hold {self._size} x {r.count} elements")
        self._enqueue(
            "ncclScatter",
            ffi.NULL if s is None else self._ptr(s),
            self._ptr(r),
            r.count,
            dtype_code(r.dtype),
            self._root(root),
            stream=stream,
        )
        return recvbuf

    def send(self, buf: Any, peer: int, stream: Any = None, dtype: Any = None) -> None:
        """Sends buf to rank peer, which receives it with recv (both inside one group() to pair several)."""
        b = device_buffer(buf, dtype)
        self._enqueue("ncclSend", self._ptr(b), b.count, dtype_code(b.dtype), self._peer(peer), stream=stream)

    def recv(self, buf: Any, peer: int, stream: Any = None, dtype: Any = None) -> Any:
        """Receives into buf what rank peer sends."""
        b = device_buffer(buf, dtype)
        self._enqueue("ncclRecv", self._ptr(b), b.count, dtype_code(b.dtype), self._peer(peer), stream=stream)
        return buf

    @contextlib.contextmanager
    def group(self) -> Iterator[Communicator]:
        """ncclGroupStart/ncclGroupEnd around the block: its calls (on any communicator) run as one, e.g.
        a send and a receive that would otherwise wait for each other."""
        self._nccl.check(self._nccl.lib.ncclGroupStart())
        try:
            yield self
        except BaseException:
            # A call that failed fails the group too (as in NCCL): its own error is the one to raise.
            self._nccl.lib.ncclGroupEnd()
            raise
        self._nccl.check(self._nccl.lib.ncclGroupEnd(), self._comm)

    def _root(self, root: int) -> int:
        if not 0 <= root < self._size:
            raise ValueError(f"root {root} is not a rank of {self._size}")
        return root

    def _peer(self, peer: int) -> int:
        if not 0 <= peer < self._size:
            raise ValueError(f"peer {peer} is not a rank of {self._size}")
        return peer

    def barrier(self) -> None:
        """A one-element all-reduce, then a wait for the current stream."""
        cp = _cupy()
        with cp.cuda.Device(self._device):
            if self._scratch is None:
                self._scratch = cp.zeros(1, dtype=cp.float32)
            stream = cp.cuda.get_current_stream()
            self.all_reduce(self._scratch, stream=stream)
            stream.synchronize()

    # --- communicator management ------------------------------------------------------------------
    def split(self, color: int, key: int, config: Any = None) -> Communicator | None:
        """ncclCommSplit; None for ranks that pass color < 0 (NCCL_SPLIT_NOCOLOR)."""
        comm = self._live()
        new = ffi.new("ncclComm_t*")
        cfg = _as_config(config)
        color = SPLIT_NOCOLOR if color < 0 else color
        self._nccl.check(
            self._nccl.lib.ncclCommSplit(comm, color, key, new, ffi.NULL if cfg is None else cfg), comm
        )
        if new[0] == ffi.NULL:
            return None
        return Communicator._wrap(self._nccl, new[0], self._device)

    def async_error(self) -> int:
        return self._nccl.comm_async_error(self._live())

    def abort(self) -> None:
        """ncclCommAbort: frees the communicator without waiting for peers or pending work."""
        if self._comm is not None:
            comm, self._comm = self._comm, None
            self._nccl.check(self._nccl.lib.ncclCommAbort(comm))

    def destroy(self) -> None:
        """ncclCommFinalize (waits for this rank's pending collectives) then ncclCommDestroy. The
        communicator is released even when finalize reports its asynchronous error (a lost peer), and
        that error is raised afterwards."""
        if self._comm is not None:
            comm, self._comm = self._comm, None
            finalized = int(self._nccl.lib.ncclCommFinalize(comm))
            failure: NcclError | None = None
            try:
                self._nccl.check(finalized, comm)
            except NcclError as e:
                failure = e
            self._nccl.check(self._nccl.lib.ncclCommDestroy(comm))
            if failure is not None:
                raise failure

    def __enter__(self) -> Communicator:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        # After an error the peers may never reach finalize, so do not wait for them.
        if exc_type is None:
            self.destroy()
        else:
            self.abort()

    def __repr__(self) -> str:
        state = "destroyed" if self._comm is None else f"device {self._device}"
        return f"<Communicator rank {self._rank} of {self._size}, {state}>"


def world_from_env(timeout: float = 300.0) -> tuple[int, int, str]:
    """(rank, size, unique id hex) of this process: from mscclpp_nccl.run's variables, else from MPI's
    launcher (mpirun of Open MPI, MPICH, Intel MPI or MVAPICH: mscclpp_nccl.mpi_world), rank 0 making the id
    and handing it to the others through mpi4py when it is installed, or over TCP otherwise (every rank on
    this host, or MASTER_ADDR and MASTER_PORT set). A launch that only PMIx describes (srun --mpi=pmix)
    needs mpi4py. RuntimeError when there is no rank information or the ranks cannot meet in `timeout`
    seconds."""
    env = os.environ
    if "MSCCLPP_NCCL_UNIQUE_ID" in env and "MSCCLPP_NCCL_RANK" in env:
        return (
            int(env["MSCCLPP_NCCL_RANK"]),
            int(env["MSCCLPP_NCCL_WORLD_SIZE"]),
            env["MSCCLPP_NCCL_UNIQUE_ID"],
        )
    world = mpi_world()
    if world is None and "PMIX_RANK" in env:
        comm = mpi4py_comm()
        if comm is None:
            raise RuntimeError(
                "a PMIx launch names no world size: install mpi4py (pip install 'mscclpp-nccl[mpi]')"
            )
        world = MpiWorld(comm.Get_rank(), comm.Get_size(), None, None, "")
    if world is None:
        raise RuntimeError(
            "no rank information: start under `python -m mscclpp_nccl.run -n N -- ...` or mpirun"
        )
    uid = broadcast_from_rank0(world, lambda: unique_id_to_hex(Nccl.load().get_unique_id()), timeout)
    return world.rank, world.size, uid
