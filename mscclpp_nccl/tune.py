"""`python -m mscclpp_nccl.tune`: measure every candidate algorithm per collective and message size on this
machine, and write the tuning table (JSON) that the C library's selector reads.

How it works. The command starts N ranks through the launcher (sharing GPUs under MPS when there are more
ranks than GPUs), each re-invoking this module with --worker. A worker reuses the benchmark's per-rank
machinery (`bench.Worker`: stream, buffers from ncclMemAlloc, data generation and NumPy references, the
TCP bookkeeping link between ranks, the watchdog). For each collective it creates one communicator per
candidate with ncclCommInitRank (a fresh unique id from rank 0, shared over the bookkeeping link), with
MSCCLPP_NCCL_ALGO set to that candidate's item while the communicator initialises: the library reads the
variable at init, so each communicator is pinned to one algorithm and launch shape.

Per message size, every candidate is
  1. verified: one eager call and one CUDA-graph replay of a call, each compared with a NumPy reference
     on inputs that make the result exact. A candidate that errors (at init, at a call, asynchronously or
     by timing out) or gives a wrong result is reported and excluded from the collective: it is never
     chosen, at that size or any other;
  2. timed: --calls-per-graph back-to-back out-of-place calls captured in one CUDA graph, one warm-up
     replay, then up to --replays replays (fewer for slow sizes, so that a point takes about
     --time-per-point seconds); time per call is host wall time around the replays divided by the calls,
     the slowest rank's time counts. A candidate already more than 3x slower than the best one at this
     size (on calls of 2 ms or more) is not timed further: its time is shown with a "~" and it cannot
     win.
Every decision that changes which library calls a rank makes is agreed among the ranks first (each rank's
status goes over the bookkeeping link), so that one rank's failure never leaves the others waiting in a
kernel: they abort that candidate's communicator together.

Sizes are nccl-tests' (-b, -e, -f: the size column, total bytes for all_gather, reduce_scatter, alltoall,
gather and scatter). The table's byte boundaries are what the C selector looks a call up by: the call's
count argument times the element size (for the collectives above, the bytes per rank).

Rules: the winner at a size is the fastest candidate, except that the previous size's winner keeps the
size when it is within 3% of the fastest (noise between equivalent candidates would otherwise split
rules); consecutive tuned sizes with the same winner merge into one rule whose max_bytes is the largest
of them; a call between two tuned sizes takes the rule of the next larger tuned size; the last rule has
max_bytes null. blocks/threads/chunk_bytes are omitted where the library's default won. The table is
merged into --out when it exists (entries with the same gpu, nranks, ranks_per_gpu, collective and
dtype_bytes are replaced, others kept). Use it with MSCCLPP_NCCL_TUNING_FILE=PATH, or ship it as
mscclpp_nccl/tuning/default.json.

The table building, merging, rule compression, validation, formatting and plot data are plain functions
below, usable and testable without a GPU; --from-raw rebuilds the table and plot from a --raw file.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import json
import math
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import numpy as np

from .bench import (
    COLLECTIVES,
    REDUCING,
    BenchError,
    DType,
    HostGroupError,
    Layout,
    Options,
    RankInfo,
    UsageError,
    Worker,
    _exit,
    _key,
    _say,
    count_wrong,
    data_kind,
    default_ranks,
    expected_output,
    gen_input,
    launch_plan,
    layout,
    parse_int,
    parse_size,
    reduce_ranks,
    resolve_types,
    size_series,
)
from .bench import parse_args as bench_parse_args

ALGO_ENV = "MSCCLPP_NCCL_ALGO"
TABLE_FORMAT = "mscclpp-nccl-tuning"
TABLE_VERSION = 1
RAW_FORMAT = "mscclpp-nccl-tune-raw"
RAW_VERSION = 1

# The library's algorithms (native/algorithms/registry.cc) and the collectives each serves. The library
# ignores the whole of MSCCLPP_NCCL_ALGO when an item names an algorithm it does not know (it warns and
# uses its own rules), which would time the wrong thing: so only these names are accepted here. Keep in
# step with the registry. allreduce_zero_copy is not here: it needs windows (the tuner's buffers are
# plain), and the library picks it by rule for buffers that lie in them.
# The collectives the exchange kernels serve: every one but all_reduce and sendrecv.
EXCHANGE_COLLECTIVES: tuple[str, ...] = tuple(c for c in COLLECTIVES if c not in ("all_reduce", "sendrecv"))
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "allreduce_one_shot_packet": ("all_reduce",),
    "allreduce_two_shot_packet": ("all_reduce",),
    "allreduce_two_shot_chunked": ("all_reduce",),
    "exchange_packet": EXCHANGE_COLLECTIVES,
    "exchange_chunked": EXCHANGE_COLLECTIVES,
    "p2p_packet": ("sendrecv",),
    "p2p_chunked": ("sendrecv",),
}
BLOCK_GRID = (1, 2, 4, 8, 16, 32)
MAX_PACKET_BLOCKS = 32  # kMaxPacketBlocks: the library's grid cap
STOCK = "stock"  # the pseudo-algorithm of the stock NCCL comparison run
ROOT = 0  # rooted collectives are tuned with root 0 (the table has no root key)

# Pruning: a candidate whose call takes at least PRUNE_MIN_SECONDS and more than PRUNE_FACTOR times the
# best time so far at this size is not timed further (it cannot win).
PRUNE_FACTOR = 3.0
PRUNE_MIN_SECONDS = 2e-3
MIN_REPLAYS = 3
# The previous size's winner keeps a size where it is within this fraction of the fastest: equivalent
# candidates (the default grid and the grid the default resolves to, say) then do not split rules on noise.
TIE_TOLERANCE = 0.03
# The reference of a full-size reduction is computed in chunks of this many elements (bounded memory).
REFERENCE_CHUNK = 1 << 22

# A rough model of the time a run takes, for the up-front estimate (the running estimate rescales it by
# what the finished points took).
EST_COMM_INIT_S = 0.5  # one communicator's ncclCommInitRank
EST_POINT_OVERHEAD_S = 0.012  # per candidate and size: captures, host exchanges, copies
EST_CALL_LATENCY_S = 15e-6
EST_CALL_BYTES_PER_S = 40e9
EST_HOST_BYTES_PER_S = 3e9  # reading a result back and comparing it
EST_REFERENCE_S_PER_BYTE = 3e-8  # generating inputs and the NumPy reference, once per size


class TableError(ValueError):
    """A tuning table that does not follow the format."""


# --- candidates ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Candidate:
    """One algorithm with a launch shape for one collective; None fields are the library's default."""

    collective: str
    algorithm: str
    blocks: int | None = None
    threads: int | None = None
    chunk_bytes: int | None = None

    @property
    def spec(self) -> str:
        """algorithm[/blocks[/threads[/chunk_bytes]]], 0 standing for a default before a given field."""
        fields = [self.blocks, self.threads, self.chunk_bytes]
        while fields and fields[-1] is None:
            fields.pop()
        return "/".join([self.algorithm, *(str(f or 0) for f in fields)])

    @property
    def item(self) -> str | None:
        """The MSCCLPP_NCCL_ALGO value that forces this candidate (None for the stock run)."""
        return None if self.algorithm == STOCK else f"{self.collective}={self.spec}"

    @property
    def label(self) -> str:
        """A short name for progress lines and plots: one_shot/8, two_shot, exchange/4, p2p."""
        return short_name(self.algorithm) + self.spec[len(self.algorithm) :]

    def rule(self, max_bytes: int | None) -> dict[str, Any]:
        """The table rule that chooses this candidate up to max_bytes (None: any size)."""
        rule: dict[str, Any] = {"max_bytes": max_bytes, "algorithm": self.algorithm}
        for key in ("blocks", "threads", "chunk_bytes"):
            value = getattr(self, key)
            if value is not None:
                rule[key] = value
        return rule

    def to_doc(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "label": self.label,
            "item": self.item,
            "algorithm": self.algorithm,
            "blocks": self.blocks,
            "threads": self.threads,
            "chunk_bytes": self.chunk_bytes,
        }

    @classmethod
    def from_doc(cls, collective: str, doc: dict[str, Any]) -> Candidate:
        return cls(
            collective, doc["algorithm"], doc.get("blocks"), doc.get("threads"), doc.get("chunk_bytes")
        )


