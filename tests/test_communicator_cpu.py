"""mscclpp_nccl.Communicator's collectives, send/recv and groups against NumPy, without a GPU: the ranks are
threads, the library is test_bench_cpu's stand-in (which computes each call on host memory), and the
arrays are host memory behind __cuda_array_interface__, as CuPy, Numba and PyTorch hand theirs over.
Also mscclpp_nccl.arrays: what it takes (interfaces, dtype overrides, streams) and what it refuses."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import fake_nccl as fake
import numpy as np
import pytest
import test_bench_cpu as stand_ins

from mscclpp_nccl import Communicator
from mscclpp_nccl.arrays import device_buffer, stream_handle
from mscclpp_nccl.binding import NcclError, ffi

STREAM = 0x5000  # a raw cudaStream_t: no CuPy needed


class HostArray:
    """Host memory that presents itself as a GPU array (the stand-in library reads it by address)."""

    def __init__(self, data: np.ndarray, strides: tuple[int, ...] | None = None) -> None:
        self.data = data
        self.__cuda_array_interface__ = {
            "data": (data.ctypes.data, False),
            "shape": data.shape,
            "typestr": data.dtype.str,
            "strides": strides,
            "version": 3,
        }


class _Lib(stand_ins._FakeLib):
    """The stand-in with ncclGather/ncclScatter, which the binding now declares for every library."""

    def __init__(self, world: fake.World, rank: int) -> None:
        super().__init__(world, rank)
        self._ext = stand_ins._FakeExt(self)

    def ncclGather(self, *args: Any) -> int:
        return self._ext.ncclGather(*args)

    def ncclScatter(self, *args: Any) -> int:
        return self._ext.ncclScatter(*args)


class _Nccl(stand_ins._FakeNccl):
    def comm_user_rank(self, comm: Any) -> int:
        return self.lib.rank

    def comm_count(self, comm: Any) -> int:
        return self.lib.world.n


def run_ranks(n: int, body: Callable[[Communicator], Any]) -> list[Any]:
    """body(communicator) on n ranks, threads of one World; their results (a rank's exception raised)."""
    world = fake.World(n)
    comms = [Communicator._wrap(_Nccl(_Lib(world, r)), ffi.cast("void*", 0x1000 + r), 0) for r in range(n)]
    results = stand_ins._run_threads(n, lambda r: body(comms[r]))
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def data(rank: int, count: int, dtype: str = "float32") -> np.ndarray:
    return (np.arange(count) + 100 * rank).astype(dtype)


N = 3


def test_all_reduce_out_of_and_in_place() -> None:
    def body(c: Communicator) -> tuple[np.ndarray, np.ndarray]:
        send, recv = HostArray(data(c.rank, 10)), HostArray(np.zeros(10, np.float32))
        assert c.all_reduce(send, recv, "max", stream=STREAM) is recv
        inplace = HostArray(data(c.rank, 10))
        c.all_reduce(inplace, stream=STREAM)
        return recv.data, inplace.data

    for got_max, got_sum in run_ranks(N, body):
        np.testing.assert_array_equal(got_max, data(N - 1, 10))
        np.testing.assert_array_equal(got_sum, sum(data(r, 10) for r in range(N)))


def test_broadcast_and_reduce() -> None:
    def body(c: Communicator) -> tuple[np.ndarray, np.ndarray]:
        b = HostArray(data(c.rank, 8, "int32"))
        c.broadcast(b, root=1, stream=STREAM)
        out = HostArray(np.zeros(8, np.int32))
        c.reduce(HostArray(data(c.rank, 8, "int32")), out, "sum", root=2, stream=STREAM)
        return b.data, out.data

    results = run_ranks(N, body)
    for rank, (bcast, reduced) in enumerate(results):
        np.testing.assert_array_equal(bcast, data(1, 8, "int32"))
        expected = sum(data(r, 8, "int32") for r in range(N)) if rank == 2 else np.zeros(8, np.int32)
        np.testing.assert_array_equal(reduced, expected)


def test_all_gather_reduce_scatter_and_alltoall() -> None:
    def body(c: Communicator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        gathered = HostArray(np.zeros(4 * N, np.float64))
        c.all_gather(HostArray(data(c.rank, 4, "float64")), gathered, stream=STREAM)
        scattered = HostArray(np.zeros(4, np.float64))
        c.reduce_scatter(HostArray(data(c.rank, 4 * N, "float64")), scattered, stream=STREAM)
        exchanged = HostArray(np.zeros(2 * N, np.int64))
        c.alltoall(HostArray(data(c.rank, 2 * N, "int64")), exchanged, stream=STREAM)
        return gathered.data, scattered.data, exchanged.data

    for rank, (gathered, scattered, exchanged) in enumerate(run_ranks(N, body)):
        np.testing.assert_array_equal(gathered, np.concatenate([data(r, 4, "float64") for r in range(N)]))
        total = sum(data(r, 4 * N, "float64") for r in range(N))
        np.testing.assert_array_equal(scattered, total[4 * rank : 4 * rank + 4])
        parts = [data(r, 2 * N, "int64")[2 * rank : 2 * rank + 2] for r in range(N)]
        np.testing.assert_array_equal(exchanged, np.concatenate(parts))


def test_gather_and_scatter_with_buffers_on_the_root_only() -> None:
    def body(c: Communicator) -> tuple[np.ndarray | None, np.ndarray]:
        root_buf = HostArray(np.zeros(3 * N, np.uint8)) if c.rank == 0 else None
        c.gather(HostArray(data(c.rank, 3, "uint8")), root_buf, root=0, stream=STREAM)
        mine = HostArray(np.zeros(3, np.uint8))
        source = HostArray(np.arange(3 * N, dtype=np.uint8)) if c.rank == 0 else None
        c.scatter(source, mine, root=0, stream=STREAM)
        return (root_buf.data if root_buf else None), mine.data

    results = run_ranks(N, body)
    np.testing.assert_array_equal(results[0][0], np.concatenate([data(r, 3, "uint8") for r in range(N)]))
    for rank, (_, mine) in enumerate(results):
        np.testing.assert_array_equal(mine, np.arange(3 * rank, 3 * rank + 3, dtype=np.uint8))


def test_send_and_recv_in_a_group() -> None:
    def body(c: Communicator) -> np.ndarray:
        got = HostArray(np.zeros(5, np.float32))
        with c.group():
            c.send(HostArray(data(c.rank, 5)), (c.rank + 1) % N, stream=STREAM)
            c.recv(got, (c.rank - 1) % N, stream=STREAM)
        return got.data

    for rank, got in enumerate(run_ranks(N, body)):
        np.testing.assert_array_equal(got, data((rank - 1) % N, 5))


def test_a_call_that_fails_in_a_group_raises_its_own_error() -> None:
    """The failed call fails its group too (as in NCCL); group() raises the call's error, not the group's
    with the call's as its context."""

    def body(c: Communicator) -> tuple[BaseException | None]:
        c._nccl.lib.fail = "ncclSend"
        try:
            with c.group():
                c.send(HostArray(data(c.rank, 5)), (c.rank + 1) % N, stream=STREAM)
        except NcclError as e:
            return (e,)  # in a tuple: run_ranks raises a rank's exception
        return (None,)

    for (error,) in run_ranks(N, body):
        assert isinstance(error, NcclError) and "ncclSend" in str(error), error
        assert error.__context__ is None, f"raised over another error: {error.__context__!r}"


def test_bfloat16_in_a_uint16_array_with_dtype() -> None:
    ml_dtypes = pytest.importorskip("ml_dtypes")

    def body(c: Communicator) -> np.ndarray:
        x = HostArray(np.full(4, c.rank + 1, ml_dtypes.bfloat16).view(np.uint16))
        c.all_reduce(x, stream=STREAM, dtype="bfloat16")
        return x.data.view(ml_dtypes.bfloat16).astype(np.float32)

    for got in run_ranks(2, body):
        np.testing.assert_array_equal(got, np.full(4, 3.0, np.float32))


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda c: c.all_reduce(HostArray(data(0, 4)), HostArray(np.zeros(5, np.float32)), stream=STREAM),
            "bytes",
        ),
        (
            lambda c: c.all_reduce(HostArray(data(0, 4)), HostArray(np.zeros(4, np.int32)), stream=STREAM),
            "holds",
        ),
        (
            lambda c: c.all_gather(HostArray(data(0, 4)), HostArray(np.zeros(4, np.float32)), stream=STREAM),
            "x 4",
        ),
        (
            lambda c: c.alltoall(HostArray(data(0, 4)), HostArray(np.zeros(4, np.float32)), stream=STREAM),
            "split",
        ),
        (lambda c: c.broadcast(HostArray(data(0, 4)), root=9, stream=STREAM), "root 9"),
        (lambda c: c.send(HostArray(data(0, 4)), 5, stream=STREAM), "peer 5"),
        (lambda c: c.gather(HostArray(data(0, 4)), None, root=0, stream=STREAM), "root's recvbuf"),
    ],
)
def test_mistakes_are_refused_before_the_library_is_called(
    call: Callable[[Communicator], Any], message: str
) -> None:
    world = fake.World(3)
    lib = _Lib(world, 0)
    comm = Communicator._wrap(_Nccl(lib), ffi.cast("void*", 0x1000), 0)
    with pytest.raises(ValueError, match=message):
        call(comm)
    assert lib.calls == {}


