"""Many communicators at once: 8 ranks sharing the GPU, 16 splits of the world each, random collectives
of random sizes (some in CUDA graphs) interleaved differently on every rank, every result checked.

The GPU run lives in tests/gpu/many_comms_worker.py. Its schedule is pure Python, checked here on the
CPU: every member of a communicator issues the same calls in the same order, ranks interleave them
differently, and no interleaving can deadlock a correct library.
"""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest
from multirank import ROOT, assert_all_passed, run_ranks

sys.path.insert(0, str(ROOT / "tests" / "gpu"))
import many_comms_worker as mc
import reference as ref

WORKER = ROOT / "tests" / "gpu" / "many_comms_worker.py"
NRANKS = 8
SEED = 20261205
# The types every host has (bfloat16 needs ml_dtypes, which the GPU machine has).
HOST_DTYPES = ("float32", "int32")


def run_stress(mps: bool) -> None:
    # 60 s by default, as the stress is specified; a shorter run for quick iteration.
    seconds = float(os.environ.get("MSCCLPP_NCCL_STRESS_SECONDS", "60"))
    output = run_ranks(
        NRANKS, WORKER, "--seconds", f"{seconds:g}", timeout=max(600.0, seconds + 300), mps=mps
    )
    assert_all_passed(output, ["many_comms"], NRANKS)
    assert "RESULT many_comms" in output, output[-6000:]


@pytest.mark.gpu
def test_many_communicators_stress_time_sliced() -> None:
    """The ranks time-slice the GPU (no MPS): the library's own ordering, every result checked."""
    run_stress(mps=False)


@pytest.mark.gpu
def test_many_communicators_stress() -> None:
    """Under MPS, through the launcher, which gives each rank the 8 hardware queues a process has without
    MPS: with MPS's own 2, the 4 streams of a rank share queues and the stress stalls in its first phase
    (kernels at the head of idle streams wait behind another communicator's waiting kernel)."""
    run_stress(mps=True)


@pytest.mark.gpu
def test_few_queues_under_mps_stall_and_are_named() -> None:
    """The rule's other half: with MPS's own 2 hardware queues per process the same stress stalls in its
    first phase, and the library's stall report names the queues and what to set."""
    output = run_ranks(
        NRANKS,
        WORKER,
        *("--seconds", "10", "--stall", "20"),
        timeout=150,
        env={"CUDA_DEVICE_MAX_CONNECTIONS": "2", "MSCCLPP_NCCL_STALL_REPORT": "5"},
        expect_rc=mc.STALL_EXIT,
    )
    assert "STALL many_comms" in output, output[-6000:]
    assert "with 2 hardware work queues (CUDA_DEVICE_MAX_CONNECTIONS" in output, output[-6000:]


# --- the schedule, on the CPU ----------------------------------------------------------------------


def plans(phase: int, seed: int = SEED, nranks: int = NRANKS) -> dict[int, list[mc.Step]]:
    return {r: mc.rank_plan(r, nranks, phase, seed, HOST_DTYPES) for r in range(nranks)}


def test_splits_partition_the_world() -> None:
    assert len(mc.SPLITS) == 16
    assert len({s.name for s in mc.SPLITS}) == 16
    for nranks in (1, 2, 3, 4, 8):
        for spec in mc.SPLITS:
            groups = {tuple(mc.split_members(spec, r, nranks)) for r in range(nranks)}
            assert sorted(r for g in groups for r in g) == list(range(nranks)), spec.name
            assert all(spec.color(r, nranks) >= 0 for r in range(nranks)), spec.name
    sizes = {tuple(sorted({len(mc.split_members(s, r, NRANKS)) for r in range(NRANKS)})) for s in mc.SPLITS}
    # The world, halves, quarters, pairs, single ranks and uneven groups (3 + 5, 1 + 7, 3 + 3 + 2).
    assert {(8,), (4,), (2,), (1,), (3, 5), (1, 7), (2, 3)} <= sizes
    assert mc.split_members(mc.SPLITS[1], 0, NRANKS) == list(range(NRANKS - 1, -1, -1))


