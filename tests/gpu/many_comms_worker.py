"""One rank of the many-communicators stress test; run 8 with `python -m mscclpp_nccl.run -n 8 --mps`.

Every rank splits the world into 16 communicators (halves, quarters, pairs, strided groups, uneven
groups, single ranks, the whole world in other orders) and, phase after phase for --seconds, issues
random collectives and send/recv of random sizes on them, some captured in CUDA graphs and replayed.

Each communicator's calls come from an RNG seeded by the communicator alone, so every member issues
them in the same order. How those calls interleave across communicators, and which of this rank's
streams each one goes to, comes from an RNG seeded by the rank, so no two ranks interleave alike.
That is what real jobs do (a device mesh: FSDP's all-gathers on one dimension, tensor parallelism's
all-reduces on another, on different streams, reached in a different order by each rank), and where
a library that cannot always make every waiting kernel's peers resident hangs.

The interleavings stay legal for any NCCL: the calls of all communicators have one global order (a
slot every member computes alike), and each rank puts calls on one stream only in that order. So every
wait, whether a stream's FIFO, a communicator's call order or a peer's matching call, points to an
earlier slot, and the only way to hang is the library's. Host waits happen only between phases, after
every rank has issued everything.

Every result is checked against NumPy (float64 references with a rounding bound for float sums,
exact for integers, max and copies). A call that makes no progress for --stall seconds ends the rank
with a STALL line naming the calls still waiting, and every thread's Python stack.

The schedule (splits, per-communicator schedules, per-rank interleavings) is pure Python with no GPU
imports, so tests/test_many_comms_gpu.py checks it on the CPU.
"""

from __future__ import annotations

import argparse
import faulthandler
import hashlib
import os
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
import reference as ref

from mscclpp_nccl.binding import RESULT_NAMES, Nccl, dtype_code, ffi, op_code
from mscclpp_nccl.communicator import Communicator, world_from_env
from mscclpp_nccl.gpus import local_device

if TYPE_CHECKING:  # CuPy is imported when the GPU run starts, so the schedule imports without it
    import cupy as cp

# --- the schedule: pure functions of (rank, world size, phase, seed) ----------------------------------

MIN_BYTES = 8
MAX_BYTES = 4 << 20
# A graph keeps every replay's input and output alive until the phase ends: smaller messages.
GRAPH_MAX_BYTES = 1 << 20
GRAPH_SHARE = 0.15
STREAMS = 4
ITEMS_PER_COMM = (2, 6)
IN_PLACE_SHARE = 0.3

# Relative frequencies; all-reduce is what training issues most.
KINDS = {"all_reduce": 4, "all_gather": 2, "reduce_scatter": 2, "broadcast": 2, "alltoall": 2, "sendrecv": 2}
REDUCING = ("all_reduce", "reduce_scatter")
# Kinds whose NCCL count is per rank while one buffer holds a block for every rank.
PER_RANK_COUNT = ("all_gather", "reduce_scatter", "alltoall")
IN_PLACE_KINDS = ("all_reduce", "broadcast", "all_gather")
ITEMSIZE = {"float32": 4, "bfloat16": 2, "int32": 4}
# float32 most often; bfloat16 only where the host can represent it (ml_dtypes).
DTYPE_WEIGHTS = {"float32": 3, "bfloat16": 1, "int32": 1}


@dataclass(frozen=True)
class SplitSpec:
    """One ncclCommSplit of the world: color and key of each world rank."""

    name: str
    color: Callable[[int, int], int]  # (world rank, world size) -> color
    key: Callable[[int, int], int]


def _popcount(x: int) -> int:
    return bin(x).count("1")


