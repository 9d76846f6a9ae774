"""One rank of the window (zero-copy) GPU tests; run N of them with `python -m mscclpp_nccl.run -n N --mps`.

Buffers come from ncclMemAlloc (cuMem, shared as file descriptors) or CuPy (cudaMalloc, shared by CUDA
IPC) and are registered with ncclCommWindowRegister; all-reduces whose buffers lie in symmetric
windows run zero-copy. Every rank regenerates every rank's input and checks its own result against
NumPy. Prints one PASS line per scenario; any failure raises (non-zero exit).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import collectives_worker as cw
import device_host_api as dev
import reference as ref
from allreduce_worker import Rank, check_case, pattern, run_scenarios

from mscclpp_nccl.binding import ffi

NCCL_WIN_DEFAULT = 0
NCCL_WIN_COLL_SYMMETRIC = 1
ZERO_COPY_MIN_BYTES = 1 << 20  # the selector's threshold (native/algorithms/algorithm_selector.cc)
OFFSET_BYTES = 64  # room for element offsets at the start of a window


class Window:
    """A device buffer registered as a window of `r.comm`; `view()` wraps part of it for CuPy."""

    def __init__(
        self, r: Rank, nbytes: int, flags: int = NCCL_WIN_COLL_SYMMETRIC, cupy: bool = False
    ) -> None:
        self.r, self.nbytes = r, nbytes
        self.owned = None
        if cupy:
            self.owned = cp.empty(nbytes, dtype=cp.uint8)  # cudaMalloc memory from CuPy's pool
            self.ptr = self.owned.data.ptr
        else:
            out = ffi.new("void**")
            r.nccl.check(r.nccl.lib.ncclMemAlloc(out, nbytes))
            self.ptr = int(ffi.cast("uintptr_t", out[0]))
        self.handle = ffi.new("ncclWindow_t*")
        self.registered = False
        self.flags = flags

    def register(self, nbytes: int | None = None) -> None:
        """Registers the first `nbytes` (default: all) as a window."""
        lib = self.r.nccl.lib
        size = self.nbytes if nbytes is None else nbytes
        result = lib.ncclCommWindowRegister(
            self.r.comm.handle, ffi.cast("void*", self.ptr), size, self.handle, self.flags
        )
        self.r.nccl.check(result, self.r.comm.handle)
        self.registered = True

    def deregister(self) -> None:
        self.r.nccl.check(self.r.nccl.lib.ncclCommWindowDeregister(self.r.comm.handle, self.handle[0]))
        self.registered = False

    def view(self, dtype: str, count: int, offset_elements: int = 0) -> cp.ndarray:
        storage = ref.storage_dtype(dtype)
        start = offset_elements * storage.itemsize
        assert start + count * storage.itemsize <= self.nbytes
        mem = cp.cuda.UnownedMemory(self.ptr, self.nbytes, owner=self, device_id=0)
        return cp.ndarray((count,), dtype=storage, memptr=cp.cuda.MemoryPointer(mem, start))

    def free(self) -> None:
        if self.registered:
            self.deregister()
        if self.owned is None:
            self.r.nccl.check(self.r.nccl.lib.ncclMemFree(ffi.cast("void*", self.ptr)))
        self.owned = None


def registered_pair(r: Rank, nbytes: int, **kwargs: object) -> tuple[Window, Window]:
    send, recv = Window(r, nbytes, **kwargs), Window(r, nbytes, **kwargs)
    send.register()
    recv.register()
    return send, recv


def counts_for(dtype: str) -> list[int]:
    """Just above the zero-copy threshold, and about 2 MB with an odd count."""
    size = ref.host_dtype(dtype).itemsize
    return [ZERO_COPY_MIN_BYTES // size + 3, (2 << 20) // size + 5]


def reduce_in_windows(
    r: Rank, send: Window, recv: Window, dtype: str, op_name: str, count: int, in_place: bool, offset: int
) -> None:
    def buffers(values: np.ndarray) -> tuple[cp.ndarray, cp.ndarray]:
        src = send.view(dtype, count, offset)
        src.set(values.view(ref.storage_dtype(dtype)), stream=r.stream)
        return src, src if in_place else recv.view(dtype, count, offset)

    check_case(r, dtype, op_name, count, buffers, f"windows in_place={in_place} offset={offset}")


def scenario_matrix(r: Rank) -> None:
    send, recv = registered_pair(r, (2 << 20) + 40 + OFFSET_BYTES)
    cases = 0
    for dtype in ref.TYPES:
        for op_name in ("sum", "prod", "max", "min", "avg", "premulsum_host"):
            for i, count in enumerate(counts_for(dtype)):
                for in_place in (False, True):
                    reduce_in_windows(
                        r, send, recv, dtype, op_name, count, in_place, offset=(i + in_place) % 2
                    )
                    cases += 1
    send.free()
    recv.free()
    print(f"PASS matrix: {cases} cases (12 types x 6 ops x 2 counts x in/out of place), ncclMemAlloc windows")


def scenario_small(r: Rank) -> None:
    """Tiny and odd sizes (zero-copy only when forced): segments shorter than a unit, idle ranks."""
    send, recv = registered_pair(r, (1 << 20) + OFFSET_BYTES)
    cases = 0
    for dtype in ("int8", "bfloat16", "float32", "float64"):
        for op_name in ("sum", "min", "avg"):
            for count in (1, 7, 1023, 32771):
                for in_place in (False, True):
                    reduce_in_windows(r, send, recv, dtype, op_name, count, in_place, offset=count % 2)
                    cases += 1
    send.free()
    recv.free()
    print(f"PASS small: {cases} cases (4 types x 3 ops x 4 counts x in/out of place)")


def exact_sum(r: Rank, src: cp.ndarray, dst: cp.ndarray, count: int, what: str, shift: float = 0) -> None:
    """float32 all-reduce of small integers (exact), checked element by element."""
    src.set((pattern(count, r.rank) + shift).astype(np.float32), stream=r.stream)
    r.all_reduce_raw(src, dst, count, "float32", 0)
    got = dst.get(stream=r.stream).astype(np.float64)
    expected = sum(pattern(count, k) + shift for k in range(r.size))
    bad = np.nonzero(got != expected)[0]
    assert bad.size == 0, f"{what}: {bad.size} of {count} wrong, first at {bad[:5].tolist()}"


def scenario_large(r: Rank) -> None:
    count = (64 << 20) // 4 + 5
    send, recv = registered_pair(r, count * 4 + OFFSET_BYTES)
    exact_sum(r, send.view("float32", count), recv.view("float32", count), count, "64 MiB out of place")
    exact_sum(r, send.view("float32", count, 1), send.view("float32", count, 1), count, "64 MiB in place")
    send.free()
    recv.free()
    print("PASS large: 64 MiB float32, in and out of place")


def scenario_cudamalloc(r: Rank) -> None:
    send, recv = registered_pair(r, (8 << 20) + OFFSET_BYTES, cupy=True)
    for count in ((1 << 20) + 1, 2 << 20):
        exact_sum(r, send.view("float32", count, 3), recv.view("float32", count, 3), count, "CuPy windows")
    send.free()
    recv.free()
    print("PASS cudamalloc: windows on cudaMalloc memory (CUDA IPC)")


def scenario_group(r: Rank) -> None:
    """Registration inside a group (nccl-tests -R 2): the handle is usable after ncclGroupEnd."""
    send, recv = Window(r, 4 << 20), Window(r, 4 << 20)
    r.nccl.check(r.nccl.lib.ncclGroupStart())
    send.register()
    recv.register()
    r.nccl.check(r.nccl.lib.ncclGroupEnd())
    count = (4 << 20) // 4
    exact_sum(r, send.view("float32", count), recv.view("float32", count), count, "group-registered windows")
    send.free()
    recv.free()
    print("PASS group: windows registered inside ncclGroupStart/End")


def scenario_graph(r: Rank) -> None:
    count = 1 << 20
    send, middle = registered_pair(r, count * 4)
    recv = Window(r, count * 4)
    recv.register()
    a, b, c = send.view("float32", count), middle.view("float32", count), recv.view("float32", count)
    r.stream.begin_capture()
    # Two dependent zero-copy calls in one graph: the barrier counters must advance inside the graph.
    r.all_reduce_raw(a, b, count, "float32", 0)
    r.all_reduce_raw(b, c, count, "float32", 0)
    graph = r.stream.end_capture()
    for replay in range(50):
        a.set((pattern(count, r.rank) + replay).astype(np.float32), stream=r.stream)
        graph.launch(r.stream)
        got = c.get(stream=r.stream).astype(np.float64)
        expected = sum(pattern(count, k) + replay for k in range(r.size)) * r.size
        assert np.array_equal(got, expected), f"graph replay {replay} wrong"
    for w in (send, middle, recv):
        w.free()
    print("PASS graph: 2 captured zero-copy all-reduces replayed 50 times")


def scenario_fallbacks(r: Rank) -> None:
    """Calls that must not go zero-copy still give the right answer."""
    count = 1 << 20
    plain = Window(r, count * 4, flags=NCCL_WIN_DEFAULT)
    plain.register()
    other = cp.zeros(count, dtype=cp.float32)
    exact_sum(r, plain.view("float32", count), other, count, "NCCL_WIN_DEFAULT window")
    send, recv = registered_pair(r, count * 4)
    exact_sum(r, send.view("float32", count), other, count, "send in a window, recv not")
    exact_sum(r, other, recv.view("float32", count), count, "recv in a window, send not")
    # Ranges running past their windows' ends are not in them.
    half_send, half_recv = Window(r, count * 4), Window(r, count * 4)
    half_send.register(count * 2)
    half_recv.register(count * 2)
    exact_sum(r, half_send.view("float32", count), half_recv.view("float32", count), count, "past the end")
    exact_sum(r, send.view("float32", count), recv.view("float32", count), count, "zero-copy", shift=1)
    send.deregister()
    exact_sum(r, send.view("float32", count), recv.view("float32", count), count, "after deregister", shift=2)
    for w in (plain, send, recv, half_send, half_recv):
        w.free()
    print("PASS fallbacks: default-flag windows, one buffer outside, deregistered windows")


def exchange_count(n: int, itemsize: int) -> int:
    """Elements per range that the selector maps (algorithm_selector.cc: at least 256 KB ranges and 16 MB
    moved in all, 8 MB from 4 ranks), plus an odd few."""
    traffic = (8 << 20) if n >= 4 else (16 << 20)
    return max(256 << 10, -(-traffic // (n * n))) // itemsize + 3


def exchange_in_windows(
    r: Rank, send_w: Window | None, recv_w: Window, name: str, dtype: str, op_name: str, in_place: bool
) -> None:
    """One all_gather, reduce_scatter or alltoall on window buffers (send_w None: the source is ordinary
    CuPy memory), checked against NumPy. In place in NCCL's layouts, inside recv_w."""
    n, me = r.size, r.rank
    count = exchange_count(n, ref.host_dtype(dtype).itemsize)
    in_count, out_count = cw.input_count(name, count, n), cw.output_count(name, count, n)
    inputs = [ref.make_input(dtype, op_name, in_count, k, cw.SEED) for k in range(n)]
    expected, magnitude = cw.expected_output(name, dtype, op_name, inputs, count, me, 0)
    offset = 1 if in_place else 0  # an element in: ranges that do not start on 16 bytes
    recv = recv_w.view(dtype, max(in_count, out_count), offset)
    recv.fill(0x5A)
    if not in_place and send_w is None:
        send = cp.empty(in_count, ref.storage_dtype(dtype))
    elif not in_place:
        send = send_w.view(dtype, in_count)
    else:
        send, recv = cw.in_place_buffers(recv, name, me, count)
    send.set(inputs[me].view(ref.storage_dtype(dtype)), stream=r.stream)
    op, keep = r.op_for(op_name, dtype) if name == "reduce_scatter" else (0, None)
    cw.call(r, name, send, recv, count, dtype, op=op)
    r.stream.synchronize()
    if op:
        r.destroy_op(op)
    del keep
    what = f"rank {me}/{n} {name} {dtype} {op_name} count={count} in_place={in_place} in windows"
    cw.check_output(recv[:out_count], dtype, expected, magnitude, n, what)