def test_each_communicator_same_order_on_every_rank() -> None:
    for phase in range(4):
        by_comm: dict[tuple[int, int], list[mc.Item]] = {}
        for rank, steps in plans(phase).items():
            for comm, spec in enumerate(mc.SPLITS):
                mine = [s.item for s in steps if s.item.comm == comm]
                assert [it.seq for it in mine] == list(range(len(mine))), "issued out of schedule order"
                color = spec.color(rank, NRANKS)
                key = (comm, color)
                if key in by_comm:
                    assert mine == by_comm[key], f"{spec.name}/{color}: rank {rank} differs"
                else:
                    by_comm[key] = mine
                size = len(mc.split_members(spec, rank, NRANKS))
                assert mine == mc.comm_schedule(comm, color, size, phase, SEED, HOST_DTYPES)


def test_interleavings_differ_between_ranks() -> None:
    for phase in range(4):
        all_plans = plans(phase)
        orders = {tuple((s.item.comm, s.item.seq) for s in steps) for steps in all_plans.values()}
        assert len(orders) == NRANKS, "two ranks interleave their communicators alike"
        streams = {tuple(s.stream for s in steps if s.item.comm == 0) for steps in all_plans.values()}
        assert len(streams) > 1, "every rank puts the world's calls on the same streams"
        for steps in all_plans.values():
            assert {s.stream for s in steps} == set(range(mc.STREAMS))
    # Different phases and seeds interleave differently too.
    first = [(s.item.comm, s.item.seq) for s in plans(0)[0]]
    assert first != [(s.item.comm, s.item.seq) for s in plans(1)[0]]
    assert first != [(s.item.comm, s.item.seq) for s in plans(0, seed=SEED + 1)[0]]


def test_plan_is_deterministic() -> None:
    assert plans(3) == plans(3)
    assert mc.stable_seed(1, "a", 2) == mc.stable_seed(1, "a", 2) != mc.stable_seed(1, "a", 3)


def wait_cycle(all_plans: dict[int, list[mc.Step]]) -> list[tuple[int, int, int]] | None:
    """Items (comm, color, seq) left over by a topological sort of what waits for what: a call waits
    for the previous call on its stream (on each rank), the previous call of its communicator, and
    every member's launch of itself (so one node stands for all ranks' instances). None: no cycle."""
    waits: dict[tuple[int, int, int], set[tuple[int, int, int]]] = {}
    for steps in all_plans.values():
        last_on_stream: dict[int, tuple[int, int, int]] = {}
        for step in steps:
            it = step.item
            node = (it.comm, it.color, it.seq)
            before = waits.setdefault(node, set())  # every item is a node, even one that waits for nothing
            if it.seq > 0:
                before.add((it.comm, it.color, it.seq - 1))
            if step.stream in last_on_stream:
                before.add(last_on_stream[step.stream])
            last_on_stream[step.stream] = node
    done: set[tuple[int, int, int]] = set()
    progress = True
    while progress:
        progress = False
        for node, before in waits.items():
            if node not in done and before <= done:
                done.add(node)
                progress = True
    left = sorted(set(waits) - done)
    return left or None


def test_no_interleaving_can_deadlock() -> None:
    for seed in (SEED, 1, 2):
        for phase in range(6):
            all_plans = plans(phase, seed)
            assert wait_cycle(all_plans) is None, f"seed {seed} phase {phase}"
            for steps in all_plans.values():
                for stream in range(mc.STREAMS):
                    keys = [s.item.order_key for s in steps if s.stream == stream]
                    assert keys == sorted(keys), "a stream's calls out of the global order"