def test_a_destroyed_communicator_refuses_calls() -> None:
    comm = Communicator._wrap(_Nccl(_Lib(fake.World(1), 0)), ffi.cast("void*", 0x1000), 0)
    comm.destroy()
    with pytest.raises(RuntimeError, match="destroyed"):
        comm.all_reduce(HostArray(data(0, 4)), stream=STREAM)


def test_device_buffer_reads_the_interface() -> None:
    x = HostArray(np.zeros((2, 3), np.float16))
    b = device_buffer(x)
    assert (b.ptr, b.nbytes, b.dtype, b.count) == (x.data.ctypes.data, 12, "float16", 6)
    assert device_buffer(HostArray(np.zeros(4, np.uint8)), dtype="float8_e4m3").dtype == "float8_e4m3"
    with pytest.raises(TypeError, match="not a GPU array"):
        device_buffer([1.0, 2.0])
    with pytest.raises(TypeError, match="DLPack device type 1, not on a CUDA device"):
        device_buffer(np.zeros(3))  # NumPy speaks DLPack, from the CPU
    with pytest.raises(ValueError, match="not C-contiguous"):
        device_buffer(HostArray(np.zeros((2, 3), np.float32), strides=(4, 8)))
    with pytest.raises(ValueError, match="no data type for 'uint16'"):
        device_buffer(HostArray(np.zeros(3, np.uint16)))
    with pytest.raises(ValueError, match="not a whole number of bfloat16"):
        device_buffer(HostArray(np.zeros(3, np.uint8)), dtype="bfloat16")


def test_stream_handles() -> None:
    class TorchLike:
        cuda_stream = 0x77

    class CudaPython:
        def __cuda_stream__(self) -> tuple[int, int]:
            return (0, 0x88)

    class CupyLike:
        ptr = 0x99

    assert [stream_handle(s) for s in (5, TorchLike(), CudaPython(), CupyLike())] == [5, 0x77, 0x88, 0x99]
    with pytest.raises(TypeError, match="not a CUDA stream"):
        stream_handle("default")