def short_name(algorithm: str) -> str:
    name = algorithm.removeprefix("allreduce_").removesuffix("_packet")
    return name or algorithm


def _shape_field(text: str, item: str) -> int | None:
    # As the library reads them: decimal, non-negative; 0 means the default.
    if not text.isdigit():
        raise ValueError(f"candidate {item!r}: {text!r} is not a non-negative integer")
    value = int(text)
    return value or None


def parse_candidate(text: str, collectives: Sequence[str] = COLLECTIVES) -> list[Candidate]:
    """Candidates of one MSCCLPP_NCCL_ALGO item, `[collective=]algorithm[/blocks[/threads[/chunk]]]`.

    A bare algorithm gives one candidate per collective in `collectives` that it serves; a named
    collective outside `collectives` gives none.
    """
    item = text.strip()
    if not item:
        raise ValueError("empty candidate")
    named: str | None = None
    body = item
    if "=" in item:
        named, body = (s.strip() for s in item.split("=", 1))
        if named not in COLLECTIVES:
            raise ValueError(
                f"candidate {item!r}: unknown collective {named!r}; one of {', '.join(COLLECTIVES)}"
            )
    parts = body.split("/")
    algorithm = parts[0].strip()
    if algorithm not in ALGORITHMS:
        raise ValueError(
            f"candidate {item!r}: unknown algorithm {algorithm!r}; one of {', '.join(ALGORITHMS)}"
            " (the library ignores MSCCLPP_NCCL_ALGO altogether when it does not know a name)"
        )
    if len(parts) > 4:
        raise ValueError(f"candidate {item!r}: at most blocks/threads/chunk_bytes after the algorithm")
    shape = [_shape_field(p.strip(), item) for p in parts[1:]] + [None] * (4 - len(parts))
    served = ALGORITHMS[algorithm]
    if named is not None:
        if named not in served:
            raise ValueError(f"candidate {item!r}: {algorithm} does not serve {named}")
        targets = [named] if named in collectives else []
    else:
        targets = [c for c in collectives if c in served]
    return [Candidate(c, algorithm, *shape) for c in targets]


def parse_candidate_specs(specs: Sequence[str], collectives: Sequence[str]) -> dict[str, list[Candidate]]:
    """--candidates: items (each may hold several, comma-separated) -> candidates per collective, in the
    order given, without duplicates. Collectives that no item serves are absent."""
    out: dict[str, list[Candidate]] = {}
    for spec in specs:
        for item in spec.split(","):
            if not item.strip():
                continue
            for cand in parse_candidate(item, collectives):
                bucket = out.setdefault(cand.collective, [])
                if cand not in bucket:
                    bucket.append(cand)
    return {c: out[c] for c in collectives if c in out}


