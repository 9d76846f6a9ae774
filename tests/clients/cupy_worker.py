"""One rank of a real CuPy program (`cupy.cuda.nccl`) run against our libnccl.so.2.

Run N of them with our library in LD_PRELOAD (tests/test_cupy_client.py does this):

    python -m mscclpp_nccl.run -n 4 --mps --timeout 300 -- \\
        env LD_PRELOAD=$PWD/mscclpp_nccl/lib/libnccl.so.2 python tests/clients/cupy_worker.py [ITEM ...]

The world communicator is `NcclCommunicator(N, uid, rank)` with the unique id the launcher made with our
library (MSCCLPP_NCCL_UNIQUE_ID, hex of its 128 bytes) turned into the tuple of 128 C `char` values that
CuPy takes. Every rank computes every expected value locally and prints "PASS <item>" per item; the
steps "init" and "destroy" always run; each step has a deadline (--timeout); a failure prints FAIL and
exits non-zero at once unless --keep-going. `--list` shows the items.
"""

from __future__ import annotations

import os
import time

import common
import cupy as cp
import numpy as np
from cupy.cuda import nccl

# ncclDataType_t and ncclRedOp_t values (NCCL's ABI; CuPy passes plain ints through).
NCCL_TYPE = {
    np.dtype(np.int8): 0,
    np.dtype(np.uint8): 1,
    np.dtype(np.int32): 2,
    np.dtype(np.uint32): 3,
    np.dtype(np.int64): 4,
    np.dtype(np.uint64): 5,
    np.dtype(np.float16): 6,
    np.dtype(np.float32): 7,
    np.dtype(np.float64): 8,
}
SUM, PROD, MAX, MIN, AVG = 0, 1, 2, 3, 4
OP_NAME = {SUM: "sum", PROD: "prod", MAX: "max", MIN: "min", AVG: "avg"}
POISON = 1234
COUNTS = (1, 1023, (1 << 20) + 3)


class Ctx:
    rank: int
    size: int
    comm: nccl.NcclCommunicator
    stream: cp.cuda.Stream


ctx = Ctx()


# --- inputs and checks ---------------------------------------------------------------------------------


def wide(count: int, rank: int, dtype: np.dtype, salt: int = 0) -> np.ndarray:
    """Rank `rank`'s input on the host, as float64 or int64.

    Floats are small integers in [-8, 8], exact in float16 and summed exactly; 64-bit integers are above
    2**50 (a reduction through float64 would show); 32-bit ones stay small enough not to overflow."""
    dtype = np.dtype(dtype)
    i = np.arange(count, dtype=np.int64)
    if dtype.kind == "f":
        return ((i * 7 + rank * 13 + salt * 5) % 17 - 8).astype(np.float64)
    if dtype.itemsize == 8:
        return (rank + 1) * (1 << 50) + i * 3 + salt - 5
    return rank * 1000 + (i * 3 + salt) % 1000 - 500


def on_device(host: np.ndarray, dtype: np.dtype) -> cp.ndarray:
    with ctx.stream:
        return cp.asarray(host.astype(dtype))


def poisoned(count: int, dtype: np.dtype) -> cp.ndarray:
    with ctx.stream:
        return cp.full(count, POISON, dtype=dtype)


def check(what: str, got: cp.ndarray, expected: np.ndarray, tol: float = 0.0) -> None:
    ctx.stream.synchronize()
    g = got.get(stream=ctx.stream).reshape(-1)
    e = expected.reshape(-1).astype(g.dtype)
    if g.shape != e.shape:
        raise AssertionError(f"{what}: got {g.shape} elements, expected {e.shape}")
    if tol > 0:
        bad = ~np.isclose(g.astype(np.float64), e.astype(np.float64), rtol=tol, atol=tol)
    else:
        bad = g != e
    if bad.any():
        idx = np.nonzero(bad)[0]
        first = idx[:4].tolist()
        raise AssertionError(
            f"{what}: {idx.size} of {g.size} elements wrong; at {first}: "
            f"got {g[first].tolist()}, expected {e[first].tolist()}"
        )


def reduce_host(op: int, inputs: list[np.ndarray]) -> np.ndarray:
    stacked = np.stack(inputs)
    if op in (SUM, AVG):
        out = stacked.sum(0)
        return out / len(inputs) if op == AVG else out
    return {PROD: np.prod, MAX: np.amax, MIN: np.amin}[op](stacked, axis=0)


