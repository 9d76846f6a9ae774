"""One rank of the collective and point-to-point GPU tests (run N with the launcher, like
allreduce_worker.py). Every rank regenerates all inputs and checks its own outputs against NumPy."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import reference as ref
from allreduce_worker import Rank, from_device, pattern, run_scenarios, to_device

from mscclpp_nccl.binding import dtype_code, ffi, new_coll_config

SEED = 7
COUNTS = [0, 1, 7, 1023, 70001]
REDUCING = ("reduce_scatter", "reduce")
COPYING = ("all_gather", "alltoall", "broadcast", "gather", "scatter")


def ptr(a: cp.ndarray | None) -> object:
    return ffi.NULL if a is None else ffi.cast("void*", a.data.ptr)


def call(
    r: Rank,
    name: str,
    send: cp.ndarray | None,
    recv: cp.ndarray | None,
    count: int,
    dtype: str,
    op: int = 0,
    root: int = 0,
    comm: object = None,
    stream: cp.cuda.Stream | None = None,
) -> None:
    lib, code = r.nccl.lib, dtype_code(dtype)
    c = comm or r.comm.handle
    s = ffi.cast("void*", (stream or r.stream).ptr)
    calls: dict[str, Callable[[], int]] = {
        "all_gather": lambda: lib.ncclAllGather(ptr(send), ptr(recv), count, code, c, s),
        "reduce_scatter": lambda: lib.ncclReduceScatter(ptr(send), ptr(recv), count, code, op, c, s),
        "alltoall": lambda: lib.ncclAlltoAll(ptr(send), ptr(recv), count, code, c, s),
        "broadcast": lambda: lib.ncclBroadcast(ptr(send), ptr(recv), count, code, root, c, s),
        "reduce": lambda: lib.ncclReduce(ptr(send), ptr(recv), count, code, op, root, c, s),
        "gather": lambda: gather_scatter(r).ncclGather(ptr(send), ptr(recv), count, code, root, c, s),
        "scatter": lambda: gather_scatter(r).ncclScatter(ptr(send), ptr(recv), count, code, root, c, s),
    }
    r.nccl.check(calls[name](), c)


_EXTRA = None


def gather_scatter(r: Rank) -> object:
    """ncclGather/ncclScatter through a small cdef of our own (the shared binding lacks them)."""
    global _EXTRA
    if _EXTRA is None:
        import cffi

        extra = cffi.FFI()
        extra.cdef(
            "int ncclGather(void*, void*, size_t, int, int, void*, void*);"
            "int ncclScatter(void*, void*, size_t, int, int, void*, void*);"
        )
        _EXTRA = extra.dlopen(r.nccl.path)
    return _EXTRA


def expected_output(
    name: str, dtype: str, op: str, inputs: list[np.ndarray], count: int, rank: int, root: int
) -> tuple[np.ndarray | None, np.ndarray | None]:
    """What `rank` must hold after the collective (None: nothing to check), and the error magnitude."""
    if name == "all_gather":
        return np.concatenate(inputs), None
    if name == "alltoall":
        return np.concatenate([x[rank * count : (rank + 1) * count] for x in inputs]), None
    if name == "broadcast":
        return inputs[root], None
    if name == "gather":
        return (np.concatenate(inputs), None) if rank == root else (None, None)
    if name == "scatter":
        return inputs[root][rank * count : (rank + 1) * count], None
    if name == "reduce_scatter":
        out, mag = ref.reduce(dtype, op, [x[rank * count : (rank + 1) * count] for x in inputs])
        return out, mag
    out, mag = ref.reduce(dtype, op, inputs)  # reduce
    return (out, mag) if rank == root else (None, None)


def input_count(name: str, count: int, n: int) -> int:
    return count * n if name in ("reduce_scatter", "alltoall", "scatter") else count


def output_count(name: str, count: int, n: int) -> int:
    return count * n if name in ("all_gather", "alltoall", "gather") else count


def in_place_buffers(whole: cp.ndarray, name: str, me: int, count: int) -> tuple[cp.ndarray, cp.ndarray]:
    """NCCL's in-place layouts in `whole`, as (send, recv): the send range sits where this rank's part of
    the output goes, or the output is this rank's part of the input."""
    part = whole[me * count : (me + 1) * count]
    if name in ("all_gather", "gather"):
        return part, whole
    if name in ("reduce_scatter", "scatter"):
        return whole, part
    return whole, whole