def test_wait_cycle_is_found() -> None:
    """The checker above sees the classic hang: two ranks that put two shared communicators' calls on
    one stream in opposite orders."""
    a = mc.Item(0, 0, 2, 0, 0.0, (), 0)
    b = mc.Item(1, 0, 2, 0, 1.0, (), 0)
    assert wait_cycle({0: [mc.Step(a, 0), mc.Step(b, 0)], 1: [mc.Step(b, 0), mc.Step(a, 0)]})
    assert wait_cycle({0: [mc.Step(a, 0), mc.Step(b, 0)], 1: [mc.Step(b, 1), mc.Step(a, 0)]}) is None


def test_schedule_covers_kinds_types_sizes_and_graphs() -> None:
    dtypes = ("float32", "bfloat16", "int32")
    kinds, types, ops, graph_items, in_place, shifts = set(), set(), set(), 0, set(), set()
    smallest, largest = mc.MAX_BYTES, 0
    for phase in range(30):
        for it in mc.rank_items(5, NRANKS, phase, SEED, dtypes):
            graph_items += it.replays > 0
            limit = mc.GRAPH_MAX_BYTES if it.replays else mc.MAX_BYTES
            assert 1 <= len(it.calls) <= (3 if it.replays else 1)
            for c in it.calls:
                kinds.add(c.kind)
                types.add(c.dtype)
                ops.add(c.op)
                in_place.add((c.kind, c.in_place))
                assert c.count >= 1 and 0 <= c.root < it.size
                blocks = it.size if c.kind in mc.PER_RANK_COUNT else 1
                nbytes = c.count * blocks * mc.ITEMSIZE[c.dtype]
                assert nbytes <= limit
                smallest, largest = min(smallest, nbytes), max(largest, nbytes)
                if c.kind == "sendrecv":
                    shifts.add(c.root)
    assert kinds == set(mc.KINDS)
    assert types == set(dtypes) and ops == {"", "sum", "max"}
    assert graph_items >= 20
    assert {("all_reduce", True), ("all_gather", True), ("broadcast", True), ("alltoall", False)} <= in_place
    assert 0 in shifts and len(shifts) > 3  # send to self, and to peers at several distances
    assert smallest <= 64 and largest >= 2 << 20


def simulate(call: mc.Call, seed: int, size: int) -> list[np.ndarray]:
    """Every rank's output of `call` by NCCL's definition, from every rank's whole input."""
    inputs = [mc.rank_input(seed, p, call, size) for p in range(size)]
    c = call.count
    if call.kind == "all_reduce":
        return [ref.reduce(call.dtype, call.op, inputs)[0]] * size
    if call.kind == "reduce_scatter":
        full = ref.reduce(call.dtype, call.op, inputs)[0]
        return [full[me * c : (me + 1) * c] for me in range(size)]
    if call.kind == "all_gather":
        return [np.concatenate(inputs)] * size
    if call.kind == "alltoall":
        return [np.concatenate([x[me * c : (me + 1) * c] for x in inputs]) for me in range(size)]
    if call.kind == "broadcast":
        return [inputs[call.root]] * size
    received = [np.empty(0)] * size
    for p in range(size):
        received[(p + call.root) % size] = inputs[p]
    return received


@pytest.mark.parametrize("kind", list(mc.KINDS))
def test_references_match_the_collectives(kind: str) -> None:
    """The per-rank references (built from only the blocks a rank receives) agree with each collective
    computed whole from every rank's input."""
    for dtype in HOST_DTYPES:
        for op in ("sum", "max") if kind in mc.REDUCING else ("",):
            for size, count, root in ((1, 5, 0), (3, 7, 2), (8, 33, 5)):
                call = mc.Call(kind, dtype, op, count, root, False)
                seed = mc.stable_seed(kind, dtype, op, size)
                for me, whole in enumerate(simulate(call, seed, size)):
                    expected, _ = mc.expected_output(seed, me, call, size)
                    assert expected.dtype == whole.dtype and np.array_equal(expected, whole), (
                        f"{kind} {dtype} {op} size {size} rank {me}"
                    )
                    assert expected.size == call.recv_count(size)
                assert mc.rank_input(seed, 0, call, size).size == call.send_count(size)