def ptr(a: cp.ndarray, offset_elems: int = 0) -> int:
    return a.data.ptr + offset_elems * a.itemsize


def nccl_type(a: cp.ndarray) -> int:
    return NCCL_TYPE[a.dtype]


def cupy_unique_id_forms(hex_text: str) -> list[bytes | tuple[int, ...]]:
    """Our unique id in the forms CuPy's NcclCommunicator has taken: bytes (CuPy 14), or a tuple of 128
    C `char` values, signed where char is signed (x86-64), unsigned elsewhere (older CuPy)."""
    raw = bytes.fromhex(hex_text.strip())
    if len(raw) != 128:
        raise ValueError(f"a unique id has 128 bytes, MSCCLPP_NCCL_UNIQUE_ID has {len(raw)}")
    signed = tuple(b - 256 if b > 127 else b for b in raw)
    return [raw, signed, tuple(raw)]


def communicator(nranks: int, hex_text: str, rank: int) -> nccl.NcclCommunicator:
    error: Exception | None = None
    for form in cupy_unique_id_forms(hex_text):
        try:
            return nccl.NcclCommunicator(nranks, form, rank)
        except (OverflowError, TypeError) as e:  # another CuPy's form; nothing was called yet
            error = e
    raise AssertionError(f"CuPy took neither form of the unique id: {error}")


# --- steps ---------------------------------------------------------------------------------------------


def step_init() -> str:
    ctx.rank, ctx.size = common.world()
    if not nccl.available:
        raise AssertionError("cupy.cuda.nccl is not available (CuPy found no libnccl.so.2)")
    cp.cuda.Device(common.device_index()).use()
    ctx.stream = cp.cuda.Stream(non_blocking=True)
    uid = os.environ.get("MSCCLPP_NCCL_UNIQUE_ID")
    if not uid:
        raise AssertionError("MSCCLPP_NCCL_UNIQUE_ID is not set (run under python -m mscclpp_nccl.run)")
    ctx.comm = communicator(ctx.size, uid, ctx.rank)
    return (
        f"rank {ctx.rank}/{ctx.size}, CuPy {cp.__version__}, built against NCCL "
        f"{nccl.get_build_version()}, runtime NCCL {nccl.get_version()}"
    )


def item_library() -> str:
    summary = common.check_our_library()
    ours = common.library_version(common.our_library())
    runtime = nccl.get_version()  # CuPy's own runtime query (ncclGetVersion)
    if runtime != ours:
        raise AssertionError(f"cupy.cuda.nccl.get_version() = {runtime}, our library reports {ours}")
    return f"{summary}; cupy.cuda.nccl.get_version() = {runtime}"


def item_comm_info() -> str:
    c = ctx.comm
    got = (c.device_id(), c.rank_id(), c.size())
    if got != (0, ctx.rank, ctx.size):
        raise AssertionError(f"(device_id, rank_id, size) = {got}, expected {(0, ctx.rank, ctx.size)}")
    c.check_async_error()
    return f"device_id 0, rank_id {ctx.rank}, size {ctx.size}, no async error"


def item_all_reduce() -> str:
    r, n = ctx.rank, ctx.size
    plan = [(np.float32, op) for op in (SUM, MAX, MIN, PROD, AVG)]
    plan += [(dt, op) for dt in (np.float16, np.float64, np.int32, np.int64) for op in (SUM, MAX, MIN)]
    cases = 0
    for dtype, op in plan:
        dtype = np.dtype(dtype)
        for count in COUNTS:
            if op == PROD:  # 1s and 2s: the product over 8 ranks stays exact
                inputs = [1.0 + (np.arange(count) + k) % 2 for k in range(n)]
            else:
                inputs = [wide(count, k, dtype, salt=op) for k in range(n)]
            expected = reduce_host(op, inputs)
            for in_place in (False, True):
                send = on_device(inputs[r], dtype)
                recv = send if in_place else poisoned(count, dtype)
                ctx.comm.allReduce(ptr(send), ptr(recv), count, nccl_type(send), op, ctx.stream.ptr)
                what = f"{OP_NAME[op]} {dtype} count={count} in_place={in_place}"
                check(what, recv, expected, tol=1e-6 if op == AVG else 0.0)
                cases += 1
    return f"{cases} cases (float32: sum/max/min/prod/avg; float16, float64, int32, int64: sum/max/min)"