def run_case(r: Rank, name: str, dtype: str, op_name: str, count: int, in_place: bool, root: int) -> None:
    n, me = r.size, r.rank
    inputs = [ref.make_input(dtype, op_name, input_count(name, count, n), k, SEED) for k in range(n)]
    expected, magnitude = expected_output(name, dtype, op_name, inputs, count, me, root)
    out_count = output_count(name, count, n)
    host_type = ref.host_dtype(dtype)
    if in_place:
        recv = to_device(np.zeros(max(out_count, input_count(name, count, n)), dtype=host_type), dtype, 0)
        recv.fill(0x5A)
        send, recv = in_place_buffers(recv, name, me, count)
        send.set(inputs[me].view(ref.storage_dtype(dtype)))
    else:
        send = to_device(inputs[me], dtype, 1)
        recv = to_device(np.zeros(out_count, dtype=host_type), dtype, 0)
        recv.fill(0x5A)
    # A non-root's receive buffer of reduce and gather is not the library's to write.
    untouched = recv.get() if expected is None and not in_place else None
    op, keep = r.op_for(op_name, dtype) if name in REDUCING else (0, None)
    call(r, name, send, recv, count, dtype, op=op, root=root)
    r.stream.synchronize()
    if name in REDUCING:
        r.destroy_op(op)
    del keep
    if untouched is not None:
        assert np.array_equal(recv.get().view(np.uint8), untouched.view(np.uint8)), (
            f"{name}: non-root recv written"
        )
    if expected is None:
        return
    what = f"rank {me}/{n} {name} {dtype} {op_name} count={count} in_place={in_place} root={root}"
    check_output(recv[:out_count], dtype, expected, magnitude, n, what)


def check_output(
    out: cp.ndarray, dtype: str, expected: np.ndarray, magnitude: np.ndarray | None, n: int, what: str
) -> None:
    """A collective's output against NumPy's: bit for bit for copies (magnitude None), else within the
    reduction's error bound."""
    got = from_device(out, dtype)
    if magnitude is None:
        assert np.array_equal(got.view(np.uint8), expected.view(np.uint8)), f"{what}: wrong"
    else:
        ref.check(got, expected, magnitude, dtype, n, what)


def scenario_matrix(r: Rank) -> None:
    cases = 0
    for name in (*COPYING, *REDUCING):
        ops = ref.OPS if name in REDUCING else ["sum"]
        for dtype in ref.TYPES:
            for op_name in ops:
                for i, count in enumerate(COUNTS):
                    for in_place in (False, True):
                        run_case(r, name, dtype, op_name, count, in_place, root=(i + cases) % r.size)
                        cases += 1
    print(f"PASS matrix: {cases} cases, every collective, type and op, in and out of place")


def scenario_large(r: Rank) -> None:
    n, me = r.size, r.rank
    for name in (*COPYING, *REDUCING):
        total = 16 << 20  # float32 elements of the largest buffer: 64 MiB
        per_rank = name in ("all_gather", "alltoall", "gather", "reduce_scatter", "scatter")
        count = total // n if per_rank else total
        inputs = [pattern(input_count(name, count, n), k).astype(np.float32) for k in range(n)]
        expected, _ = expected_output(name, "float32", "sum", inputs, count, me, root=n - 1)
        if name in REDUCING and expected is not None:
            expected = expected.astype(np.float32)
        send = cp.asarray(inputs[me])
        recv = cp.full(output_count(name, count, n), 0x5A, dtype=cp.float32)
        call(r, name, send, recv, count, "float32", root=n - 1)
        r.stream.synchronize()
        if expected is not None:
            assert np.array_equal(recv.get(), expected), f"large {name} wrong"
    print("PASS large: every collective at 64 MiB")