def scenario_exchanges(r: Rank) -> None:
    """all_gather, reduce_scatter and alltoall in symmetric windows, which run zero-copy without posting
    their buffers (an alltoall in place goes through scratch); then with the source outside a window."""
    n = r.size
    nbytes = n * exchange_count(n, 4) * 4 + OFFSET_BYTES
    send, recv = registered_pair(r, nbytes)
    cases = 0
    for dtype, op_name in (("float32", "sum"), ("bfloat16", "max"), ("int32", "min")):
        for name in ("all_gather", "reduce_scatter", "alltoall"):
            for in_place in (False, True):
                exchange_in_windows(r, send, recv, name, dtype, op_name, in_place)
                cases += 1
    for name in ("all_gather", "reduce_scatter"):
        exchange_in_windows(r, None, recv, name, "float32", "sum", False)
        cases += 1
    send.free()
    recv.free()
    print(f"PASS exchanges: {cases} cases in windows (3 types x 3 collectives x in/out of place, 2 half in)")


INVALID_ARGUMENT = 4  # ncclInvalidArgument


def pointer_of(api: Any, query: str, window: Window, offset: int, rank: int) -> int:
    """What ncclGetPeerDevicePointer or ncclGetLsaDevicePointer gives for `rank`: an address, or 0."""
    out = dev.ffi.new("void**")
    assert getattr(api, query)(dev.handle(window.handle[0]), offset, rank, out) == 0, (query, rank)
    return int(dev.ffi.cast("uintptr_t", out[0]))


