"""One rank of the zero-copy-without-windows tests; run N with `python -m mscclpp_nccl.run`.

Large all-reduces on ordinary device memory: the library exports each allocation to the peers the first
time a call uses it and goes zero-copy once every peer has mapped it. Every scenario checks every result
against NumPy (small integers, exact in every type); the pytest side reads the TUNING log to see that
zero-copy did run where it should.
"""

from __future__ import annotations

import os
import sys

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from allreduce_worker import Rank, pattern, run_scenarios
from collectives_worker import call as collective
from collectives_worker import expected_output, input_count, output_count

COUNT = 2 << 20  # 8 MiB of float32: above the zero-copy threshold at every rank count


def expect_sum(count: int, size: int, shift: int) -> np.ndarray:
    return sum(pattern(count, k) + shift for k in range(size))


def raw_array(pointer: int, count: int, owner: object) -> cp.ndarray:
    """float32 view of `count` elements at a raw cudaMalloc pointer (CuPy's pool not involved)."""
    memory = cp.cuda.UnownedMemory(pointer, count * 4, owner)
    return cp.ndarray(count, cp.float32, cp.cuda.MemoryPointer(memory, 0))


def check(got: cp.ndarray, expected: np.ndarray, what: str) -> None:
    host = got.get().astype(np.float64)
    bad = np.nonzero(host != expected)[0]
    assert bad.size == 0, f"{what}: {bad.size} of {host.size} wrong, first at {bad[:4]}"


def scenario_recurring(r: Rank) -> None:
    """The same buffers call after call, at an offset into their allocation that differs per rank, in and
    out of place, float32 and bfloat16 (as uint16 bits)."""
    backing_send = cp.zeros(COUNT + 4096, dtype=cp.float32)
    backing_recv = cp.zeros(COUNT + 4096, dtype=cp.float32)
    shift = 64 * r.rank + 4 * (r.rank % 3)  # elements: rank r's buffers start elsewhere in its allocation
    send = backing_send[shift : shift + COUNT]
    recv = backing_recv[shift + 1 : shift + 1 + COUNT]  # unaligned to 16 bytes on purpose
    for call in range(6):
        send.set(pattern(COUNT, r.rank).astype(np.float32) + call, stream=r.stream)
        recv.fill(np.float32(-7))
        r.all_reduce_raw(send, recv, COUNT, "float32", 0)
        r.stream.synchronize()
        check(recv, expect_sum(COUNT, r.size, call), f"recurring out of place call {call}")
    for call in range(4):
        send.set(pattern(COUNT, r.rank).astype(np.float32) - call, stream=r.stream)
        r.all_reduce_raw(send, send, COUNT, "float32", 0)
        r.stream.synchronize()
        check(send, expect_sum(COUNT, r.size, -call), f"recurring in place call {call}")
    bf16_send = cp.zeros(2 * COUNT, dtype=cp.uint16)
    bf16_recv = cp.zeros(2 * COUNT, dtype=cp.uint16)
    for call in range(4):
        values = (pattern(2 * COUNT, r.rank) + call).astype(np.float32)
        bf16_send.set((values.view(np.uint32) >> 16).astype(np.uint16), stream=r.stream)
        r.all_reduce_raw(bf16_send, bf16_recv, 2 * COUNT, "bfloat16", 0)
        r.stream.synchronize()
        got = (bf16_recv.get().astype(np.uint32) << 16).view(np.float32)
        expected = expect_sum(2 * COUNT, r.size, call)
        assert np.array_equal(got.astype(np.float64), expected), f"recurring bfloat16 call {call} wrong"
    print("PASS recurring: 6 + 4 + 4 calls on the same allocations, per-rank offsets, fp32 and bf16")


def scenario_realloc(r: Rank) -> None:
    """cudaFree and cudaMalloc between calls: the same address often comes back as a new allocation, and
    must never be reached through the old mapping."""
    nbytes = COUNT * 4
    same_address = 0
    previous = None
    for round_ in range(5):
        send_ptr = cp.cuda.runtime.malloc(nbytes)
        recv_ptr = cp.cuda.runtime.malloc(nbytes)
        same_address += previous == (send_ptr, recv_ptr)
        previous = (send_ptr, recv_ptr)
        send = raw_array(send_ptr, COUNT, r)
        recv = raw_array(recv_ptr, COUNT, r)
        for call in range(3):
            shift = 100 * round_ + call
            send.set(pattern(COUNT, r.rank).astype(np.float32) + shift, stream=r.stream)
            r.all_reduce_raw(send, recv, COUNT, "float32", 0)
            r.stream.synchronize()
            check(recv, expect_sum(COUNT, r.size, shift), f"realloc round {round_} call {call}")
        cp.cuda.runtime.free(send_ptr)
        cp.cuda.runtime.free(recv_ptr)
    print(f"PASS realloc: 5 rounds of malloc / 3 calls / free ({same_address} reused both addresses)")


