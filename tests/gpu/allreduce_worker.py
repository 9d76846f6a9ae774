"""One rank of the all-reduce GPU tests; run N of them with `python -m mscclpp_nccl.run -n N --mps`.

Every rank regenerates every rank's input, so each checks its own result against NumPy without any
extra communication. Prints one PASS line per scenario; any failure raises (non-zero exit).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import reference as ref

from mscclpp_nccl.binding import Nccl, dtype_code, ffi
from mscclpp_nccl.communicator import Communicator, world_from_env
from mscclpp_nccl.gpus import local_device

SEED = 20261129
MATRIX_COUNTS = [0, 1, 7, 1023, 32771, 300007]


class Rank:
    def __init__(self) -> None:
        self.rank, self.size, uid = world_from_env()
        self.comm = Communicator(self.size, self.rank, uid, device=local_device())
        self.nccl = Nccl.load()
        # Every copy, fill and collective of this rank runs on this one stream, in order.
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.stream.use()

    def op_for(self, op: str, dtype: str, comm: Communicator | None = None) -> tuple[int, object]:
        """The ncclRedOp_t for `op` (creating a PreMulSum op) and what keeps its scalar alive."""
        comm = comm or self.comm
        if not op.startswith("premulsum"):
            return {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}[op], None
        scalar = ref.premul_scalar(dtype, comm.rank).view(ref.storage_dtype(dtype))
        handle = ffi.new("ncclRedOp_t*")
        if op == "premulsum_host":
            keep = ffi.from_buffer(scalar)
            self.nccl.check(
                self.nccl.lib.ncclRedOpCreatePreMulSum(handle, keep, dtype_code(dtype), 1, comm.handle)
            )
        else:
            keep = cp.asarray(scalar)
            self.nccl.check(
                self.nccl.lib.ncclRedOpCreatePreMulSum(
                    handle, ffi.cast("void*", keep.data.ptr), dtype_code(dtype), 0, comm.handle
                )
            )
        return int(handle[0]), keep

    def destroy_op(self, op: int) -> None:
        if op >= 5:
            self.nccl.check(self.nccl.lib.ncclRedOpDestroy(op, self.comm.handle))

    def all_reduce_raw(
        self,
        send: cp.ndarray,
        recv: cp.ndarray,
        count: int,
        dtype: str,
        op: int,
        comm: Communicator | None = None,
        stream: cp.cuda.Stream | None = None,
    ) -> None:
        comm = comm or self.comm
        stream = stream or self.stream
        self.nccl.check(
            self.nccl.lib.ncclAllReduce(
                ffi.cast("void*", send.data.ptr),
                ffi.cast("void*", recv.data.ptr),
                count,
                dtype_code(dtype),
                op,
                comm.handle,
                ffi.cast("void*", stream.ptr),
            ),
            comm.handle,
        )


def to_device(values: np.ndarray, dtype: str, offset: int) -> cp.ndarray:
    """A device array holding `values` that starts `offset` elements into its allocation."""
    bits = values.view(ref.storage_dtype(dtype))
    backing = cp.empty(bits.size + offset + 1, dtype=bits.dtype)
    view = backing[offset : offset + bits.size]
    view.set(bits)
    return view


def from_device(array: cp.ndarray, dtype: str) -> np.ndarray:
    return array.get().view(ref.host_dtype(dtype))


def run_case(r: Rank, dtype: str, op_name: str, count: int, in_place: bool, offset: int) -> None:
    def buffers(values: np.ndarray) -> tuple[cp.ndarray, cp.ndarray]:
        send = to_device(values, dtype, offset)
        if in_place:
            return send, send
        return send, to_device(np.zeros(count, dtype=ref.host_dtype(dtype)), dtype, (offset + 1) % 3)

    check_case(r, dtype, op_name, count, buffers, f"in_place={in_place} offset={offset}")


def check_case(
    r: Rank,
    dtype: str,
    op_name: str,
    count: int,
    buffers: Callable[[np.ndarray], tuple[cp.ndarray, cp.ndarray]],
    where: str,
) -> None:
    """All-reduces this rank's input for (dtype, op, count) between the buffers that `buffers` makes
    from it (send holding the input; recv is send when in place) and checks the result against NumPy."""
    inputs = [ref.make_input(dtype, op_name, count, k, SEED) for k in range(r.size)]
    expected, magnitude = ref.reduce(dtype, op_name, inputs)
    send, recv = buffers(inputs[r.rank])
    if recv is not send:
        recv.fill(0x5A)  # poison: every element must be written
    op, keep = r.op_for(op_name, dtype)
    r.all_reduce_raw(send, recv, count, dtype, op)
    r.stream.synchronize()
    r.destroy_op(op)
    del keep
    what = f"rank {r.rank}/{r.size} {dtype} {op_name} count={count} {where}"
    ref.check(from_device(recv, dtype), expected, magnitude, dtype, r.size, what)


def scenario_matrix(r: Rank) -> None:
    cases = 0
    for dtype in ref.TYPES:
        for op_name in ref.OPS:
            for i, count in enumerate(MATRIX_COUNTS):
                for in_place in (False, True):
                    run_case(r, dtype, op_name, count, in_place, offset=(i + in_place) % 2)
                    cases += 1
    print(f"PASS matrix: {cases} cases (12 types x 7 ops x {len(MATRIX_COUNTS)} counts x in/out of place)")


def pattern(count: int, rank: int) -> np.ndarray:
    """Small integers (exact in every float type) that differ per rank and position."""
    i = np.arange(count, dtype=np.int64)
    return ((i * 7 + rank * 13) % 17 - 8).astype(np.float64)


def scenario_large(r: Rank) -> None:
    sizes = {
        "float32": [16 << 20, (2 << 20) + 3],
        "bfloat16": [32 << 20, (4 << 20) + 1],
        "int32": [(1 << 20) + 5],
    }
    for dtype, counts in sizes.items():
        for count in counts:
            expected = sum(pattern(count, k) for k in range(r.size))
            host = pattern(count, r.rank).astype(ref.host_dtype(dtype))
            for in_place in (False, True):
                send = to_device(host, dtype, 0)
                recv = send if in_place else cp.full(send.size, 0x5A, dtype=send.dtype)
                r.all_reduce_raw(send, recv, count, dtype, 0)
                r.stream.synchronize()
                got = from_device(recv, dtype).astype(np.float64)
                bad = np.nonzero(got != expected)[0]
                assert bad.size == 0, f"large {dtype} count={count} in_place={in_place}: {bad.size} wrong"
    print("PASS large: up to 64 MiB, float32 / bfloat16 / int32, in and out of place")


def scenario_graph(r: Rank) -> None:
    for count in (1000, 1 << 20):
        send = cp.zeros(count, dtype=cp.float32)
        middle = cp.zeros(count, dtype=cp.float32)
        recv = cp.zeros(count, dtype=cp.float32)
        r.stream.begin_capture()
        # Two dependent calls in one graph: the step counter must advance inside the graph too.
        r.all_reduce_raw(send, middle, count, "float32", 0)
        r.all_reduce_raw(middle, recv, count, "float32", 0)
        graph = r.stream.end_capture()
        for replay in range(100):
            base = pattern(count, r.rank) + replay
            send.set(base.astype(np.float32), stream=r.stream)
            graph.launch(r.stream)
            got = recv.get(stream=r.stream).astype(np.float64)
            first = sum(pattern(count, k) + replay for k in range(r.size))
            expected = first * r.size
            assert np.array_equal(got, expected), f"graph replay {replay} count={count} wrong"
    print("PASS graph: 2 captured all-reduces replayed 100 times, one-shot and two-shot sizes")


def scenario_two_comms(r: Rank) -> None:
    twin = r.comm.split(0, r.rank)
    assert twin is not None and twin.rank == r.rank and twin.size == r.size
    other = cp.cuda.Stream(non_blocking=True)
    for count in (513, 200001):
        a = cp.asarray(pattern(count, r.rank).astype(np.float32))
        b = cp.asarray((pattern(count, r.rank) * 2).astype(np.float32))
        r.stream.synchronize()  # b is used on the other stream
        for _ in range(20):
            r.all_reduce_raw(a, a, count, "float32", 3)  # min is idempotent across repeats
            r.all_reduce_raw(b, b, count, "float32", 2, comm=twin, stream=other)
        r.stream.synchronize()
        other.synchronize()
        lo = np.minimum.reduce([pattern(count, k) for k in range(r.size)])
        hi = np.maximum.reduce([pattern(count, k) * 2 for k in range(r.size)])
        assert np.array_equal(a.get(), lo) and np.array_equal(b.get(), hi), "two communicators interfered"
    twin.destroy()
    print("PASS two_comms: two communicators on two streams at once")


def scenario_split(r: Rank) -> None:
    half = r.comm.split(r.rank % 2, r.rank)
    assert half is not None
    members = [k for k in range(r.size) if k % 2 == r.rank % 2]
    assert half.size == len(members) and half.rank == members.index(r.rank)
    count = 4099
    data = cp.asarray(pattern(count, r.rank).astype(np.float32))
    r.all_reduce_raw(data, data, count, "float32", 0, comm=half)
    r.stream.synchronize()
    assert np.array_equal(data.get(), sum(pattern(count, k) for k in members)), "split all-reduce wrong"
    none = r.comm.split(-1 if r.rank == 0 else 0, 0)
    assert (none is None) == (r.rank == 0)
    if none is not None:
        none.destroy()
    half.destroy()
    print("PASS split: halves by parity, and NCCL_SPLIT_NOCOLOR")


def expect_error(what: str, call: Callable[[], int], code: int) -> None:
    result = int(call())
    assert result == code, f"{what}: returned {result}, expected {code}"


def scenario_bad_input(r: Rank) -> None:
    lib, comm, s = r.nccl.lib, r.comm.handle, ffi.cast("void*", r.stream.ptr)
    buf = cp.zeros(16, dtype=cp.float32)
    p = ffi.cast("void*", buf.data.ptr)
    expect_error("unknown type", lambda: lib.ncclAllReduce(p, p, 16, 12, 0, comm, s), 4)
    expect_error("unknown op", lambda: lib.ncclAllReduce(p, p, 16, 7, 99, comm, s), 4)
    expect_error("NULL buffer", lambda: lib.ncclAllReduce(ffi.NULL, p, 16, 7, 0, comm, s), 4)
    expect_error("count overflow", lambda: lib.ncclAllReduce(p, p, 2**62, 7, 0, comm, s), 4)
    expect_error("NULL comm", lambda: lib.ncclAllReduce(p, p, 16, 7, 0, ffi.NULL, s), 4)
    assert "unknown" in r.nccl.last_error(comm) or "NULL" in r.nccl.last_error(comm)
    op, _keep = r.op_for("premulsum_host", "float32")
    expect_error("PreMulSum of another type", lambda: lib.ncclAllReduce(p, p, 16, 8, op, comm, s), 4)
    r.destroy_op(op)
    expect_error("destroyed PreMulSum op", lambda: lib.ncclAllReduce(p, p, 16, 7, op, comm, s), 4)
    twin = r.comm.split(0, r.rank)
    dead = twin.handle
    twin.destroy()
    expect_error("destroyed comm", lambda: lib.ncclAllReduce(p, p, 16, 7, 0, dead, s), 4)
    print("PASS bad_input: type, op, NULL buffer and comm, overflow, PreMulSum misuse, destroyed comm")


def scenario_abort(r: Rank) -> None:
    """The last rank never joins; the others' kernels wait until another thread aborts."""
    data = cp.ones(4096, dtype=cp.float32)
    last = r.size - 1
    start = time.monotonic()
    if r.rank != last:
        r.all_reduce_raw(data, data, data.size, "float32", 0)
    aborted_in: list[float] = []

    def watchdog() -> None:
        time.sleep(1.0)
        t0 = time.monotonic()
        r.comm.abort()
        aborted_in.append(time.monotonic() - t0)

    handle = r.comm.handle
    thread = threading.Thread(target=watchdog)
    thread.start()
    r.stream.synchronize()  # returns only once the waiting kernel has exited
    waited = time.monotonic() - start
    thread.join()
    assert waited < 10 and aborted_in[0] < 5, (
        f"abort too slow: kernel {waited:.1f}s, abort {aborted_in[0]:.1f}s"
    )
    s = ffi.cast("void*", r.stream.ptr)
    p = ffi.cast("void*", data.data.ptr)
    result = r.nccl.lib.ncclAllReduce(p, p, data.size, 7, 0, handle, s)
    assert result == 4, f"a call on an aborted communicator returned {result}"
    print(f"PASS abort: waiting kernel exited {waited:.1f}s after start, abort took {aborted_in[0]:.2f}s")


SCENARIOS = {
    "matrix": scenario_matrix,
    "large": scenario_large,
    "graph": scenario_graph,
    "two_comms": scenario_two_comms,
    "split": scenario_split,
    "bad_input": scenario_bad_input,
    "abort": scenario_abort,  # last: it ends the communicator
}


def run_scenarios(scenarios: dict[str, Callable[[Rank], None]]) -> None:
    """Runs the scenarios named on the command line (default: all) on one Rank, timing each; destroys
    the communicator unless a scenario ended it ("abort")."""
    names = sys.argv[1:] or list(scenarios)
    r = Rank()
    for name in names:
        t0 = time.monotonic()
        scenarios[name](r)
        if r.rank == 0:
            print(f"  ({name} took {time.monotonic() - t0:.1f}s)", flush=True)
    if "abort" not in names:
        r.comm.destroy()


if __name__ == "__main__":
    run_scenarios(SCENARIOS)