def block_cap(sm_count: int, ranks_per_gpu: int) -> int:
    """The library's grid cap: the SMs of the GPU shared by its ranks, at most kMaxPacketBlocks."""
    if sm_count <= 0:
        return MAX_PACKET_BLOCKS
    return max(1, min(MAX_PACKET_BLOCKS, sm_count // max(1, ranks_per_gpu)))


def default_candidates(collective: str, max_blocks: int = MAX_PACKET_BLOCKS) -> list[Candidate]:
    """Each algorithm serving the collective with default blocks, then blocks 1, 2, 4, ... 32 up to the
    GPU's cap (and the cap itself when it falls between); threads and chunks default. Send/recv kernels
    size their grids by their transfers, so their algorithms come plain."""
    grid = [b for b in BLOCK_GRID if b <= max_blocks]
    if max_blocks < MAX_PACKET_BLOCKS and max_blocks not in grid:
        grid.append(max_blocks)
    out: list[Candidate] = []
    for algorithm, served in ALGORITHMS.items():
        if collective in served:
            out.append(Candidate(collective, algorithm))
            if collective != "sendrecv":
                out += [Candidate(collective, algorithm, b) for b in grid]
    return out


def algo_env(candidates: Sequence[Candidate]) -> str:
    """The MSCCLPP_NCCL_ALGO value forcing these candidates (one per collective)."""
    return ",".join(c.item for c in candidates if c.item)


# --- winners, rules and tables ---------------------------------------------------------------------------


def pick_winner(
    times: dict[str, float | None],
    order: Sequence[str],
    excluded: set[str] | frozenset[str] = frozenset(),
    prefer: str | None = None,
    tolerance: float = 0.0,
) -> str | None:
    """The fastest candidate (by spec) among those with a time and not excluded; ties go to the earlier
    one in `order`. `prefer` (the previous size's winner) wins instead when it is within `tolerance`
    (a fraction) of the fastest, so that noise between equivalent candidates does not split rules.
    None when none qualifies."""
    best: str | None = None
    for spec in order:
        t = times.get(spec)
        if spec in excluded or t is None or not math.isfinite(t):
            continue
        if best is None or t < times[best]:  # type: ignore[operator]
            best = spec
    if best is not None and prefer is not None and prefer not in excluded:
        t = times.get(prefer)
        if t is not None and math.isfinite(t) and t <= times[best] * (1 + tolerance):  # type: ignore[operator]
            return prefer
    return best


def compress_rules(points: Sequence[tuple[int, Candidate | None]]) -> list[dict[str, Any]]:
    """Rules from the winner at each tuned size (bytes as the library looks calls up; None: no winner,
    the size is left to its neighbours). Consecutive sizes with the same winner merge into one rule
    whose max_bytes is the largest of them; the last rule's max_bytes is None."""
    ordered = sorted(points, key=lambda p: p[0])
    sizes = [b for b, _ in ordered]
    if len(set(sizes)) != len(sizes):
        raise ValueError("a size appears twice")
    if any(b < 1 for b in sizes):
        raise ValueError("sizes must be positive")
    runs: list[list[Any]] = []  # [largest bytes, winner]
    for nbytes, winner in ordered:
        if winner is None:
            continue
        if runs and runs[-1][1] == winner:
            runs[-1][0] = nbytes
        else:
            runs.append([nbytes, winner])
    return [w.rule(None if i == len(runs) - 1 else b) for i, (b, w) in enumerate(runs)]


WILDCARD = "*"  # in an entry's gpu, nranks, ranks_per_gpu or dtype_bytes: any (the C library's reading)


def entry_key(entry: dict[str, Any]) -> tuple[Any, ...]:
    """What makes two entries the same (a missing dtype_bytes means any, like "*")."""
    dtype_bytes = entry.get("dtype_bytes", WILDCARD)
    return (entry["gpu"], entry["nranks"], entry["ranks_per_gpu"], entry["collective"], dtype_bytes)


def make_entry(
    gpu: str, nranks: int, ranks_per_gpu: int, collective: str, dtype_bytes: int, rules: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "gpu": gpu,
        "nranks": nranks,
        "ranks_per_gpu": ranks_per_gpu,
        "collective": collective,
        "dtype_bytes": dtype_bytes,
        "rules": rules,
    }


def new_table(entries: Sequence[dict[str, Any]] = ()) -> dict[str, Any]:
    return {"format": TABLE_FORMAT, "version": TABLE_VERSION, "entries": list(entries)}


def merge_tables(existing: dict[str, Any] | None, entries: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """`existing` (or an empty table) with `entries` merged in: an entry with the key of an existing one
    replaces it in place, others are appended; existing entries with other keys are kept."""
    out = list(existing["entries"]) if existing else []
    index = {entry_key(e): i for i, e in enumerate(out)}
    for e in entries:
        key = entry_key(e)
        if key in index:
            out[index[key]] = e
        else:
            index[key] = len(out)
            out.append(e)
    return new_table(out)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _exact_keys(obj: Any, where: str, required: set[str], optional: frozenset[str] = frozenset()) -> None:
    if not isinstance(obj, dict):
        raise TableError(f"{where}: expected an object")
    keys = set(obj)
    missing = required - keys
    unknown = keys - required - optional
    if missing:
        raise TableError(f"{where}: missing {', '.join(sorted(missing))}")
    if unknown:
        raise TableError(f"{where}: unknown field(s) {', '.join(sorted(unknown))}")


def validate_table(doc: Any) -> None:
    """Raises TableError unless doc is a tuning table exactly as the C library accepts it."""
    _exact_keys(doc, "table", {"format", "version", "entries"})
    if doc["format"] != TABLE_FORMAT:
        raise TableError(f"table: format is {doc['format']!r}, expected {TABLE_FORMAT!r}")
    if not _is_int(doc["version"]) or doc["version"] != TABLE_VERSION:
        raise TableError(f"table: version is {doc['version']!r}, expected {TABLE_VERSION}")
    if not isinstance(doc["entries"], list):
        raise TableError("table: entries must be an array")
    seen: set[tuple[Any, ...]] = set()
    for i, e in enumerate(doc["entries"]):
        where = f"entries[{i}]"
        _exact_keys(
            e, where, {"gpu", "nranks", "ranks_per_gpu", "collective", "rules"}, frozenset({"dtype_bytes"})
        )
        if not isinstance(e["gpu"], str) or not e["gpu"]:
            raise TableError(f"{where}.gpu: a device name or {WILDCARD!r}")
        for key in ("nranks", "ranks_per_gpu"):
            if e[key] != WILDCARD and (not _is_int(e[key]) or e[key] < 1):
                raise TableError(f"{where}.{key}: a positive integer or {WILDCARD!r}")
        if _is_int(e["nranks"]) and _is_int(e["ranks_per_gpu"]) and e["ranks_per_gpu"] > e["nranks"]:
            raise TableError(f"{where}: ranks_per_gpu exceeds nranks")
        if e["collective"] not in COLLECTIVES:
            raise TableError(
                f"{where}.collective: {e['collective']!r} is not one of {', '.join(COLLECTIVES)}"
            )
        dtype_bytes = e.get("dtype_bytes", WILDCARD)
        if dtype_bytes != WILDCARD and (not _is_int(dtype_bytes) or dtype_bytes not in (1, 2, 4, 8)):
            raise TableError(f"{where}.dtype_bytes: 1, 2, 4, 8 or {WILDCARD!r}")
        key = entry_key(e)
        if key in seen:
            raise TableError(f"{where}: a second entry for {key}")
        seen.add(key)
        rules = e["rules"]
        if not isinstance(rules, list) or not rules:
            raise TableError(f"{where}.rules: a non-empty array")
        previous = 0
        for j, r in enumerate(rules):
            rw = f"{where}.rules[{j}]"
            _exact_keys(r, rw, {"max_bytes", "algorithm"}, frozenset({"blocks", "threads", "chunk_bytes"}))
            last = j == len(rules) - 1
            mb = r["max_bytes"]
            if last:
                if mb is not None:
                    raise TableError(f"{rw}.max_bytes: the last rule's is null")
            else:
                if not _is_int(mb) or mb < 1:
                    raise TableError(f"{rw}.max_bytes: a positive integer (null only in the last rule)")
                if mb <= previous:
                    raise TableError(f"{rw}.max_bytes: {mb} does not increase on {previous}")
                previous = mb
            algorithm = r["algorithm"]
            if not isinstance(algorithm, str) or algorithm not in ALGORITHMS:
                raise TableError(f"{rw}.algorithm: {algorithm!r} is not one of {', '.join(ALGORITHMS)}")
            if e["collective"] not in ALGORITHMS[algorithm]:
                raise TableError(f"{rw}.algorithm: {algorithm} does not serve {e['collective']}")
            for key in ("blocks", "threads", "chunk_bytes"):
                if key in r and (not _is_int(r[key]) or r[key] < 1):
                    raise TableError(f"{rw}.{key}: a positive integer")


def load_table(path: str) -> dict[str, Any]:
    """A table from a file, validated (TableError or OSError otherwise)."""
    with open(path) as f:
        try:
            doc = json.load(f)
        except json.JSONDecodeError as e:
            raise TableError(f"{path}: not JSON: {e}") from None
    try:
        validate_table(doc)
    except TableError as e:
        raise TableError(f"{path}: {e}") from None
    return doc


def table_text(doc: dict[str, Any]) -> str:
    validate_table(doc)
    return json.dumps(doc, indent=2) + "\n"


def write_table(path: str, doc: dict[str, Any]) -> None:
    _write_atomic(path, table_text(doc))


def _write_atomic(path: str, text: str) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def run_candidates(coll_doc: dict[str, Any]) -> list[Candidate]:
    return [Candidate.from_doc(coll_doc["collective"], c) for c in coll_doc["candidates"]]


def point_times(point: dict[str, Any]) -> dict[str, float | None]:
    """spec -> time in us of the candidates that ran correctly at this point (pruned ones included)."""
    return {
        spec: r.get("time_us") if r.get("status") in ("ok", "pruned") else None
        for spec, r in point["results"].items()
    }


def winners(run: dict[str, Any], coll_doc: dict[str, Any]) -> list[tuple[dict[str, Any], Candidate | None]]:
    """(point, winning candidate or None) for each tuned size of one collective of a run."""
    cands = run_candidates(coll_doc)
    by_spec = {c.spec: c for c in cands}
    order = [c.spec for c in cands]
    excluded = set(coll_doc.get("excluded", {}))
    out = []
    previous = None
    for point in coll_doc["points"]:
        spec = pick_winner(point_times(point), order, excluded, previous, TIE_TOLERANCE)
        out.append((point, by_spec[spec] if spec is not None else None))
        previous = spec or previous
    return out


def build_entries(run: dict[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """The table entries of a tuning run (its complete collectives), and notes about what was left out."""
    entries: list[dict[str, Any]] = []
    notes: list[str] = []
    for coll_doc in run.get("collectives", []):
        coll = coll_doc["collective"]
        if not coll_doc.get("complete"):
            notes.append(f"{coll}: the run did not finish it; no entry")
            continue
        if not coll_doc["points"]:
            notes.append(f"{coll}: no size to tune (each is empty per rank); no entry")
            continue
        for spec, reason in coll_doc.get("excluded", {}).items():
            notes.append(f"{coll}: excluded {spec}: {reason}")
        pts = winners(run, coll_doc)
        for point, w in pts:
            if w is None:
                notes.append(
                    f"{coll}: no candidate ran correctly at {point['bytes']} B; left to its neighbours"
                )
        rules = compress_rules([(p["bytes"], w) for p, w in pts])
        if not rules:
            notes.append(f"{coll}: no candidate ran correctly at any size; no entry")
            continue
        entries.append(
            make_entry(run["gpu"], run["nranks"], run["ranks_per_gpu"], coll, run["dtype_bytes"], rules)
        )
    return entries, notes


# --- formatting ----------------------------------------------------------------------------------------


def format_bytes(n: int) -> str:
    """8 B, 1 KB, 256 MB (binary units where exact)."""
    for unit, shift in (("GB", 30), ("MB", 20), ("KB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def format_us(t: float) -> str:
    if t < 10:
        return f"{t:.2f}"
    if t < 1000:
        return f"{t:.1f}"
    return f"{t:.0f}"


def format_duration(seconds: float) -> str:
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def format_cell(label: str, status: str, time_us: float | None) -> str:
    if status == "ok" and time_us is not None:
        return f"{label} {format_us(time_us)}"
    if status == "pruned" and time_us is not None:
        return f"{label} ~{format_us(time_us)}"
    return f"{label} {status.upper()}"


def format_point_line(
    collective: str,
    size: int,
    nbytes: int,
    cells: Sequence[tuple[str, str, float | None]],
    winner: tuple[str, float] | None,
    index: int,
    total: int,
    elapsed: float | None = None,
    eta: float | None = None,
) -> str:
    """One progress line: the point, each candidate's time (us) or failure, the winner, the clock."""
    where = f"[{index:>{len(str(total))}}/{total}] {collective:<14} {format_bytes(size):>7}"
    if nbytes != size:
        where += f" ({format_bytes(nbytes)}/rank)"
    body = " | ".join(format_cell(*c) for c in cells)
    best = f"best {winner[0]} {format_us(winner[1])} us" if winner else "no candidate ran correctly"
    line = f"{where}: {body} -> {best}"
    if elapsed is not None:
        line += f"  [{format_duration(elapsed)}"
        line += f", ~{format_duration(eta)} left]" if eta is not None else "]"
    return line


def format_rules(entry: dict[str, Any]) -> list[str]:
    """A human summary of one table entry."""
    head = (
        f"{entry['collective']} on {entry['gpu']}, {entry['nranks']} ranks"
        f" ({entry['ranks_per_gpu']} per GPU), {entry['dtype_bytes']}-byte elements:"
    )
    lines = [head]
    lower = 0
    for r in entry["rules"]:
        shape = (
            ", ".join(f"{k} {r[k]}" for k in ("blocks", "threads", "chunk_bytes") if k in r)
            or "default shape"
        )
        span = f"> {format_bytes(lower)}" if r["max_bytes"] is None else f"<= {format_bytes(r['max_bytes'])}"
        lines.append(f"  {span:>12}: {r['algorithm']} ({shape})")
        lower = r["max_bytes"] or lower
    return lines


# --- time estimates ------------------------------------------------------------------------------------


def estimate_point_seconds(
    size: int, ncandidates: int, calls: int, replays: int, time_per_point: float
) -> float:
    """A rough guess of the seconds one size takes with `ncandidates` candidates (see the EST_ constants)."""
    per_call = EST_CALL_LATENCY_S + size / EST_CALL_BYTES_PER_S
    warm = calls * per_call
    n = replays if replays < MIN_REPLAYS else min(replays, max(MIN_REPLAYS, int(time_per_point / warm)))
    verify = 2 * per_call + 2 * size / EST_HOST_BYTES_PER_S
    per_candidate = EST_POINT_OVERHEAD_S + verify + warm * (1 + n)
    return ncandidates * per_candidate + size * EST_REFERENCE_S_PER_BYTE


def estimate_run_seconds(
    plan: Sequence[tuple[int, Sequence[int]]], calls: int, replays: int, time_per_point: float
) -> float:
    """plan: (candidates, sizes) per collective."""
    total = 0.0
    for ncand, sizes in plan:
        total += ncand * EST_COMM_INIT_S
        total += sum(estimate_point_seconds(s, ncand, calls, replays, time_per_point) for s in sizes)
    return total


def remaining_estimate(total_estimate: float, estimate_done: float, elapsed: float) -> float:
    """What is left of the up-front estimate, scaled by how the finished part compared with its estimate."""
    if estimate_done <= 0:
        return max(0.0, total_estimate - estimate_done)
    return max(0.0, total_estimate - estimate_done) * (elapsed / estimate_done)


def replays_for(warm_seconds: float, replays: int, time_per_point: float) -> int:
    """Replays to time: --replays, fewer (at least MIN_REPLAYS) when one replay is long."""
    if replays <= MIN_REPLAYS or warm_seconds <= 0:
        return max(1, replays)
    return max(MIN_REPLAYS, min(replays, int(time_per_point / warm_seconds)))


def should_prune(call_seconds: float, best_us: float | None) -> bool:
    """Whether a candidate taking call_seconds per call can stop being timed (it cannot win)."""
    return (
        best_us is not None
        and call_seconds >= PRUNE_MIN_SECONDS
        and call_seconds * 1e6 > PRUNE_FACTOR * best_us
    )


# --- plot ----------------------------------------------------------------------------------------------


def plot_series(run: dict[str, Any], coll_doc: dict[str, Any]) -> dict[str, Any]:
    """What the plot of one collective draws: sizes (nccl-tests' size column), each candidate's time per
    size (None where it failed or was excluded), and the chosen candidate's time and label per size."""
    cands = run_candidates(coll_doc)
    excluded = set(coll_doc.get("excluded", {}))
    points = coll_doc["points"]
    series = {}
    for c in cands:
        if c.spec in excluded:
            continue
        series[c.label] = [point_times(p).get(c.spec) for p in points]
    chosen: list[float | None] = []
    labels: list[str | None] = []
    for point, w in winners(run, coll_doc):
        chosen.append(point_times(point)[w.spec] if w else None)
        labels.append(w.label if w else None)
    return {
        "sizes": [p["size"] for p in points],
        "candidates": series,
        "chosen": chosen,
        "chosen_labels": labels,
    }


def stock_series(stock: dict[str, Any] | None, collective: str) -> tuple[list[int], list[float | None]]:
    if not stock:
        return [], []
    for coll_doc in stock.get("collectives", []):
        if coll_doc["collective"] == collective:
            pts = coll_doc["points"]
            return [p["size"] for p in pts], [point_times(p).get(STOCK) for p in pts]
    return [], []


def plot_results(raw: dict[str, Any], path: str) -> bool:
    """Time (us, log) against size (bytes, log2) per collective: the chosen candidate bold, the others
    thin, stock NCCL dashed. False (with a message) when matplotlib is missing or nothing was tuned."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"# plot: matplotlib is not installed (pip install matplotlib); skipped {path}", flush=True)
        return False
    ours = raw.get("ours") or {}
    colls = [c for c in ours.get("collectives", []) if c.get("points")]
    if not colls:
        print(f"# plot: nothing was tuned; skipped {path}", flush=True)
        return False
    ncols = min(3, len(colls))
    nrows = -(-len(colls) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.4 * ncols, 4.8 * nrows), squeeze=False)
    for ax in axes.flat[len(colls) :]:
        ax.set_visible(False)
    for ax, coll_doc in zip(axes.flat, colls, strict=False):
        coll = coll_doc["collective"]
        data = plot_series(ours, coll_doc)
        sizes = data["sizes"]
        cmap = plt.get_cmap("tab20")
        for i, (label, times) in enumerate(data["candidates"].items()):
            xs = [s for s, t in zip(sizes, times, strict=True) if t is not None]
            ys = [t for t in times if t is not None]
            if xs:
                ax.plot(xs, ys, lw=0.8, alpha=0.6, color=cmap(i % 20), marker=".", ms=3, label=label)
        xs = [s for s, t in zip(sizes, data["chosen"], strict=True) if t is not None]
        ys = [t for t in data["chosen"] if t is not None]
        if xs:
            ax.plot(xs, ys, lw=2.8, color="black", label="chosen (tuned table)")
        previous = None
        for size, time_us, label in zip(sizes, data["chosen"], data["chosen_labels"], strict=True):
            if label is not None and label != previous and time_us is not None:
                ax.annotate(label, (size, time_us), xytext=(0, 8), textcoords="offset points", fontsize=6)
            previous = label or previous
        sx, sy = stock_series(raw.get("stock"), coll)
        pts = [(s, t) for s, t in zip(sx, sy, strict=True) if t is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), lw=1.8, ls="--", color="tab:red", label="stock NCCL")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes, nccl-tests convention)")
        ax.set_ylabel("time per call (us)")
        ax.set_title(
            f"{coll}: {ours['nranks']} ranks ({ours['ranks_per_gpu']}/GPU), {ours['dtype']}, {ours['gpu']}",
            fontsize=9,
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"# plot: wrote {path}", flush=True)
    return True


# --- options -------------------------------------------------------------------------------------------


@dataclass
class TuneOptions:
    ranks: int | None
    mps: bool | None
    collectives: list[str]
    explicit_candidates: dict[str, list[Candidate]] | None
    min_bytes: int
    max_bytes: int
    step_factor: int
    dtype: DType
    replays: int
    calls_per_graph: int
    time_per_point: float
    timeout: float
    run_timeout: float
    alloc: str
    out: str
    plot: str | None
    stock_lib: str | None
    raw: str | None
    from_raw: str | None
    worker: bool = False
    stock: bool = False
    results: str | None = None
    ranks_per_gpu: int | None = None

    def sizes(self) -> list[int]:
        return size_series(self.min_bytes, self.max_bytes, self.step_factor, 0)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m mscclpp_nccl.tune",
        description="Tune the library's algorithm choice per collective and size on this machine, and write"
        " the tuning table (JSON) its selector reads.",
        allow_abbrev=False,
    )
    p.add_argument(
        "-N", "--ranks", type=parse_int, default=None, help="ranks (default: GPUs, or 4 on one GPU)"
    )
    p.add_argument("--mps", dest="mps", action="store_true", default=None, help="MPS (default: when shared)")
    p.add_argument("--no-mps", dest="mps", action="store_false", help="never start MPS")
    p.add_argument(
        "--collectives", default=None, help=f"comma-separated, or all (default all): {', '.join(COLLECTIVES)}"
    )
    p.add_argument("-b", "--minbytes", default="8", help="smallest size (K/M/G suffixes; default 8)")
    p.add_argument("-e", "--maxbytes", default="256M", help="largest size (default 256M)")
    p.add_argument("-f", "--stepfactor", type=parse_int, default=2, help="size multiplier (default 2)")
    p.add_argument("-d", "--dtype", default="bfloat16", help="data type (default bfloat16)")
    p.add_argument("--replays", type=parse_int, default=20, help="timed graph replays per point (default 20)")
    p.add_argument(
        "--calls-per-graph", type=parse_int, default=10, help="calls captured in the graph (default 10)"
    )
    p.add_argument(
        "--time-per-point",
        type=float,
        default=0.5,
        help="seconds of timed replays a candidate may take at one size; fewer replays (at least 3) for"
        " long calls (default 0.5)",
    )
    p.add_argument(
        "--candidates",
        nargs="+",
        action="extend",
        default=None,
        metavar="ITEM",
        help="explicit candidates instead of the default grid: [collective=]algorithm[/blocks[/threads"
        "[/chunk_bytes]]] items (0: the default), space- or comma-separated",
    )
    p.add_argument(
        "--out", default="tuning.json", help="the table to write or merge into (default tuning.json)"
    )
    p.add_argument("--plot", default=None, help="also draw the times to this PNG (needs matplotlib)")
    p.add_argument("--stock-lib", default=None, help="also time this stock libnccl.so.2 (for the plot)")
    p.add_argument("--raw", default=None, help="also write every measurement to this JSON file")
    p.add_argument("--from-raw", default=None, help="no run: build the table (and plot) from a --raw file")
    p.add_argument(
        "--alloc",
        choices=("ncclmem", "cuda"),
        default="ncclmem",
        help="buffers from ncclMemAlloc or cudaMalloc",
    )
    p.add_argument("-T", "--timeout", type=float, default=60.0, help="seconds one wait may take (default 60)")
    p.add_argument(
        "--run-timeout", type=float, default=3600.0, help="seconds for the whole run (default 3600)"
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--stock", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--results", default=None, help=argparse.SUPPRESS)
    p.add_argument("--ranks-per-gpu", type=parse_int, default=None, help=argparse.SUPPRESS)
    return p


def parse_collectives(text: str | None) -> list[str]:
    if text is None or text.strip().lower() == "all":
        return list(COLLECTIVES)
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part not in COLLECTIVES:
            raise ValueError(f"unknown collective {part!r}; one of {', '.join(COLLECTIVES)} or all")
        if part not in out:
            out.append(part)
    if not out:
        raise ValueError("no collective given")
    return out


def parse_args(argv: Sequence[str]) -> TuneOptions:
    a = build_parser().parse_args(list(argv))
    try:
        collectives = parse_collectives(a.collectives)
        min_bytes = parse_size(a.minbytes)
        max_bytes = parse_size(a.maxbytes)
        if a.stepfactor < 2:
            raise ValueError("-f/--stepfactor must be at least 2")
        size_series(min_bytes, max_bytes, a.stepfactor, 0)
        types = resolve_types(a.dtype)
        if len(types) != 1:
            raise ValueError("--dtype takes one data type")
        explicit = None
        if a.candidates:
            explicit = parse_candidate_specs(a.candidates, collectives)
            missing = [c for c in collectives if c not in explicit]
            if a.collectives is None:
                collectives = [c for c in collectives if c in explicit]
            elif missing:
                raise ValueError(f"no candidate serves {', '.join(missing)}")
            if not collectives:
                raise ValueError("the candidates serve none of the collectives")
    except ValueError as e:
        raise UsageError(str(e)) from None
    checks = [
        (a.ranks is None or a.ranks >= 1, "-N/--ranks must be at least 1"),
        (a.replays >= 1, "--replays must be at least 1"),
        (a.calls_per_graph >= 1, "--calls-per-graph must be at least 1"),
        (a.time_per_point > 0, "--time-per-point must be positive"),
        (a.timeout > 0, "-T/--timeout must be positive"),
        (a.run_timeout > 0, "--run-timeout must be positive"),
        (max_bytes >= 1, "-e/--maxbytes must be at least 1"),
        (not (a.stock and not a.stock_lib), "--stock needs --stock-lib"),
    ]
    for ok, message in checks:
        if not ok:
            raise UsageError(message)
    return TuneOptions(
        ranks=a.ranks,
        mps=a.mps,
        collectives=collectives,
        explicit_candidates=explicit,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        step_factor=a.stepfactor,
        dtype=types[0],
        replays=a.replays,
        calls_per_graph=a.calls_per_graph,
        time_per_point=a.time_per_point,
        timeout=a.timeout,
        run_timeout=a.run_timeout,
        alloc=a.alloc,
        out=a.out,
        plot=a.plot,
        stock_lib=a.stock_lib,
        raw=a.raw,
        from_raw=a.from_raw,
        worker=a.worker,
        stock=a.stock,
        results=a.results,
        ranks_per_gpu=a.ranks_per_gpu,
    )


def tuned_points(collective: str, sizes: Sequence[int], elt: int, nranks: int) -> list[tuple[int, Layout]]:
    """(size, layout) of the sizes worth tuning: a non-empty call, each lookup byte count once."""
    out: list[tuple[int, Layout]] = []
    seen: set[int] = set()
    for size in sizes:
        lay = layout(collective, size, elt, nranks)
        nbytes = lay.count * elt
        if nbytes == 0 or nbytes in seen:
            continue
        seen.add(nbytes)
        out.append((size, lay))
    return out


def candidates_for(cfg: TuneOptions, collective: str, max_blocks: int) -> list[Candidate]:
    if cfg.stock:
        return [Candidate(collective, STOCK)]
    if cfg.explicit_candidates is not None:
        return list(cfg.explicit_candidates.get(collective, []))
    return default_candidates(collective, max_blocks)


# --- the per-rank worker (GPU) -----------------------------------------------------------------------------

# The process environment is shared by every thread; set-then-init of a communicator must not interleave.
_ENV_LOCK = threading.Lock()
# The clock of every timing (tests substitute a virtual one).
_clock = time.perf_counter


def reference(
    collective: str, dt: DType, kind: str, nranks: int, rank: int, root: int, lay: Layout, seed: int
) -> tuple[np.ndarray | None, int]:
    """The bench's expected output of an out-of-place call, with full-size reductions computed in chunks
    (so that a 256 MB all-reduce among 8 ranks does not need gigabytes of host memory per rank)."""
    full_reduction = collective == "all_reduce" or (collective == "reduce" and rank == root)
    if not full_reduction or lay.count <= REFERENCE_CHUNK:
        return expected_output(collective, dt, kind, nranks, rank, root, False, lay, seed)
    out = np.empty(lay.count, dtype=dt.storage)
    tolerance = 0
    for start in range(0, lay.count, REFERENCE_CHUNK):
        n = min(REFERENCE_CHUNK, lay.count - start)
        inputs = [gen_input(dt, kind, nranks, r, seed, start, n) for r in range(nranks)]
        part, tolerance = reduce_ranks(dt, kind, inputs)
        out[start : start + n] = part
    return out, tolerance


def count_mismatches(got: np.ndarray, expected: np.ndarray, dt: DType, tolerance: int) -> int:
    """count_wrong, with a fast path for the usual bit-exact match."""
    if tolerance == 0 and got.shape == expected.shape:
        bits = f"uint{dt.bits}"
        if np.array_equal(got.view(bits), expected.view(bits)):
            return 0
    return count_wrong(got, expected, dt, tolerance)


@dataclass
class _Live:
    """A candidate's communicator and what it did so far in one collective."""

    cand: Candidate
    index: int
    comm: Any = None
    last_us: float | None = None
    runs: int = 0


@dataclass
class Outcome:
    status: str  # ok, pruned, wrong, error
    time_us: float | None = None
    replays: int = 0
    message: str = ""

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"status": self.status, "time_us": self.time_us, "replays": self.replays}
        if self.message:
            doc["message"] = self.message
        return doc


class _Failed(Exception):
    """A candidate failed on some rank (every rank raises it together)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def bench_options(cfg: TuneOptions, collective: str) -> Options:
    """The benchmark's options for the worker machinery (buffers, data, the bookkeeping link)."""
    argv = [
        collective,
        "-b",
        str(cfg.min_bytes),
        "-e",
        str(cfg.max_bytes),
        "-f",
        str(cfg.step_factor),
        "-d",
        cfg.dtype.name,
        "-n",
        str(cfg.calls_per_graph),
        "-w",
        "1",
        # Host exchanges wait while other ranks wait on the GPU (up to --timeout) or build references.
        "-T",
        str(3 * cfg.timeout + 120),
        "--alloc",
        cfg.alloc,
    ]
    if cfg.stock and cfg.stock_lib:
        argv += ["--lib", cfg.stock_lib]
    return bench_parse_args(argv)


class TuneWorker(Worker):
    """One rank of a tuning run: one communicator per candidate, measured size by size."""

    def __init__(self, cfg: TuneOptions, where: RankInfo, cupy: Any = None, nccl: Any = None) -> None:
        self.cfg = cfg
        self.base_opts = bench_options(cfg, cfg.collectives[0])
        self.lives: list[_Live] = []
        super().__init__(self.base_opts, where, cupy, nccl)
        self.watchdog.on_fire = self.abort_all
        self.doc: dict[str, Any] = {}
        self.start = time.monotonic()

    # --- communicators ------------------------------------------------------------------------------
    def _abort(self) -> None:
        comm, self.comm = self.comm, None
        for live in self.lives:
            if live.comm is comm:
                live.comm = None
        if comm is not None:
            with contextlib.suppress(Exception):
                self.lib.ncclCommAbort(comm)

    def abort_all(self) -> None:
        self.comm = None
        for live in self.lives:
            comm, live.comm = live.comm, None
            if comm is not None:
                with contextlib.suppress(Exception):
                    self.lib.ncclCommAbort(comm)

    def agree(self, error: str | None, value: Any = None) -> list[Any]:
        """Every rank's value; raises _Failed on every rank when any rank had an error."""
        got = self.group.allgather([error, value])
        for r, (e, _) in enumerate(got):
            if e:
                raise _Failed("error", f"rank {r}: {e}")
        return [v for _, v in got]

    def attempt(self, fn: Callable[[], Any]) -> str | None:
        """fn's failure as text (None when it worked); host bookkeeping failures stay fatal."""
        try:
            fn()
        except HostGroupError:
            raise
        except Exception as e:
            return f"{type(e).__name__}: {e}" if not isinstance(e, BenchError) else str(e)
        return None

    def create_comm(self, cand: Candidate) -> tuple[Any, str | None]:
        """A communicator forced to `cand` (ours) or plain (stock); (None, why) when init failed."""
        from .binding import unique_id_to_hex

        uid = unique_id_to_hex(self.nccl.get_unique_id()) if self.rank == 0 else None
        uid = self.group.allgather(uid)[0]
        comm = None

        def init() -> None:
            nonlocal comm
            with _ENV_LOCK:
                saved = os.environ.get(ALGO_ENV)
                try:
                    if cand.item is None:
                        os.environ.pop(ALGO_ENV, None)
                    else:
                        os.environ[ALGO_ENV] = cand.item
                    comm = self.nccl.comm_init_rank(self.nranks, uid, self.rank, None)
                finally:
                    if saved is None:
                        os.environ.pop(ALGO_ENV, None)
                    else:
                        os.environ[ALGO_ENV] = saved

        with self.watchdog.phase(self.cfg.timeout * 2 + 60, f"ncclCommInitRank for {cand.spec}"):
            err = self.attempt(init)
        try:
            self.agree(err)
        except _Failed as e:
            if comm is not None:
                with contextlib.suppress(Exception):
                    self.lib.ncclCommAbort(comm)
            return None, e.message
        return comm, None

    def destroy(self, live: _Live) -> None:
        comm, live.comm = live.comm, None
        if comm is None:
            return
        with self.watchdog.phase(self.cfg.timeout + 60, f"destroying the communicator of {live.cand.spec}"):
            err = self.attempt(lambda: self.nccl.check(self.lib.ncclCommFinalize(comm), comm))
            if err is None:
                err = self.attempt(lambda: self.nccl.check(self.lib.ncclCommDestroy(comm)))
            else:
                with contextlib.suppress(Exception):
                    self.lib.ncclCommAbort(comm)
        if err:
            _say(f"rank {self.rank}: warning: {live.cand.spec}: {err}")

    # --- the stream ---------------------------------------------------------------------------------
    def bounded_wait(self) -> str | None:
        """Waits for the stream; the failure as text (async error, or not done within --timeout)."""
        start = time.monotonic()
        err = self.ffi.new("ncclResult_t*")
        poll = self.comm is not None
        while not self.stream.done:
            if poll:
                if self.lib.ncclCommGetAsyncError(self.comm, err) != 0:
                    poll = False
                elif err[0] not in (0, 7):
                    code = int(err[0])
                    return f"asynchronous error {code}: {self.nccl.error_string(code)}"
            if time.monotonic() - start > self.cfg.timeout:
                return f"not done after {self.cfg.timeout:g} s (-T)"
            os.sched_yield()
        return None

    def drain(self, what: str) -> None:
        """After an abort: the stream must empty, or nothing else can run on it."""
        start = time.monotonic()
        while not self.stream.done:
            if time.monotonic() - start > self.cfg.timeout:
                raise BenchError(f"{what}: the stream did not drain after aborting the communicator")
            time.sleep(0.001)

    def check_result(
        self, lay: Layout, dt: DType, expected: np.ndarray | None, tolerance: int, what: str
    ) -> int:
        if expected is None:
            return 0
        assert self.recv is not None
        got = self.read(self.recv.ptr, lay.recvcount, dt)
        wrong = count_mismatches(got, expected, dt, tolerance)
        if wrong:
            _say(f"rank {self.rank}: {what}: {wrong} of {got.size} elements wrong")
        return wrong

    # --- one candidate at one size ------------------------------------------------------------------
    def measure(
        self,
        live: _Live,
        lay: Layout,
        dt: DType,
        expected: np.ndarray | None,
        tolerance: int,
        best_us: float | None,
        what: str,
    ) -> Outcome:
        self.comm = live.comm
        try:
            with self.watchdog.phase(self.cfg.timeout * 8 + 120, what):
                return self._measure(live, lay, dt, expected, tolerance, best_us, what)
        except _Failed as e:
            if e.status == "error":
                self._abort()
                self.drain(what)
            return Outcome(e.status, message=e.message)
        finally:
            live.runs += 1
            self.comm = None

    def _launch_and_wait(self, launch: Callable[[], None], settle: bool = True) -> float:
        """Runs launch() after a barrier and waits for the stream; the slowest rank's seconds. With settle,
        the ranks first agree that every one of them enqueued its work, so that one rank's refusal is seen
        at once rather than after the others' kernels time out waiting for it."""
        self.group.barrier()
        t0 = _clock()
        err = self.attempt(launch)
        if settle:
            self.agree(err)
        if err is None:
            err = self.bounded_wait()
        return float(max(self.agree(err, _clock() - t0)))

    def _run_checked(
        self, launch: Callable[[], None], lay: Layout, dt: DType, expected: Any, tol: int, what: str
    ) -> float:
        """Zero the output, run launch(), check the output on every rank; the slowest rank's seconds."""
        assert self.recv is not None
        self.memset(self.recv.ptr, lay.size)
        self.wait(f"{what}: clearing the output")
        seconds = self._launch_and_wait(launch)
        wrong = self.check_result(lay, dt, expected, tol, what)
        wrongs = self.agree(None, wrong)
        if any(wrongs):
            bad = [f"rank {r}: {n}" for r, n in enumerate(wrongs) if n]
            raise _Failed("wrong", f"wrong results ({', '.join(bad)} elements)")
        return seconds

    def _capture(self, issue: Callable[[], Any]) -> Any:
        """A graph of what issue() enqueues, on every rank or (raising _Failed) on none."""
        graphs: list[Any] = []
        err = self.attempt(lambda: graphs.append(self.capture(issue, "streamCaptureModeThreadLocal")))
        self.agree(err)
        return graphs[0]

    def _measure(
        self,
        live: _Live,
        lay: Layout,
        dt: DType,
        expected: Any,
        tol: int,
        best_us: float | None,
        what: str,
    ) -> Outcome:
        cfg = self.cfg
        calls = cfg.calls_per_graph
        op = "sum" if self.opts.collective in REDUCING else None
        issue = self.make_issuer(lay, dt, op, ROOT, False, calls)

        # 1. Verify: an eager call, then a replayed graph of one call.
        eager = self._run_checked(lambda: issue.single(0), lay, dt, expected, tol, f"{what} (eager)")
        one = self._capture(lambda: issue.single(0))
        replayed = self._run_checked(
            lambda: one.launch(self.stream), lay, dt, expected, tol, f"{what} (graph)"
        )
        # Both single calls far slower than the best: it cannot win (one slow call may be a hiccup of the
        # host; a candidate's first size may include loading its kernels, so it is always timed).
        single = min(eager, replayed)
        if live.runs > 0 and should_prune(single, best_us):
            return Outcome("pruned", single * 1e6, 0)

        # 2. Time: a graph of `calls` back-to-back calls, one warm-up replay, then the timed replays.
        graph = self._capture(lambda: [issue.timed(i) for i in range(calls)])
        warm = self._launch_and_wait(lambda: graph.launch(self.stream))
        if should_prune(warm / calls, best_us):
            return Outcome("pruned", warm / calls * 1e6, 0)
        replays = replays_for(warm, cfg.replays, cfg.time_per_point)

        def replay() -> None:
            for _ in range(replays):
                graph.launch(self.stream)

        # Host wall time around the replays; no exchange between ranks inside it.
        elapsed = self._launch_and_wait(replay, settle=False)
        return Outcome("ok", elapsed / (replays * calls) * 1e6, replays)

    # --- the run ------------------------------------------------------------------------------------
    def gpu_facts(self) -> dict[str, Any]:
        line = self.device_line()
        props = self.cp.cuda.runtime.getDeviceProperties(self.device)
        line["sm_count"] = int(props.get("multiProcessorCount", 0))
        return line

    def say0(self, text: str) -> None:
        if self.rank == 0:
            print(text, flush=True)

    def write_results(self) -> None:
        if self.rank == 0 and self.cfg.results:
            _write_atomic(self.cfg.results, json.dumps(self.doc, indent=1) + "\n")

    def run(self) -> None:
        cfg = self.cfg
        dt = cfg.dtype
        devices = self.group.allgather(self.gpu_facts())
        names = sorted({d["device_info"] for d in devices})
        if len(names) > 1:
            self.say0(
                f"# warning: the ranks see different GPUs ({', '.join(names)}); the table names rank 0's"
            )
        gpu = devices[0]["device_info"]
        per_device = collections.Counter((d["hostname"], d["device_hex"], d["visible"]) for d in devices)
        rpg = cfg.ranks_per_gpu or max(per_device.values())
        max_blocks = min(block_cap(d["sm_count"], rpg) for d in devices)
        sizes = cfg.sizes()
        plan = []
        for coll in cfg.collectives:
            cands = candidates_for(cfg, coll, max_blocks)
            points = tuned_points(coll, sizes, dt.size, self.nranks)
            plan.append((coll, cands, points))
        estimate_plan = [(len(c), [lay.size for _, lay in p]) for _, c, p in plan]
        total_estimate = estimate_run_seconds(
            estimate_plan, cfg.calls_per_graph, cfg.replays, cfg.time_per_point
        )
        self.doc = {
            "format": RAW_FORMAT,
            "version": RAW_VERSION,
            "library": self.nccl.path,
            "nccl_version": self.version,
            "stock": cfg.stock,
            "gpu": gpu,
            "nranks": self.nranks,
            "ranks_per_gpu": rpg,
            "max_blocks": max_blocks,
            "dtype": dt.name,
            "dtype_bytes": dt.size,
            "calls_per_graph": cfg.calls_per_graph,
            "replays": cfg.replays,
            "time_per_point": cfg.time_per_point,
            "alloc": cfg.alloc,
            "start_time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "collectives": [],
        }
        what_lib = f"stock NCCL {self.version} ({self.nccl.path})" if cfg.stock else f"{self.nccl.path}"
        self.say0(
            f"# mscclpp_nccl.tune: {self.nranks} ranks ({rpg} per GPU) on {gpu}, {dt.name}, {what_lib};"
            f" grid cap {max_blocks} blocks; {cfg.calls_per_graph} calls per graph,"
            f" up to {cfg.replays} replays"
        )
        npoints = sum(len(p) for _, _, p in plan)
        nmeasure = sum(len(c) * len(p) for _, c, p in plan)
        self.say0(
            f"# {len(plan)} collective(s), {npoints} sizes, {nmeasure} measurements:"
            f" estimated {format_duration(total_estimate)} (rough; refined as sizes finish)"
        )
        self.alloc()
        done_estimate = 0.0
        for coll, cands, points in plan:
            done_estimate = self.tune_collective(coll, cands, points, total_estimate, done_estimate)
        self.doc["end_time"] = time.strftime("%Y-%m-%d %H:%M:%S")
        self.doc["seconds"] = round(time.monotonic() - self.start, 3)
        self.write_results()
        self.say0(f"# done in {format_duration(time.monotonic() - self.start)}")

    def tune_collective(
        self,
        coll: str,
        cands: list[Candidate],
        points: list[tuple[int, Layout]],
        total_estimate: float,
        done_estimate: float,
    ) -> float:
        cfg = self.cfg
        dt = cfg.dtype
        self.opts = dataclasses.replace(self.base_opts, collective=coll)
        coll_doc: dict[str, Any] = {
            "collective": coll,
            "candidates": [c.to_doc() for c in cands],
            "excluded": {},
            "points": [],
            "complete": False,
        }
        self.doc["collectives"].append(coll_doc)
        excluded: dict[str, str] = coll_doc["excluded"]
        self.say0(
            f"## {coll}: {len(cands)} candidates ({', '.join(c.label for c in cands)}), {len(points)} sizes"
        )
        self.lives = [_Live(c, i) for i, c in enumerate(cands)]
        for live in self.lives:
            live.comm, err = self.create_comm(live.cand)
            if err:
                excluded[live.cand.spec] = f"communicator init failed: {err}"
                self.say0(f"# {coll}: excluded {live.cand.label}: {excluded[live.cand.spec]}")
        done_estimate += len(cands) * EST_COMM_INIT_S
        kind = data_kind(coll, "sum")
        coll_index = COLLECTIVES.index(coll)
        for pi, (size, lay) in enumerate(points):
            nbytes = lay.count * dt.size
            seed = _key(0x7E, coll_index, size)
            with self.watchdog.phase(cfg.timeout * 4 + 600, f"{coll} {size} B: preparing data"):
                self.init_data(lay, dt, kind, ROOT, False, seed)
                expected, tol = reference(coll, dt, kind, self.nranks, self.rank, ROOT, lay, seed)
            outcomes: dict[str, Outcome] = {}
            # The fastest so far first, so that slow candidates can be cut short.
            order = sorted(
                (lv for lv in self.lives if lv.cand.spec not in excluded and lv.comm is not None),
                key=lambda lv: (lv.last_us is None, lv.last_us or 0.0, lv.index),
            )
            best_us: float | None = None
            for live in order:
                what = f"{coll} {size} B {live.cand.label}"
                out = self.measure(live, lay, dt, expected, tol, best_us, what)
                outcomes[live.cand.spec] = out
                if out.status == "ok":
                    live.last_us = out.time_us
                    if best_us is None or (out.time_us is not None and out.time_us < best_us):
                        best_us = out.time_us
                elif out.status == "pruned":
                    live.last_us = out.time_us
                else:
                    excluded[live.cand.spec] = f"{out.status} at {size} B: {out.message}"
                    self.say0(f"# {coll}: excluded {live.cand.label}: {excluded[live.cand.spec]}")
            del expected
            point = {
                "size": size,
                "bytes": nbytes,
                "count": lay.count,
                "results": {spec: o.to_doc() for spec, o in outcomes.items()},
            }
            coll_doc["points"].append(point)
            done_estimate += estimate_point_seconds(
                lay.size, len(cands), cfg.calls_per_graph, cfg.replays, cfg.time_per_point
            )
            if self.rank == 0:
                elapsed = time.monotonic() - self.start
                eta = remaining_estimate(total_estimate, done_estimate, elapsed)
                times = point_times(point)
                spec = pick_winner(times, [lv.cand.spec for lv in self.lives], set(excluded))
                by_spec = {lv.cand.spec: lv.cand for lv in self.lives}
                winner = (by_spec[spec].label, times[spec]) if spec is not None else None
                cells = [
                    (lv.cand.label, outcomes[lv.cand.spec].status, outcomes[lv.cand.spec].time_us)
                    for lv in self.lives
                    if lv.cand.spec in outcomes
                ]
                line = format_point_line(coll, size, nbytes, cells, winner, pi + 1, len(points), elapsed, eta)
                print(line, flush=True)
        for live in self.lives:
            self.destroy(live)
        self.lives = []
        coll_doc["complete"] = True
        self.write_results()
        return done_estimate

    def finish(self) -> None:
        self.comm = None
        self.teardown()


def worker_main(cfg: TuneOptions, where: RankInfo | None = None, cupy: Any = None, nccl: Any = None) -> int:
    """One rank. 0: done; 3: an error stopped the run (collectives finished before it are in the results)."""
    rank = where.rank if where is not None else int(os.environ.get("MSCCLPP_NCCL_RANK", "0"))
    w: TuneWorker | None = None
    try:
        w = TuneWorker(cfg, where or RankInfo.from_env(), cupy, nccl)
        w.run()
        w.finish()
        return 0
    except Exception as e:
        message = str(e) if isinstance(e, BenchError) else f"{type(e).__name__}: {e}"
        _say(f"rank {rank}: error: {message}")
        if w is not None:
            if rank == 0 and w.doc:
                w.doc["error"] = message
                with contextlib.suppress(Exception):
                    w.write_results()
            w.abort_all()
            w.group.close()
        return 3


# --- the command ---------------------------------------------------------------------------------------


def load_raw(path: str) -> dict[str, Any]:
    with open(path) as f:
        raw = json.load(f)
    if not isinstance(raw, dict) or raw.get("format") != RAW_FORMAT or "ours" not in raw:
        raise ValueError(f"{path} is not a {RAW_FORMAT} file")
    return raw


def make_raw(ours: dict[str, Any] | None, stock: dict[str, Any] | None) -> dict[str, Any]:
    return {"format": RAW_FORMAT, "version": RAW_VERSION, "ours": ours, "stock": stock}


def _read_run(path: str) -> dict[str, Any] | None:
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _launch_workers(
    cfg: TuneOptions,
    argv: Sequence[str],
    nranks: int,
    rpg: int,
    mps: bool,
    env: dict[str, str],
    results: str,
    stock: bool,
) -> int:
    from .run import launch

    cmd = [sys.executable, "-m", "mscclpp_nccl.tune", *argv, "--worker", "--results", results]
    cmd += ["--ranks-per-gpu", str(rpg)]
    if stock:
        assert cfg.stock_lib is not None
        cmd += ["--stock", "--stock-lib", os.path.abspath(cfg.stock_lib)]
    return launch(nranks, cmd, mps=mps, timeout=cfg.run_timeout, prefix=False, unique_id=False, env=env)


def run_tuning(cfg: TuneOptions, argv: Sequence[str]) -> tuple[int, dict[str, Any] | None]:
    """Runs the workers (ours, then stock with --stock-lib); (exit code, raw results or None)."""
    import importlib.util

    from .run import assign_gpus, visible_gpus

    prog = "python -m mscclpp_nccl.tune"
    gpus = visible_gpus()
    if not gpus:
        print(f"{prog}: no NVIDIA GPU visible; nothing to tune", file=sys.stderr)
        return 2, None
    if importlib.util.find_spec("cupy") is None:
        print(f"{prog}: CuPy is not installed (pip install cupy-cuda13x)", file=sys.stderr)
        return 2, None
    if cfg.stock_lib and not os.path.isfile(cfg.stock_lib):
        print(f"{prog}: --stock-lib {cfg.stock_lib}: no such file", file=sys.stderr)
        return 2, None
    nranks = cfg.ranks if cfg.ranks is not None else default_ranks(len(gpus))
    placement = assign_gpus(nranks, gpus)
    rpg = max(collections.Counter(placement).values())
    mps = cfg.mps if cfg.mps is not None else nranks > len(gpus)
    env = dict(os.environ)
    # A kernel or a bootstrap waiting on a failed peer must give up in seconds, not minutes.
    env.setdefault("MSCCLPP_NCCL_WAIT_TIMEOUT", str(int(cfg.timeout)))
    env.setdefault("MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT", str(int(cfg.timeout)))
    env.pop(ALGO_ENV, None)  # each candidate's communicator sets its own
    print(
        f"# tuning {', '.join(cfg.collectives)}: {nranks} ranks on {len(gpus)} GPU(s), {rpg} per GPU"
        f"{', under MPS' if mps else ''}; sizes {cfg.min_bytes}..{cfg.max_bytes} B x{cfg.step_factor},"
        f" {cfg.dtype.name}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="mscclpp-nccl-tune-") as tmp:
        ours_path = os.path.join(tmp, "ours.json")
        rc = _launch_workers(cfg, argv, nranks, rpg, mps, env, ours_path, stock=False)
        ours = _read_run(ours_path)
        if rc != 0:
            print(f"# error: the tuning run failed (exit {rc})", flush=True)
        stock = None
        if cfg.stock_lib and ours is not None:
            opts = SimpleNamespace(ranks=nranks, mps=mps, lib=cfg.stock_lib)
            _, _, extra, notes = launch_plan(opts, len(gpus), env)  # type: ignore[arg-type]
            for note in notes:
                print(f"# note: {note}", flush=True)
            print(f"# timing stock NCCL {cfg.stock_lib} the same way", flush=True)
            stock_path = os.path.join(tmp, "stock.json")
            code = _launch_workers(cfg, argv, nranks, rpg, mps, {**env, **extra}, stock_path, stock=True)
            stock = _read_run(stock_path)
            if code != 0:
                print(
                    f"# warning: the stock NCCL run failed (exit {code}); plotting what it measured",
                    flush=True,
                )
    if ours is None:
        return rc or 3, None
    return rc, make_raw(ours, stock)


def finish(cfg: TuneOptions, raw: dict[str, Any], rc: int) -> int:
    """Writes the raw file, the merged table and the plot from a run's results; the exit code."""
    if cfg.raw:
        _write_atomic(cfg.raw, json.dumps(raw, indent=1) + "\n")
        print(f"# wrote the measurements to {cfg.raw}", flush=True)
    ours = raw.get("ours")
    entries, notes = build_entries(ours) if ours else ([], ["no results"])
    for note in notes:
        print(f"# note: {note}", flush=True)
    if entries:
        existing = None
        if os.path.exists(cfg.out):
            try:
                existing = load_table(cfg.out)
            except (TableError, OSError) as e:
                print(f"python -m mscclpp_nccl.tune: cannot merge into {cfg.out}: {e}", file=sys.stderr)
                return 2
        table = merge_tables(existing, entries)
        write_table(cfg.out, table)
        for e in entries:
            print("\n".join(f"# {line}" for line in format_rules(e)), flush=True)
        verb = "merged into" if existing else "wrote"
        print(f"# {verb} {cfg.out}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}", flush=True)
    else:
        print("# no table entry to write", flush=True)
        rc = rc or 1
    if cfg.plot:
        plot_results(raw, cfg.plot)
    return rc


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        cfg = parse_args(argv)
    except UsageError as e:
        build_parser().print_usage(sys.stderr)
        print(f"python -m mscclpp_nccl.tune: error: {e}", file=sys.stderr)
        return 2
    if cfg.worker:
        code = worker_main(cfg)
        _exit(code)  # skip interpreter teardown: nothing may hang after the last line
        return code
    if cfg.from_raw:
        try:
            raw = load_raw(cfg.from_raw)
        except (OSError, ValueError) as e:
            print(f"python -m mscclpp_nccl.tune: --from-raw: {e}", file=sys.stderr)
            return 2
        return finish(cfg, raw, 0)
    try:
        rc, raw = run_tuning(cfg, argv)
    except KeyboardInterrupt:
        return 130
    except (RuntimeError, ValueError) as e:
        print(f"python -m mscclpp_nccl.tune: error: {e}", file=sys.stderr)
        return 2
    if raw is None:
        return rc or 3
    return finish(cfg, raw, rc)


if __name__ == "__main__":
    sys.exit(main())