def item_bcast() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in map(np.dtype, (np.float32, np.float16, np.int64)):
        for count in COUNTS:
            for root in sorted({0, n - 1}):
                host = wide(count, root, dtype, salt=5)
                buf = on_device(host, dtype) if r == root else poisoned(count, dtype)
                ctx.comm.bcast(ptr(buf), count, nccl_type(buf), root, ctx.stream.ptr)
                check(f"{dtype} count={count} root={root}", buf, host)
                cases += 1
    return f"{cases} cases of ncclBcast (float32, float16, int64; roots 0 and {n - 1})"


def item_broadcast() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in map(np.dtype, (np.float32, np.int64)):
        for count in COUNTS:
            for root in sorted({0, n - 1}):
                for in_place in (False, True):
                    host = wide(count, root, dtype, salt=6)
                    send = on_device(host, dtype) if r == root else poisoned(count, dtype)
                    recv = send if in_place else poisoned(count, dtype)
                    ctx.comm.broadcast(ptr(send), ptr(recv), count, nccl_type(send), root, ctx.stream.ptr)
                    check(f"{dtype} count={count} root={root} in_place={in_place}", recv, host)
                    cases += 1
    return f"{cases} cases of ncclBroadcast (in and out of place; roots 0 and {n - 1})"


def item_reduce() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in map(np.dtype, (np.float32, np.int64)):
        for op in (SUM, MAX):
            for count in COUNTS:
                for root in sorted({0, n - 1}):
                    for in_place in (False, True):
                        inputs = [wide(count, k, dtype, salt=7 + op) for k in range(n)]
                        send = on_device(inputs[r], dtype)
                        recv = send if in_place else poisoned(count, dtype)
                        ctx.comm.reduce(
                            ptr(send), ptr(recv), count, nccl_type(send), op, root, ctx.stream.ptr
                        )
                        if r == root:  # recvbuff is the root's alone
                            what = f"{OP_NAME[op]} {dtype} count={count} root={root} in_place={in_place}"
                            check(what, recv, reduce_host(op, inputs))
                        else:
                            ctx.stream.synchronize()
                        cases += 1
    return f"{cases} cases of ncclReduce (sum, max; float32, int64; roots 0 and {n - 1})"


def item_all_gather() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in map(np.dtype, (np.float32, np.float16, np.int64)):
        for count in COUNTS:
            expected = np.concatenate([wide(count, k, dtype, salt=8) for k in range(n)])
            for in_place in (False, True):
                recv = poisoned(n * count, dtype)
                if in_place:  # sendbuff is this rank's slot of recvbuff
                    with ctx.stream:
                        recv[r * count : (r + 1) * count] = cp.asarray(wide(count, r, dtype, 8).astype(dtype))
                    send_ptr = ptr(recv, r * count)
                else:
                    send = on_device(wide(count, r, dtype, 8), dtype)
                    send_ptr = ptr(send)
                ctx.comm.allGather(send_ptr, ptr(recv), count, nccl_type(recv), ctx.stream.ptr)
                check(f"{dtype} count={count} in_place={in_place}", recv, expected)
                cases += 1
    return f"{cases} cases (float32, float16, int64; in and out of place)"


def item_reduce_scatter() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in map(np.dtype, (np.float32, np.float16, np.int64)):
        for op in (SUM, MAX):
            for count in COUNTS:
                # Chunk j of every rank's input goes to rank j.
                mine = np.concatenate([wide(count, r, dtype, 10 + j) for j in range(n)])
                expected = reduce_host(op, [wide(count, k, dtype, 10 + r) for k in range(n)])
                for in_place in (False, True):
                    send = on_device(mine, dtype)
                    recv = send[r * count : (r + 1) * count] if in_place else poisoned(count, dtype)
                    ctx.comm.reduceScatter(ptr(send), ptr(recv), count, nccl_type(send), op, ctx.stream.ptr)
                    check(f"{OP_NAME[op]} {dtype} count={count} in_place={in_place}", recv, expected)
                    cases += 1
    return f"{cases} cases (sum, max; float32, float16, int64; in and out of place)"