SPLITS: tuple[SplitSpec, ...] = (
    SplitSpec("world", lambda r, n: 0, lambda r, n: r),
    SplitSpec("world_reversed", lambda r, n: 0, lambda r, n: n - 1 - r),
    SplitSpec("world_rotated", lambda r, n: 0, lambda r, n: (r + 3) % n),
    SplitSpec("halves", lambda r, n: r * 2 // n, lambda r, n: r),
    SplitSpec("halves_reversed", lambda r, n: r * 2 // n, lambda r, n: n - 1 - r),
    SplitSpec("halves_parity", lambda r, n: r % 2, lambda r, n: r),
    SplitSpec("quarters", lambda r, n: r * 4 // n, lambda r, n: r),
    SplitSpec("quarters_strided", lambda r, n: r % 4, lambda r, n: r),
    SplitSpec("pairs", lambda r, n: r // 2, lambda r, n: r),
    SplitSpec("pairs_far", lambda r, n: r % max(1, n // 2), lambda r, n: r),
    SplitSpec("triples", lambda r, n: r // 3, lambda r, n: r),
    SplitSpec("thirds_strided", lambda r, n: r % 3, lambda r, n: r),
    SplitSpec("three_and_rest", lambda r, n: int(r >= 3), lambda r, n: r),
    SplitSpec("first_alone", lambda r, n: int(r > 0), lambda r, n: -r),
    SplitSpec("solo", lambda r, n: r, lambda r, n: 0),
    SplitSpec("bit_parity", lambda r, n: _popcount(r) % 2, lambda r, n: (r * 5) % n),
)


def split_members(spec: SplitSpec, rank: int, nranks: int) -> list[int]:
    """The world ranks of `rank`'s communicator in `spec`, in new-rank order (NCCL sorts by key, then
    by old rank)."""
    color = spec.color(rank, nranks)
    same = [q for q in range(nranks) if spec.color(q, nranks) == color]
    return sorted(same, key=lambda q: (spec.key(q, nranks), q))


@dataclass(frozen=True)
class Call:
    """One NCCL call. `count` is NCCL's count argument; `root` is the broadcast root or, for sendrecv,
    the shift: comm rank i sends to i + root and receives from i - root (0: to itself)."""

    kind: str
    dtype: str
    op: str  # sum or max for reducing kinds, "" otherwise
    count: int
    root: int
    in_place: bool

    def send_count(self, size: int) -> int:
        return self.count * size if self.kind in ("reduce_scatter", "alltoall") else self.count

    def recv_count(self, size: int) -> int:
        return self.count * size if self.kind in ("all_gather", "alltoall") else self.count


@dataclass(frozen=True)
class Item:
    """A unit of one communicator's schedule: one eager call, or calls captured in a CUDA graph and
    replayed `replays` times (0: eager). `slot` orders items of all communicators alike on every rank."""

    comm: int  # index into SPLITS
    color: int  # which group of that split
    size: int
    seq: int  # position in this communicator's schedule for the phase
    slot: float
    calls: tuple[Call, ...]
    replays: int

    @property
    def order_key(self) -> tuple[float, int, int]:
        return (self.slot, self.comm, self.color)

    def describe(self) -> str:
        what = "+".join(f"{c.kind}({c.dtype}{' ' + c.op if c.op else ''} x{c.count})" for c in self.calls)
        graph = f" graph x{self.replays}" if self.replays else ""
        return f"{SPLITS[self.comm].name}/{self.color} #{self.seq} {what}{graph}"


@dataclass(frozen=True)
class Step:
    """One item as this rank issues it: on which of its streams."""

    item: Item
    stream: int


def draw_call(rng: random.Random, size: int, dtypes: Sequence[str], max_bytes: int) -> Call:
    kind = rng.choices(list(KINDS), weights=list(KINDS.values()))[0]
    dtype = rng.choices(list(dtypes), weights=[DTYPE_WEIGHTS[d] for d in dtypes])[0]
    # Log-uniform bytes: as many tiny (latency-bound, packet) calls as large (bandwidth-bound) ones.
    nbytes = int(MIN_BYTES * (max_bytes / MIN_BYTES) ** rng.random())
    blocks = size if kind in PER_RANK_COUNT else 1
    count = max(1, nbytes // (ITEMSIZE[dtype] * blocks))
    op = rng.choice(("sum", "max")) if kind in REDUCING else ""
    root = rng.randrange(size) if kind in ("broadcast", "sendrecv") else 0
    in_place = kind in IN_PLACE_KINDS and rng.random() < IN_PLACE_SHARE
    return Call(kind, dtype, op, count, root, in_place)


def comm_schedule(
    comm: int,
    color: int,
    size: int,
    phase: int,
    seed: int,
    dtypes: Sequence[str],
    graph_share: float = GRAPH_SHARE,
) -> list[Item]:
    """The items of one communicator (split `comm`, group `color`, `size` ranks) in one phase. Seeded
    by the communicator alone: every member draws the same list."""
    rng = random.Random(f"schedule/{seed}/{phase}/{comm}/{color}")
    items = []
    slot = rng.random()
    for seq in range(rng.randint(*ITEMS_PER_COMM)):
        if rng.random() < graph_share:
            calls = tuple(draw_call(rng, size, dtypes, GRAPH_MAX_BYTES) for _ in range(rng.randint(1, 3)))
            replays = rng.randint(2, 4)
        else:
            calls, replays = (draw_call(rng, size, dtypes, MAX_BYTES),), 0
        items.append(Item(comm, color, size, seq, slot, calls, replays))
        # Communicators advance at different rates, so the global order mixes them unevenly.
        slot += rng.expovariate(1.0)
    return items


def rank_items(
    rank: int, nranks: int, phase: int, seed: int, dtypes: Sequence[str], graph_share: float = GRAPH_SHARE
) -> list[Item]:
    """Every item of this rank's communicators in one phase, communicator by communicator."""
    items: list[Item] = []
    for comm, spec in enumerate(SPLITS):
        size = len(split_members(spec, rank, nranks))
        items += comm_schedule(comm, spec.color(rank, nranks), size, phase, seed, dtypes, graph_share)
    return items


def rank_plan(
    rank: int,
    nranks: int,
    phase: int,
    seed: int,
    dtypes: Sequence[str],
    streams: int = STREAMS,
    graph_share: float = GRAPH_SHARE,
) -> list[Step]:
    """The order in which `rank` issues its items in one phase, and the stream of each.

    Streams are drawn per rank. The issue order is a random topological order (rank-seeded) of two
    constraints: a communicator's items in schedule order, and a stream's items in global slot order.
    The item with the lowest slot left always satisfies both, so the walk never gets stuck."""
    items = sorted(rank_items(rank, nranks, phase, seed, dtypes, graph_share), key=lambda it: it.order_key)
    rng = random.Random(f"interleave/{seed}/{phase}/{rank}")
    stream_of = {(it.comm, it.seq): rng.randrange(streams) for it in items}
    steps: list[Step] = []
    pending = items
    while pending:
        ready: list[Item] = []
        streams_seen: set[int] = set()
        comms_seen: set[int] = set()
        for it in pending:  # in slot order: the first of each stream and of each communicator
            stream = stream_of[(it.comm, it.seq)]
            if stream not in streams_seen and it.comm not in comms_seen:
                ready.append(it)
            streams_seen.add(stream)
            comms_seen.add(it.comm)
        pick = rng.choice(ready)
        pending = [it for it in pending if it is not pick]
        steps.append(Step(pick, stream_of[(pick.comm, pick.seq)]))
    return steps


def stable_seed(*parts: object) -> int:
    """A seed from `parts` that is the same in every process (hash() is salted per process)."""
    digest = hashlib.blake2b(repr(parts).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") >> 1


# --- data and references (host only) ------------------------------------------------------------------


def supported_dtypes() -> tuple[str, ...]:
    return tuple(d for d in DTYPE_WEIGHTS if d != "bfloat16" or ref.ml_dtypes is not None)


def block(data_seed: int, member: int, index: int, call: Call) -> np.ndarray:
    """Block `index` of comm rank `member`'s input (count elements, host dtype). Inputs are built of
    blocks so that a rank's reference for reduce_scatter and alltoall needs only the blocks it gets."""
    return ref.make_input(call.dtype, call.op or "sum", call.count, member, stable_seed(data_seed, index))


def rank_input(data_seed: int, member: int, call: Call, size: int) -> np.ndarray:
    blocks = size if call.kind in ("reduce_scatter", "alltoall") else 1
    return np.concatenate([block(data_seed, member, b, call) for b in range(blocks)])


def expected_output(data_seed: int, me: int, call: Call, size: int) -> tuple[np.ndarray, np.ndarray | None]:
    """What comm rank `me` must hold after `call`, and the magnitude that bounds a float sum's rounding
    (None: compare bit for bit)."""
    members = range(size)
    if call.kind == "all_reduce":
        return ref.reduce(call.dtype, call.op, [block(data_seed, p, 0, call) for p in members])
    if call.kind == "reduce_scatter":
        return ref.reduce(call.dtype, call.op, [block(data_seed, p, me, call) for p in members])
    if call.kind == "all_gather":
        return np.concatenate([block(data_seed, p, 0, call) for p in members]), None
    if call.kind == "alltoall":
        return np.concatenate([block(data_seed, p, me, call) for p in members]), None
    if call.kind == "broadcast":
        return block(data_seed, call.root, 0, call), None
    return block(data_seed, (me - call.root) % size, 0, call), None  # sendrecv


def data_seed(seed: int, phase: int, item: Item, call_index: int, replay: int) -> int:
    return stable_seed(seed, phase, item.comm, item.color, item.seq, call_index, replay)


# --- the GPU side ------------------------------------------------------------------------------------

STALL_EXIT = 3


class Watchdog:
    """Ends the process with a STALL line and every thread's stack when nothing progressed for `limit`
    seconds. A Python thread prints what was pending; faulthandler (no GIL needed) backs it up in case
    a stuck call holds the GIL."""

    def __init__(self, rank: int, limit: float) -> None:
        self.rank = rank
        self.limit = limit
        self.lock = threading.Lock()
        self.last = time.monotonic()
        self.doing = "starting"
        self.armed_at = 0.0
        faulthandler.enable()
        self._arm()
        threading.Thread(target=self._watch, name="stall-watchdog", daemon=True).start()

    def beat(self, doing: str) -> None:
        now = time.monotonic()
        with self.lock:
            self.last = now
            self.doing = doing
        if now - self.armed_at > 1.0:  # re-arming costs a thread handshake: at most once a second
            self._arm()

    def _arm(self) -> None:
        faulthandler.dump_traceback_later(self.limit + 30, exit=True)
        self.armed_at = time.monotonic()

    def _watch(self) -> None:
        while True:
            time.sleep(1.0)
            with self.lock:
                idle = time.monotonic() - self.last
                doing = self.doing
            if idle > self.limit:
                print(
                    f"STALL many_comms: rank {self.rank}: no progress for {idle:.0f} s while {doing}",
                    flush=True,
                )
                faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
                sys.stderr.flush()
                os._exit(STALL_EXIT)


@dataclass
class CallBuffers:
    call: Call
    send: cp.ndarray
    recv: cp.ndarray
    # Graph items: each replay's input (copied into send before the launch) and output (copied out of
    # recv after it), so that every replay is checked with its own data.
    stages: list[cp.ndarray] = field(default_factory=list)
    outs: list[cp.ndarray] = field(default_factory=list)


@dataclass
class Launched:
    step: Step
    buffers: list[CallBuffers]
    done: Any = None  # cupy Event recorded after the item
    graph: Any = None  # kept alive until the phase has finished


class Stress:
    def __init__(self, args: argparse.Namespace) -> None:
        import cupy as cp

        self.cp = cp
        self.args = args
        self.rank, self.size, uid = world_from_env()
        self.watchdog = Watchdog(self.rank, args.stall)
        self.watchdog.beat("initialising the world communicator")
        self.world = Communicator(self.size, self.rank, uid, device=local_device())
        self.nccl = Nccl.load()
        self.dtypes = supported_dtypes()
        self.comms: list[Communicator] = []
        for index, spec in enumerate(SPLITS):
            self.watchdog.beat(f"splitting {spec.name}")
            comm = self.world.split(spec.color(self.rank, self.size), spec.key(self.rank, self.size))
            members = split_members(spec, self.rank, self.size)
            assert comm is not None, f"split {spec.name}: no communicator"
            assert (comm.size, comm.rank) == (len(members), members.index(self.rank)), (
                f"split {index} {spec.name}: rank {comm.rank} of {comm.size}, expected "
                f"{members.index(self.rank)} of {len(members)}"
            )
            self.comms.append(comm)
        self.streams = [cp.cuda.Stream(non_blocking=True) for _ in range(args.streams)]
        self.world_stream = cp.cuda.Stream(non_blocking=True)
        self.calls = 0
        self.graph_calls = 0

    # --- buffers ----------------------------------------------------------------------------------
    def device(self, host: np.ndarray, dtype: str) -> cp.ndarray:
        return self.cp.asarray(host.view(ref.storage_dtype(dtype)))

    def empty(self, count: int, dtype: str) -> cp.ndarray:
        out = self.cp.empty(count, dtype=ref.storage_dtype(dtype))
        out.data.memset_async(0x5A, out.nbytes)  # poison: every element must be written
        return out

    def buffers(self, phase: int, item: Item, index: int, call: Call) -> CallBuffers:
        me, size = self.comms[item.comm].rank, item.size
        recv = self.empty(call.recv_count(size), call.dtype)
        if call.in_place and call.kind == "all_gather":
            send = recv[me * call.count : (me + 1) * call.count]  # NCCL's in-place layout
        elif call.in_place:
            send = recv
        else:
            send = self.empty(call.send_count(size), call.dtype)
        bufs = CallBuffers(call, send, recv)
        inputs = [
            rank_input(data_seed(self.args.seed, phase, item, index, replay), me, call, size)
            for replay in range(max(1, item.replays))
        ]
        if item.replays:
            bufs.stages = [self.device(x, call.dtype) for x in inputs]
            bufs.outs = [self.empty(recv.size, call.dtype) for _ in inputs]
        else:
            send.set(inputs[0].view(ref.storage_dtype(call.dtype)))
        return bufs

    # --- issuing ----------------------------------------------------------------------------------
    def issue_call(self, item: Item, bufs: CallBuffers, stream: cp.cuda.Stream) -> None:
        comm = self.comms[item.comm]
        lib, handle, call = self.nccl.lib, comm.handle, bufs.call
        s = ffi.cast("void*", stream.ptr)
        send = ffi.cast("void*", bufs.send.data.ptr)
        recv = ffi.cast("void*", bufs.recv.data.ptr)
        code, n = dtype_code(call.dtype), call.count
        if call.kind == "all_reduce":
            result = lib.ncclAllReduce(send, recv, n, code, op_code(call.op), handle, s)
        elif call.kind == "reduce_scatter":
            result = lib.ncclReduceScatter(send, recv, n, code, op_code(call.op), handle, s)
        elif call.kind == "all_gather":
            result = lib.ncclAllGather(send, recv, n, code, handle, s)
        elif call.kind == "alltoall":
            result = lib.ncclAlltoAll(send, recv, n, code, handle, s)
        elif call.kind == "broadcast":
            result = lib.ncclBroadcast(send, recv, n, code, call.root, handle, s)
        else:
            me, size = comm.rank, comm.size
            self.nccl.check(lib.ncclGroupStart())
            self.nccl.check(lib.ncclSend(send, n, code, (me + call.root) % size, handle, s), handle)
            self.nccl.check(lib.ncclRecv(recv, n, code, (me - call.root) % size, handle, s), handle)
            result = lib.ncclGroupEnd()
        self.nccl.check(result, handle)

    def issue(self, launched: Launched, last_event: dict[int, Any], after_graph: set[int]) -> None:
        cp, item = self.cp, launched.step.item
        stream = self.streams[launched.step.stream]
        # The library orders a communicator's eager calls across streams itself; a graph replays later
        # than it is captured, so, as a careful caller would, order it with explicit events.
        if item.comm in last_event and (item.replays or item.comm in after_graph):
            stream.wait_event(last_event[item.comm])
        if item.replays:
            stream.begin_capture()
            try:
                for bufs in launched.buffers:
                    self.issue_call(item, bufs, stream)
            finally:
                launched.graph = stream.end_capture()
            for replay in range(item.replays):
                for b in launched.buffers:
                    b.send.data.copy_from_device_async(b.stages[replay].data, b.stages[replay].nbytes, stream)
                launched.graph.launch(stream)
                for b in launched.buffers:
                    b.outs[replay].data.copy_from_device_async(b.recv.data, b.recv.nbytes, stream)
            after_graph.add(item.comm)
        else:
            self.issue_call(item, launched.buffers[0], stream)
            after_graph.discard(item.comm)
        launched.done = cp.cuda.Event(block=False, disable_timing=True)
        launched.done.record(stream)
        last_event[item.comm] = launched.done

    def wait(self, launched: list[Launched]) -> None:
        """Polls every item's event so that a stall names the calls still pending."""

        def pending_text(pending: list[Launched]) -> str:
            names = "; ".join(f"{p.step.item.describe()} on stream {p.step.stream}" for p in pending[:8])
            more = f" and {len(pending) - 8} more" if len(pending) > 8 else ""
            heads: dict[int, Launched] = {}
            for p in pending:  # issue order: the first pending item of each stream is its head
                heads.setdefault(p.step.stream, p)
            head_text = "; ".join(f"stream {s}: {heads[s].step.item.describe()}" for s in sorted(heads))
            return f"waiting for {len(pending)} items: {names}{more}. Stream heads: {head_text}"

        pending = list(launched)
        self.watchdog.beat(pending_text(pending))
        while pending:
            still = [p for p in pending if not p.done.done]
            if len(still) < len(pending):
                self.watchdog.beat(pending_text(still))
            pending = still
            if pending:
                # Eight ranks poll at once on the CPUs that also compute their references.
                time.sleep(0.001)

    # --- checking ---------------------------------------------------------------------------------
    def check(self, phase: int, launched: Launched) -> None:
        item = launched.step.item
        me = self.comms[item.comm].rank
        for index, bufs in enumerate(launched.buffers):
            call = bufs.call
            outs = bufs.outs if item.replays else [bufs.recv]
            for replay, out in enumerate(outs):
                seed = data_seed(self.args.seed, phase, item, index, replay)
                expected, magnitude = expected_output(seed, me, call, item.size)
                got = out.get().view(ref.host_dtype(call.dtype))
                what = (
                    f"rank {self.rank} phase {phase} {item.describe()} call {index} replay {replay}"
                    f" in_place={call.in_place} root/shift={call.root} (comm rank {me} of {item.size})"
                )
                if magnitude is None:
                    size = expected.dtype.itemsize
                    wrong = got.view(np.uint8).reshape(-1, size) != expected.view(np.uint8).reshape(-1, size)
                    bad = np.nonzero(wrong.any(axis=1))[0]
                    assert bad.size == 0, (
                        f"{what}: {bad.size} of {got.size} elements wrong, e.g. at {bad[:5].tolist()}:"
                        f" got {got[bad[:5]].tolist()} expected {expected[bad[:5]].tolist()}"
                    )
                else:
                    ref.check(got, expected, magnitude, call.dtype, item.size, what)
                if item.replays:
                    self.graph_calls += 1
                self.calls += 1

    # --- phases -----------------------------------------------------------------------------------
    def phase(self, phase: int) -> None:
        cp = self.cp
        steps = rank_plan(
            self.rank, self.size, phase, self.args.seed, self.dtypes, self.args.streams, self.args.graph_share
        )
        self.watchdog.beat(f"preparing phase {phase}")
        launched = [
            Launched(step, [self.buffers(phase, step.item, i, c) for i, c in enumerate(step.item.calls)])
            for step in steps
        ]
        cp.cuda.Device().synchronize()  # inputs and poison in place before any stream reads them
        last_event: dict[int, Any] = {}
        after_graph: set[int] = set()
        for entry in launched:
            self.watchdog.beat(f"issuing {entry.step.item.describe()} on stream {entry.step.stream}")
            self.issue(entry, last_event, after_graph)
        self.wait(launched)
        for spec, comm in zip(SPLITS, self.comms, strict=True):
            error = comm.async_error()
            assert error == 0, (
                f"rank {self.rank}: communicator {spec.name} reports"
                f" {RESULT_NAMES.get(error, error)} after phase {phase}"
            )
        self.watchdog.beat(f"checking phase {phase}")
        for entry in launched:
            self.check(phase, entry)

    def world_reduce(self, values: list[int], op: str) -> list[int]:
        """An all-reduce of a few int64s on the world communicator, waited for under the watchdog."""
        cp = self.cp
        data = cp.asarray(np.array(values, dtype=np.int64))
        cp.cuda.Device().synchronize()  # the copy above ran on another stream; every phase is done
        self.world.all_reduce(data, op=op, stream=self.world_stream)
        done = cp.cuda.Event(block=False, disable_timing=True)
        done.record(self.world_stream)
        self.watchdog.beat(f"world all-reduce ({op}) between phases")
        while not done.done:
            time.sleep(0.0005)
        return [int(v) for v in data.get()]

    def run(self) -> None:
        start = time.monotonic()
        phase = 0
        last_report = start
        while True:
            self.phase(phase)
            phase += 1
            elapsed = time.monotonic() - start
            # Every rank runs the same phases: go on while any rank has time left.
            if not self.world_reduce([int(elapsed < self.args.seconds)], "max")[0]:
                break
            if self.rank == 0 and time.monotonic() - last_report > 10:
                last_report = time.monotonic()
                print(f"  phase {phase}: {self.calls} calls checked, {elapsed:.0f} s", flush=True)
        elapsed = time.monotonic() - start
        print(
            f"PASS many_comms: rank {self.rank}: {self.calls} calls checked ({self.graph_calls} in graph"
            f" replays) on {len(self.comms)} communicators, {phase} phases, {elapsed:.1f} s",
            flush=True,
        )
        total, graph_total = self.world_reduce([self.calls, self.graph_calls], "sum")
        fewest = self.world_reduce([self.calls], "min")[0]
        if self.rank == 0:
            print(
                f"RESULT many_comms: {self.size} ranks x {len(self.comms)} communicators, {total} calls"
                f" checked ({graph_total} in graph replays, at least {fewest} per rank), {phase} phases,"
                f" {elapsed:.1f} s",
                flush=True,
            )
        for spec, comm in zip(SPLITS, self.comms, strict=True):
            self.watchdog.beat(f"destroying {spec.name}")
            comm.destroy()
        self.watchdog.beat("destroying the world communicator")
        self.world.destroy()
        faulthandler.cancel_dump_traceback_later()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="8 ranks, 16 communicators each, random checked calls")
    parser.add_argument("--seconds", type=float, default=60.0, help="run phases for at least this long")
    parser.add_argument("--stall", type=float, default=60.0, help="fail when nothing progresses this long")
    parser.add_argument("--seed", type=int, default=20261205, help="seed of every schedule")
    # To narrow a stall down: fewer streams per rank, or no CUDA graphs.
    parser.add_argument("--streams", type=int, default=STREAMS, help="streams per rank")
    parser.add_argument("--graph-share", type=float, default=GRAPH_SHARE, help="share of items captured")
    args = parser.parse_args(argv)
    try:
        Stress(args).run()
    except BaseException as error:
        rank = os.environ.get("MSCCLPP_NCCL_RANK", "?")
        print(f"FAIL many_comms: rank {rank}: {type(error).__name__}: {error}", flush=True)
        traceback.print_exc()
        sys.stderr.flush()
        # The peers may be waiting inside calls that will never complete: skip teardown.
        os._exit(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
