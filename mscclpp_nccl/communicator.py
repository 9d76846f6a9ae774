"""A communicator over CuPy arrays. CuPy is imported on first use, so this module imports without it."""

from __future__ import annotations

import os
from types import ModuleType, TracebackType
from typing import Any

from .binding import (
    DTYPE_NAMES,
    DTYPE_SIZES,
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

_MPI_MARKERS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK")


def _cupy() -> ModuleType:
    import cupy

    return cupy


def _stream_ptr(stream: Any) -> Any:
    """A cudaStream_t from None (CuPy's current stream), a CuPy/PyTorch stream or a raw handle."""
    if stream is None:
        stream = _cupy().cuda.get_current_stream()
    if isinstance(stream, int):
        return ffi.cast("void*", stream)
    for attr in ("ptr", "cuda_stream"):  # CuPy, PyTorch
        if hasattr(stream, attr):
            return ffi.cast("void*", int(getattr(stream, attr)))
    raise TypeError(f"not a CUDA stream: {stream!r}")


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
    def all_reduce(
        self, sendbuf: Any, recvbuf: Any = None, op: str | int = "sum", stream: Any = None, dtype: Any = None
    ) -> Any:
        """recvbuf = reduction of every rank's sendbuf; in place when recvbuf is None or sendbuf.

        bfloat16/fp8 data can be passed as uint16/uint8 arrays with dtype="bfloat16" etc.
        Returns recvbuf. Does not synchronise the stream.
        """
        comm = self._live()
        if recvbuf is None:
            recvbuf = sendbuf
        name = str(getattr(dtype, "name", dtype)) if dtype is not None else sendbuf.dtype.name
        code = dtype_code(name)
        for a in (sendbuf, recvbuf):
            if not a.flags.c_contiguous:
                raise ValueError("all_reduce needs C-contiguous arrays")
        if sendbuf.nbytes != recvbuf.nbytes:
            raise ValueError(f"sendbuf has {sendbuf.nbytes} bytes, recvbuf {recvbuf.nbytes}")
        elem = DTYPE_SIZES[DTYPE_NAMES[code]]
        if sendbuf.nbytes % elem:
            raise ValueError(f"{sendbuf.nbytes} bytes is not a whole number of {DTYPE_NAMES[code]}")
        count = sendbuf.nbytes // elem
        result = self._nccl.lib.ncclAllReduce(
            ffi.cast("void*", sendbuf.data.ptr),
            ffi.cast("void*", recvbuf.data.ptr),
            count,
            code,
            op_code(op),
            comm,
            _stream_ptr(stream),
        )
        self._nccl.check(result, comm)
        return recvbuf

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


def world_from_env() -> tuple[int, int, str]:
    """(rank, size, unique id hex) from mscclpp_nccl.run's variables, else from MPI (mpi4py)."""
    env = os.environ
    if "MSCCLPP_NCCL_UNIQUE_ID" in env and "MSCCLPP_NCCL_RANK" in env:
        return (
            int(env["MSCCLPP_NCCL_RANK"]),
            int(env["MSCCLPP_NCCL_WORLD_SIZE"]),
            env["MSCCLPP_NCCL_UNIQUE_ID"],
        )
    if any(k in env for k in _MPI_MARKERS):
        from mpi4py import MPI

        world = MPI.COMM_WORLD
        uid = unique_id_to_hex(Nccl.load().get_unique_id()) if world.Get_rank() == 0 else None
        uid = world.bcast(uid, root=0)
        return world.Get_rank(), world.Get_size(), uid
    raise RuntimeError("no rank information: start under `python -m mscclpp_nccl.run -n N -- ...` or mpirun")