def scenario_graph(r: Rank) -> None:
    n, me, count = r.size, r.rank, 4097
    send = cp.zeros(count * n, dtype=cp.float32)
    gathered = cp.zeros(count * n, dtype=cp.float32)
    scattered = cp.zeros(count, dtype=cp.float32)
    shuffled = cp.zeros(count * n, dtype=cp.float32)
    ring = cp.zeros(count, dtype=cp.float32)
    r.stream.begin_capture()
    call(r, "all_gather", send[:count], gathered, count, "float32")
    call(r, "reduce_scatter", send, scattered, count, "float32")
    call(r, "alltoall", send, shuffled, count, "float32")
    sendrecv_ring(r, send[:count], ring, count)
    graph = r.stream.end_capture()
    for replay in range(20):
        inputs = [pattern(count * n, k).astype(np.float32) + replay for k in range(n)]
        send.set(inputs[me], stream=r.stream)
        graph.launch(r.stream)
        r.stream.synchronize()
        assert np.array_equal(gathered.get(), np.concatenate([x[:count] for x in inputs])), "graph all_gather"
        rs = sum(x[me * count : (me + 1) * count].astype(np.float64) for x in inputs)
        assert np.array_equal(scattered.get(), rs), "graph reduce_scatter"
        a2a = np.concatenate([x[me * count : (me + 1) * count] for x in inputs])
        assert np.array_equal(shuffled.get(), a2a), "graph alltoall"
        assert np.array_equal(ring.get(), inputs[(me - 1) % n][:count]), "graph sendrecv"
    print("PASS graph: all_gather, reduce_scatter, alltoall and send/recv captured, replayed 20 times")


def sendrecv_ring(r: Rank, send: cp.ndarray, recv: cp.ndarray, count: int) -> None:
    lib, c, s = r.nccl.lib, r.comm.handle, ffi.cast("void*", r.stream.ptr)
    r.nccl.check(lib.ncclGroupStart())
    r.nccl.check(lib.ncclSend(ptr(send), count, 7, (r.rank + 1) % r.size, c, s), c)
    r.nccl.check(lib.ncclRecv(ptr(recv), count, 7, (r.rank - 1) % r.size, c, s), c)
    r.nccl.check(lib.ncclGroupEnd())


def alltoallv_counts(n: int, scale: int) -> np.ndarray:
    """counts[src][dst]: uneven, some zero, self included."""
    i, j = np.meshgrid(np.arange(n), np.arange(n), indexing="ij")
    return ((i * 3 + j * 5) % 4) * scale + (i + j) % 2 * 3