def item_send_recv() -> str:
    r, n = ctx.rank, ctx.size
    nxt, prv = (r + 1) % n, (r - 1) % n
    cases = 0
    for dtype in map(np.dtype, (np.float32, np.int64)):
        for count in COUNTS:
            # Both ways round the ring in one group: a goes forward, b goes backward.
            a, b = on_device(wide(count, r, dtype, 20), dtype), on_device(wide(count, r, dtype, 21), dtype)
            ra, rb = poisoned(count, dtype), poisoned(count, dtype)
            s, t = ctx.stream.ptr, nccl_type(a)
            nccl.groupStart()
            ctx.comm.send(ptr(a), count, t, nxt, s)
            ctx.comm.send(ptr(b), count, t, prv, s)
            ctx.comm.recv(ptr(ra), count, t, prv, s)
            ctx.comm.recv(ptr(rb), count, t, nxt, s)
            nccl.groupEnd()
            check(f"forward {dtype} count={count}", ra, wide(count, prv, dtype, 20))
            check(f"backward {dtype} count={count}", rb, wide(count, nxt, dtype, 21))
            cases += 1
    return f"{cases} cases (send/recv both ways round the ring in groupStart/groupEnd)"


def single_rank_checks(comm: nccl.NcclCommunicator, what: str) -> None:
    """A 1-rank communicator: identities for all-reduce (grouped, as initAll users call it) and bcast."""
    got = (comm.device_id(), comm.rank_id(), comm.size())
    if got != (0, 0, 1):
        raise AssertionError(f"{what}: (device_id, rank_id, size) = {got}, expected (0, 0, 1)")
    host = wide(4099, 3, np.dtype(np.float32))
    send, recv = on_device(host, np.float32), poisoned(4099, np.float32)
    nccl.groupStart()
    comm.allReduce(ptr(send), ptr(recv), 4099, nccl_type(send), SUM, ctx.stream.ptr)
    nccl.groupEnd()
    check(f"{what}: all_reduce", recv, host)
    comm.bcast(ptr(recv), 4099, nccl_type(recv), 0, ctx.stream.ptr)
    check(f"{what}: bcast", recv, host)


def item_init_all() -> str:
    comms = nccl.NcclCommunicator.initAll([0])  # ncclCommInitAll(1, [0]): one rank, in this process
    if len(comms) != 1:
        raise AssertionError(f"initAll([0]) gave {len(comms)} communicators")
    single_rank_checks(comms[0], "initAll([0])")
    comms[0].destroy()
    return "ncclCommInitAll on [0]: ids, grouped all_reduce, bcast, destroy"


def item_own_unique_id() -> str:
    uid = nccl.get_unique_id()  # CuPy's own path: ncclGetUniqueId -> tuple of 128 chars
    if len(uid) != 128:
        raise AssertionError(f"get_unique_id() gave {len(uid)} values")
    comm = nccl.NcclCommunicator(1, uid, 0)
    single_rank_checks(comm, "NcclCommunicator(1, get_unique_id(), 0)")
    comm.destroy()
    return "get_unique_id() -> NcclCommunicator(1, uid, 0): ids, all_reduce, bcast, destroy"


def step_destroy() -> str:
    start = time.monotonic()
    ctx.stream.synchronize()
    ctx.comm.destroy()
    return f"NcclCommunicator.destroy took {common.elapsed(start)}"


ITEMS = {
    "library": item_library,
    "comm_info": item_comm_info,
    "all_reduce": item_all_reduce,
    "bcast": item_bcast,
    "broadcast": item_broadcast,
    "reduce": item_reduce,
    "all_gather": item_all_gather,
    "reduce_scatter": item_reduce_scatter,
    "send_recv": item_send_recv,
    "init_all": item_init_all,
    "own_unique_id": item_own_unique_id,
}
assert tuple(ITEMS) == common.CUPY_ITEMS, "common.CUPY_ITEMS is out of date"


def main() -> None:
    args = common.parse_args(common.CUPY_ITEMS, "One rank of the cupy.cuda.nccl client test.")
    if not common.run_step("init", step_init, args.timeout):
        common.hard_exit(1)
    if not common.run_items(ITEMS, args.items, args.timeout, args.keep_going):
        common.hard_exit(1)
    if not common.run_step("destroy", step_destroy, args.timeout):
        common.hard_exit(1)
    print(f"rank {ctx.rank}: {len(args.items)} items passed: {' '.join(args.items)}", flush=True)


if __name__ == "__main__":
    main()