def scenario_graph(r: Rank) -> None:
    """Two dependent all-reduces captured once and replayed 200 times, with eager calls on the same
    buffers in between."""
    send = cp.zeros(COUNT, dtype=cp.float32)
    middle = cp.zeros(COUNT, dtype=cp.float32)
    recv = cp.zeros(COUNT, dtype=cp.float32)
    r.stream.begin_capture()
    r.all_reduce_raw(send, middle, COUNT, "float32", 0)
    r.all_reduce_raw(middle, recv, COUNT, "float32", 0)
    graph = r.stream.end_capture()
    for replay in range(200):
        send.set(pattern(COUNT, r.rank).astype(np.float32) + replay % 7, stream=r.stream)
        graph.launch(r.stream)
        if replay % 25 == 0 or replay == 199:
            check(recv, expect_sum(COUNT, r.size, replay % 7) * r.size, f"graph replay {replay}")
        if replay % 50 == 0:
            r.all_reduce_raw(send, middle, COUNT, "float32", 0)
            r.stream.synchronize()
            check(middle, expect_sum(COUNT, r.size, replay % 7), f"eager call after replay {replay}")
    print("PASS graph: 2 captured all-reduces replayed 200 times, eager calls between")


def scenario_unshareable(r: Rank) -> None:
    """Rank 0's input is managed memory, which CUDA IPC cannot share: every rank must see that and use
    scratch for the call (a rank that went zero-copy alone would hang or be wrong)."""
    if r.rank == 0:
        memory = cp.cuda.malloc_managed(COUNT * 4)
        send = cp.ndarray(COUNT, cp.float32, memory)
    else:
        send = cp.zeros(COUNT, dtype=cp.float32)
    recv = cp.zeros(COUNT, dtype=cp.float32)
    for call in range(4):
        send.set(pattern(COUNT, r.rank).astype(np.float32) + call, stream=r.stream)
        r.all_reduce_raw(send, recv, COUNT, "float32", 0)
        r.stream.synchronize()
        check(recv, expect_sum(COUNT, r.size, call), f"unshareable call {call}")
    print("PASS unshareable: rank 0 on managed memory, 4 calls, all on scratch")


def scenario_many(r: Rank) -> None:
    """More recurring allocations than a rank keeps exported (256): the least recently used are retired
    and exported again, and results stay exact."""
    count = (1 << 20) // 4 + 1024  # just over 1 MiB
    buffers = [cp.cuda.runtime.malloc(count * 4) for _ in range(300)]
    arrays = [raw_array(p, count, r) for p in buffers]
    for sweep in range(2):
        for i, array in enumerate(arrays):
            shift = i % 11 + sweep
            array.set(pattern(count, r.rank).astype(np.float32) + shift, stream=r.stream)
            r.all_reduce_raw(array, array, count, "float32", 0)
            if i % 37 == 0:
                r.stream.synchronize()
                check(array, expect_sum(count, r.size, shift), f"many sweep {sweep} buffer {i}")
        r.stream.synchronize()
    for p in buffers:
        cp.cuda.runtime.free(p)
    print("PASS many: 300 allocations x 2 sweeps, in place")


def scenario_exchanges(r: Rank) -> None:
    """Every other collective on the same buffers call after call (4 MiB ranges; 8 MiB at 2 ranks, so that
    rooted ones move enough to be mapped too; then half that, where the 4-rank table keeps all_gather on
    packets and the mapped call falls back on the chunked exchange's default grid), out of place then in
    place (NCCL's layouts), then out of place one element into the allocations (no 16-byte accesses),
    rooted ones at a root that moves: each result exact. In-place alltoall must stay on scratch (its
    writes would hit ranges the peers still read)."""
    n, me = r.size, r.rank
    large = (2 << 20) if n == 2 else (1 << 20)
    names = ("all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "gather", "scatter")
    for name, count in [(name, count) for count in (large, large // 2) for name in names]:
        size = max(input_count(name, count, n), output_count(name, count, n))
        backing = cp.zeros(size + 1, dtype=cp.float32)
        source = cp.zeros(input_count(name, count, n) + 1, dtype=cp.float32)
        for trial in range(8):
            in_place, shifted, root = 3 <= trial < 6, trial >= 6, (trial + 1) % n
            inputs = [pattern(input_count(name, count, n), k).astype(np.float32) + trial for k in range(n)]
            expected, _ = expected_output(name, "float32", "sum", inputs, count, me, root)
            recv = backing[int(shifted) : int(shifted) + output_count(name, count, n)]
            recv.fill(np.float32(-3))
            if shifted:
                send = source[1 : 1 + input_count(name, count, n)]
            elif not in_place:
                send = source[: input_count(name, count, n)]
            elif name in ("all_gather", "gather"):
                send = backing[me * count : (me + 1) * count]
            elif name in ("reduce_scatter", "scatter"):
                send, recv = backing[: n * count], backing[me * count : (me + 1) * count]
            else:
                send = backing[: input_count(name, count, n)]
            send.set(inputs[me], stream=r.stream)
            collective(r, name, send, recv, count, "float32", root=root)
            r.stream.synchronize()
            if expected is not None:
                where = f"{name} trial {trial} in_place={in_place} shifted={shifted} root={root}"
                check(recv, expected.astype(np.float64), where)
    print(
        "PASS exchanges: 7 collectives x 2 sizes x 8 calls on the same buffers, in and out of place, shifted"
    )


SCENARIOS = {
    "recurring": scenario_recurring,
    "realloc": scenario_realloc,
    "graph": scenario_graph,
    "unshareable": scenario_unshareable,
    "many": scenario_many,
    "exchanges": scenario_exchanges,
}

if __name__ == "__main__":
    run_scenarios(SCENARIOS)