def scenario_p2p(r: Rank) -> None:
    n, me = r.size, r.rank
    lib, c, s = r.nccl.lib, r.comm.handle, ffi.cast("void*", r.stream.ptr)
    for count in (1, 1000, (4 << 20) + 3):  # the last needs many steps and acks
        send = cp.asarray(pattern(count, me).astype(np.float32))
        recv = cp.full(count, 0x5A, dtype=cp.float32)
        sendrecv_ring(r, send, recv, count)
        r.stream.synchronize()
        assert np.array_equal(recv.get(), pattern(count, (me - 1) % n)), f"ring count={count}"
    for scale in (1, 30011):
        counts = alltoallv_counts(n, scale)
        sends = [cp.asarray((pattern(int(counts[me][p]), me * n + p)).astype(np.float32)) for p in range(n)]
        recvs = [cp.full(int(counts[p][me]), 0x5A, dtype=cp.float32) for p in range(n)]
        r.nccl.check(lib.ncclGroupStart())
        for p in range(n):
            r.nccl.check(lib.ncclSend(ptr(sends[p]), int(counts[me][p]), 7, p, c, s), c)
            r.nccl.check(lib.ncclRecv(ptr(recvs[p]), int(counts[p][me]), 7, p, c, s), c)
        r.nccl.check(lib.ncclGroupEnd())
        r.stream.synchronize()
        for p in range(n):
            expected = pattern(int(counts[p][me]), p * n + me)
            assert np.array_equal(recvs[p].get(), expected), f"alltoallv from {p}"
    # Every peer at once with 512 KB (packets) and 2 MB (chunks): at 10 ranks more transfer parts than one
    # kernel holds.
    for count in (128 << 10, (512 << 10) + 5):
        sends = [cp.asarray(pattern(count, me * n + p).astype(np.float32)) for p in range(n)]
        recvs = [cp.zeros(count, dtype=cp.float32) for _ in range(n)]
        r.nccl.check(lib.ncclGroupStart())
        for p in range(n):
            r.nccl.check(lib.ncclSend(ptr(sends[p]), count, 7, p, c, s), c)
            r.nccl.check(lib.ncclRecv(ptr(recvs[p]), count, 7, p, c, s), c)
        r.nccl.check(lib.ncclGroupEnd())
        r.stream.synchronize()
        for p in range(n):
            assert np.array_equal(recvs[p].get(), pattern(count, p * n + me)), f"all-to-all {count} from {p}"
    # Two transfers with the same peer in one group, in both directions: matched in call order.
    peer = (me + 1) % n if me % 2 == 0 else (me - 1) % n
    if n % 2 == 0:
        a, b = (cp.asarray(pattern(777, me * 10 + k).astype(np.float32)) for k in range(2))
        ra, rb = cp.zeros(777, dtype=cp.float32), cp.zeros(777, dtype=cp.float32)
        r.nccl.check(lib.ncclGroupStart())
        for buf, rbuf in ((a, ra), (b, rb)):
            r.nccl.check(lib.ncclSend(ptr(buf), 777, 7, peer, c, s), c)
            r.nccl.check(lib.ncclRecv(ptr(rbuf), 777, 7, peer, c, s), c)
        r.nccl.check(lib.ncclGroupEnd())
        r.stream.synchronize()
        assert np.array_equal(ra.get(), pattern(777, peer * 10)), "first transfer with one peer"
        assert np.array_equal(rb.get(), pattern(777, peer * 10 + 1)), "second transfer with one peer"
    print("PASS p2p: ring up to 16 MiB, alltoallv with zero and self counts, all-to-all, repeated peers")


def scenario_groups(r: Rank) -> None:
    """Nested groups mixing collectives and send/recv; a PreMulSum op destroyed before ncclGroupEnd."""
    n, me = r.size, r.rank
    lib = r.nccl.lib
    count = 3001
    x = cp.asarray(pattern(count, me).astype(np.float32))
    summed = cp.zeros(count, dtype=cp.float32)
    gathered = cp.zeros(count * n, dtype=cp.float32)
    ring = cp.zeros(count, dtype=cp.float32)
    scaled = cp.zeros(count, dtype=cp.float32)
    op, keep = r.op_for("premulsum_host", "float32")
    r.nccl.check(lib.ncclGroupStart())
    r.all_reduce_raw(x, summed, count, "float32", 0)
    r.nccl.check(lib.ncclGroupStart())
    call(r, "all_gather", x, gathered, count, "float32")
    sendrecv_ring(r, x, ring, count)
    r.all_reduce_raw(x, scaled, count, "float32", op)
    r.destroy_op(op)  # as nccl-tests does with its mulsum op
    r.nccl.check(lib.ncclGroupEnd())
    r.nccl.check(lib.ncclGroupEnd())
    r.stream.synchronize()
    del keep
    inputs = [pattern(count, k) for k in range(n)]
    assert np.array_equal(summed.get(), sum(inputs)), "group all_reduce"
    assert np.array_equal(gathered.get(), np.concatenate(inputs)), "group all_gather"
    assert np.array_equal(ring.get(), inputs[(me - 1) % n]), "group send/recv"
    expected = sum(x * 0.5 * (k + 1) for k, x in enumerate(inputs))
    assert np.allclose(scaled.get(), expected, rtol=1e-6), "group PreMulSum after destroy"
    print("PASS groups: nested, collectives mixed with send/recv, PreMulSum destroyed before ncclGroupEnd")