def check_teams(r: Rank, team: list[int]) -> None:
    """ncclTeamWorld, ncclTeamLsa and ncclTeamRail describe the world, `team` and the rail (stride: the
    team's size), and the rank conversions agree with them."""
    api, comm, n, me = dev.load(r.nccl), dev.handle(r.comm.handle), r.size, r.rank

    def fields(t: Any) -> tuple[int, int, int]:
        return (t.nRanks, t.rank, t.stride)

    world, lsa, rail = api.ncclTeamWorld(comm), api.ncclTeamLsa(comm), api.ncclTeamRail(comm)
    assert fields(world) == (n, me, 1), fields(world)
    assert fields(lsa) == (len(team), team.index(me), 1), (fields(lsa), team)
    assert fields(rail) == (n // len(team), me // len(team), len(team)), fields(rail)
    assert [api.ncclTeamRankToWorld(comm, lsa, i) for i in range(len(team))] == team
    assert [api.ncclTeamRankToLsa(comm, world, peer) for peer in team] == list(range(len(team)))


def check_window_pointers(r: Rank, team: list[int]) -> None:
    """Through the pointer ncclGetPeerDevicePointer gives for each world rank of `team` (the ranks this
    rank reaches by load and store, in team order) this rank reads what that rank wrote into its window,
    ncclGetLsaDevicePointer gives the same pointer for its team rank, and every other rank has none
    (NULL). Ranks and offsets outside are refused; a NCCL_WIN_DEFAULT window reaches this rank alone."""
    api, n, me = dev.load(r.nccl), r.size, r.rank
    count, skip = 1 << 16, 3  # int32 words; the pointers start `skip` words in
    offset = skip * 4
    window = Window(r, count * 4)
    window.register()
    window.view("int32", count).set(np.arange(count, dtype=np.int32) + me * (1 << 20), stream=r.stream)
    r.stream.synchronize()
    r.comm.barrier()  # every rank's window is written
    for peer in range(n):
        address = pointer_of(api, "ncclGetPeerDevicePointer", window, offset, peer)
        if peer not in team:
            assert address == 0, f"rank {me}: rank {peer} is outside the team, yet has a pointer"
            continue
        assert address != 0, f"rank {me}: no pointer to rank {peer}'s window"
        lsa = pointer_of(api, "ncclGetLsaDevicePointer", window, offset, team.index(peer))
        assert lsa == address, f"rank {me}: rank {peer}: LSA pointer {lsa:#x}, peer pointer {address:#x}"
        seen = cp.empty(count - skip, dtype=cp.int32)
        cp.cuda.runtime.memcpy(seen.data.ptr, address, seen.nbytes, cp.cuda.runtime.memcpyDeviceToDevice)
        expected = np.arange(skip, count, dtype=np.int32) + peer * (1 << 20)
        np.testing.assert_array_equal(cp.asnumpy(seen), expected, err_msg=f"rank {me} reading rank {peer}")
    assert pointer_of(api, "ncclGetPeerDevicePointer", window, 0, me) == window.ptr
    handle, out = dev.handle(window.handle[0]), dev.ffi.new("void**")
    for refused in (
        api.ncclGetPeerDevicePointer(handle, 0, n, out),
        api.ncclGetPeerDevicePointer(handle, 0, -1, out),
        api.ncclGetPeerDevicePointer(handle, count * 4, me, out),
        api.ncclGetLsaDevicePointer(handle, 0, len(team), out),
        api.ncclGetLsaDevicePointer(handle, 0, -1, out),
    ):
        assert refused == INVALID_ARGUMENT, refused
    plain = Window(r, count * 4, flags=NCCL_WIN_DEFAULT)
    plain.register()
    for peer in range(n):
        expected_address = plain.ptr + offset if peer == me else 0
        assert pointer_of(api, "ncclGetPeerDevicePointer", plain, offset, peer) == expected_address
    assert pointer_of(api, "ncclGetLsaDevicePointer", plain, offset, 0) == plain.ptr + offset
    if n > 1:
        assert api.ncclGetLsaDevicePointer(dev.handle(plain.handle[0]), 0, 1, out) == INVALID_ARGUMENT
    cp.cuda.Device().synchronize()
    r.comm.barrier()  # no rank reads a window any more
    window.free()
    plain.free()


def scenario_pointers(r: Rank) -> None:
    check_teams(r, list(range(r.size)))
    check_window_pointers(r, list(range(r.size)))
    print(f"PASS pointers: every rank's window read through its pointer, {r.size} ranks")


SCENARIOS: dict[str, Callable[[Rank], None]] = {
    "matrix": scenario_matrix,
    "small": scenario_small,
    "large": scenario_large,
    "cudamalloc": scenario_cudamalloc,
    "group": scenario_group,
    "graph": scenario_graph,
    "fallbacks": scenario_fallbacks,
    "exchanges": scenario_exchanges,
    "pointers": scenario_pointers,
}


if __name__ == "__main__":
    run_scenarios(SCENARIOS)