def scenario_threads(r: Rank) -> None:
    """Several threads each driving its own communicator at the same time."""
    comms = [r.comm.split(0, r.rank) for _ in range(3)]
    errors: list[BaseException] = []

    def drive(k: int) -> None:
        try:
            stream = cp.cuda.Stream(non_blocking=True)
            with stream:
                for it in range(20):
                    data = cp.asarray((pattern(5000 + k, r.rank) + it).astype(np.float32))
                    r.nccl.check(
                        r.nccl.lib.ncclAllReduce(
                            ptr(data),
                            ptr(data),
                            data.size,
                            7,
                            0,
                            comms[k].handle,
                            ffi.cast("void*", stream.ptr),
                        ),
                        comms[k].handle,
                    )
                    stream.synchronize()
                    expected = sum(pattern(5000 + k, q) + it for q in range(r.size))
                    assert np.array_equal(data.get(), expected), f"thread {k} iteration {it}"
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=drive, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors[0]
    for comm in comms:
        comm.destroy()
    print("PASS threads: three threads, three communicators, at once")


def scenario_max_ctas(r: Rank) -> None:
    """ncclConfig_t maxCTAs bounds every grid: a split child capped at one block, and the child's own
    split without a config, which inherits the cap, run every collective at sizes that go through
    packets, chunks and mapped buffers, checked against NumPy. (With NCCL_DEBUG=INFO each prints its
    grid; the test reads it.)"""
    n, me = r.size, r.rank
    capped = r.comm.split(0, me, config={"maxCTAs": 1})
    inherited = capped.split(0, me)
    for comm in (capped, inherited):
        for total in (4099, 1 << 18, 4 << 20):  # float32 elements: 16 KB, 1 MB, 16 MB in all
            for name in (*COPYING, *REDUCING, "all_reduce"):
                per_rank = name in ("all_gather", "alltoall", "gather", "reduce_scatter", "scatter")
                count = total // n if per_rank else total
                inputs = [pattern(input_count(name, count, n), k).astype(np.float32) for k in range(n)]
                if name == "all_reduce":
                    expected = ref.reduce("float32", "sum", inputs)[0]
                else:
                    expected, _ = expected_output(name, "float32", "sum", inputs, count, me, root=n - 1)
                send = cp.asarray(inputs[me])
                recv = cp.full(output_count(name, count, n), 0x5A, dtype=cp.float32)
                if name == "all_reduce":
                    r.all_reduce_raw(send, recv, count, "float32", 0, comm=comm)
                else:
                    call(r, name, send, recv, count, "float32", root=n - 1, comm=comm.handle)
                r.stream.synchronize()
                if expected is not None:
                    got = recv.get()
                    assert np.array_equal(got, expected.astype(np.float32)), f"max_ctas {name} {total} wrong"
        comm.destroy()
    print("PASS max_ctas: every collective on a comm capped at one CTA and on its split, 16 KB-16 MB")


def scenario_coll_config(r: Rank) -> None:
    """ncclAllReduceConfig with a launch-completion event, eager and replayed from a CUDA graph: the
    result matches NumPy and the event was recorded (a never-recorded event has no elapsed time), in
    the graph at each replay. An event with timing off is carried by the kernel, and work that another
    stream orders after it runs; a timed one, which kernels cannot carry, is logged once however often
    it is passed (the test counts the lines). A forced algSelection is refused without running anything."""
    n, count = r.size, 4099
    lib = r.nccl.lib
    inputs = [pattern(count, k).astype(np.float32) for k in range(n)]
    expected = ref.reduce("float32", "sum", inputs)[0].astype(np.float32)
    send = cp.asarray(inputs[r.rank])
    recv = cp.zeros(count, dtype=cp.float32)
    launched = cp.cuda.Event()  # timing on: elapsed time exists only once it was recorded
    config = new_coll_config(launchCompletionEvent=ffi.cast("void*", launched.ptr))
    stream = ffi.cast("void*", r.stream.ptr)

    def all_reduce() -> int:
        return lib.ncclAllReduceConfig(ptr(send), ptr(recv), count, 7, 0, r.comm.handle, stream, config)

    before = cp.cuda.Event()
    for _ in range(2):
        before.record(r.stream)
        r.nccl.check(all_reduce(), r.comm.handle)
        r.stream.synchronize()
        cp.cuda.get_elapsed_time(before, launched)  # raises unless the call recorded it
        assert np.array_equal(recv.get(), expected), "coll_config eager all-reduce wrong"

    carried = cp.cuda.Event(disable_timing=True)
    config.launchCompletionEvent = ffi.cast("void*", carried.ptr)
    beside = cp.cuda.Stream(non_blocking=True)
    recv.fill(0)
    marks = cp.zeros(1, dtype=cp.int32)
    r.nccl.check(all_reduce(), r.comm.handle)
    beside.wait_event(carried)
    with beside:
        marks += 1
    beside.synchronize()
    r.stream.synchronize()
    assert int(marks.get()[0]) == 1, "work ordered after the carried event did not run"
    assert np.array_equal(recv.get(), expected), "coll_config all-reduce with a carried event wrong"

    launched = cp.cuda.Event()
    config.launchCompletionEvent = ffi.cast("void*", launched.ptr)
    recv.fill(0)
    r.stream.begin_capture()
    r.nccl.check(all_reduce(), r.comm.handle)
    graph = r.stream.end_capture()
    before.record(r.stream)
    r.stream.synchronize()
    graph.launch(r.stream)
    r.stream.synchronize()
    cp.cuda.get_elapsed_time(before, launched)  # recorded by the replay, not at capture
    assert np.array_equal(recv.get(), expected), "coll_config graph all-reduce wrong"

    selection = ffi.new("char[]", b"ring")
    config.algSelection = selection
    assert all_reduce() == 5 and "algSelection" in r.nccl.last_error(), r.nccl.last_error()
    print("PASS coll_config: launch-completion event recorded eager and in graphs, forced selection refused")


def scenario_simulated_estimate(r: Rank) -> None:
    """ncclGroupSimulateEnd runs nothing and reports a modeled time that follows the message: a 64 MB
    all-reduce within a factor of 4 of its measured time (ranks share the GPU: a loose bound), and a
    group of it and an 8-byte one the sum of the two."""
    lib, handle = r.nccl.lib, r.comm.handle
    count = 32 << 20  # bf16 elements: 64 MB
    send = cp.ones(count, dtype=cp.uint16)
    recv = cp.zeros(count, dtype=cp.uint16)
    stream = ffi.cast("void*", r.stream.ptr)

    def all_reduce(n: int) -> None:
        r.nccl.check(
            lib.ncclAllReduce(ptr(send), ptr(recv), n, dtype_code("bfloat16"), 0, handle, stream), handle
        )

    def simulated(counts: list[int]) -> float:
        info = ffi.new(
            "ncclSimInfo_t*", {"size": ffi.sizeof("ncclSimInfo_t"), "magic": 0x74685283, "version": 23200}
        )
        r.nccl.check(lib.ncclGroupStart(), handle)
        for n in counts:
            all_reduce(n)
        r.nccl.check(lib.ncclGroupSimulateEnd(info), handle)
        return float(info.estimatedTime)

    small, large, both = simulated([4]), simulated([count]), simulated([4, count])
    r.stream.synchronize()
    assert not recv.any(), "a simulated group ran"
    assert 0 < small < large, (small, large)
    assert abs(both - (small + large)) <= 1e-5 * both, (small, large, both)  # float32 sums

    for _ in range(3):
        all_reduce(count)
    start, end = cp.cuda.Event(), cp.cuda.Event()
    start.record(r.stream)
    for _ in range(10):
        all_reduce(count)
    end.record(r.stream)
    end.synchronize()
    measured = cp.cuda.get_elapsed_time(start, end) * 1000 / 10
    assert large / 4 <= measured <= large * 4, (large, measured)
    print(
        f"PASS simulated_estimate: 64 MB modeled {large:.0f} us, measured {measured:.0f} us;"
        f" 8 B modeled {small:.1f} us"
    )


SCENARIOS = {
    "matrix": scenario_matrix,
    "large": scenario_large,
    "graph": scenario_graph,
    "p2p": scenario_p2p,
    "groups": scenario_groups,
    "threads": scenario_threads,
    "max_ctas": scenario_max_ctas,
    "coll_config": scenario_coll_config,
    "simulated_estimate": scenario_simulated_estimate,
}


if __name__ == "__main__":
    run_scenarios(SCENARIOS)
