"""Which algorithm the library runs for a call, and why: the selector of
native/algorithms/algorithm_selector.cc (AlgorithmSelector::plan for buffers outside windows) mirrored in
Python, for `python -m mscclpp_nccl info --table`, which has no GPU and no communicator to ask.
tests/test_selection.py checks it against the C++ selector itself (tests/selector_driver.cc) over the
shipped table and the built-in rules.

What it leaves out: launch grids that the library derives at init (the co-resident share of SMs, scratch
slots), so a shape is the table's blocks/threads/chunk_bytes or "default"; MSCCLPP_NCCL_ALGO (forced,
for experiments); buffers in symmetric windows (zero-copy all-reduce from 1 MB, whatever the table says).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .bench.collectives import COLLECTIVES

KIB = 1 << 10
MIB = 1 << 20
# native/algorithms/algorithm_selector.cc's thresholds.
ONE_SHOT_MAX_BYTES = 64 * KIB  # kOneShotMaxBytes
TWO_SHOT_PACKET_MAX_BYTES = MIB  # kTwoShotPacketMaxBytes
EXCHANGE_PACKET_MAX_BYTES = 512 * KIB  # kExchangePacketMaxBytes
REDUCE_TWO_SHOT_MIN_RANKS = 8  # kReduceTwoShotMinRanks
REDUCE_TWO_SHOT_MIN_BYTES = 256 * KIB  # kReduceTwoShotMinBytes
P2P_PACKET_MAX_BYTES = 512 * KIB  # kP2pPacketMaxBytes
ZERO_COPY_MIN_BYTES = MIB  # kZeroCopyMinBytes: all_reduce outside windows maps from here
EXCHANGE_ZERO_COPY_MIN_BYTES = 256 * KIB  # kExchangeZeroCopyMinBytes
EXCHANGE_ZERO_COPY_MIN_TRAFFIC = 16 * MIB  # kExchangeZeroCopyMinTraffic
EXCHANGE_ZERO_COPY_MIN_TRAFFIC_MANY_RANKS = 8 * MIB  # kExchangeZeroCopyMinTrafficManyRanks (4+ ranks)
ROOTED_COPY_LOW_TRAFFIC_MIN_RANKS = 8  # kRootedCopyLowTrafficMinRanks
ROOTED_COPY_ZERO_COPY_MIN_TRAFFIC = 4 * MIB  # kRootedCopyZeroCopyMinTraffic (gather, scatter)
MAX_CHUNK_RANKS = 64  # kMaxChunkRanks (native/primitives/chunk_layout.h)
MAX_ZERO_COPY_RANKS = 64  # kMaxZeroCopyRanks (zero_copy.h)
MAX_PACKET_RANKS = 1 << 16

EXCHANGE_COLLECTIVES: tuple[str, ...] = tuple(c for c in COLLECTIVES if c not in ("all_reduce", "sendrecv"))
ROOTED = ("broadcast", "reduce", "gather", "scatter")  # isRooted (exchange.h)


@dataclass(frozen=True)
class AlgorithmInfo:
    """An algorithm of native/algorithms/registry.cc, as far as choosing goes."""

    name: str
    protocol: str  # packet, chunked or direct
    collectives: tuple[str, ...]
    max_ranks: int
    needs_windows: bool = False

    def accepts(self, collective: str, nranks: int, registered: bool = False) -> bool:
        return (
            collective in self.collectives
            and nranks <= self.max_ranks
            and (registered or not self.needs_windows)
        )


REGISTRY = {
    a.name: a
    for a in (
        AlgorithmInfo("allreduce_one_shot_packet", "packet", ("all_reduce",), MAX_PACKET_RANKS),
        AlgorithmInfo("allreduce_two_shot_packet", "packet", ("all_reduce",), MAX_PACKET_RANKS),
        AlgorithmInfo("allreduce_two_shot_chunked", "chunked", ("all_reduce",), MAX_CHUNK_RANKS),
        AlgorithmInfo("exchange_packet", "packet", EXCHANGE_COLLECTIVES, MAX_PACKET_RANKS),
        AlgorithmInfo("exchange_chunked", "chunked", EXCHANGE_COLLECTIVES, MAX_CHUNK_RANKS),
        AlgorithmInfo("p2p_packet", "packet", ("sendrecv",), MAX_PACKET_RANKS),
        AlgorithmInfo("allreduce_zero_copy", "direct", ("all_reduce",), MAX_ZERO_COPY_RANKS, True),
        AlgorithmInfo("p2p_chunked", "chunked", ("sendrecv",), MAX_CHUNK_RANKS),
        AlgorithmInfo("reduce_two_shot_packet", "packet", ("reduce",), MAX_PACKET_RANKS),
    )
}


def reduce_spreads(collective: str, nranks: int, nbytes: int) -> bool:
    """Whether a reduce takes the two-shot packet schedule by rule: the root would reduce too much alone."""
    return (
        collective == "reduce"
        and nranks >= REDUCE_TWO_SHOT_MIN_RANKS
        and REDUCE_TWO_SHOT_MIN_BYTES <= nbytes <= TWO_SHOT_PACKET_MAX_BYTES
    )


def builtin_algorithm(collective: str, nranks: int, nbytes: int) -> str:
    """The built-in rules (AlgorithmSelector::choose after the table): the algorithm for `nbytes` (an
    all-reduce's message, an exchange's range per rank, a transfer's size)."""
    if collective == "all_reduce":
        if nbytes <= ONE_SHOT_MAX_BYTES or nranks == 1:
            name = "allreduce_one_shot_packet"
        elif nbytes <= TWO_SHOT_PACKET_MAX_BYTES:
            name = "allreduce_two_shot_packet"
        else:
            name = "allreduce_two_shot_chunked"
    elif collective == "sendrecv":
        name = "p2p_packet" if nbytes <= P2P_PACKET_MAX_BYTES else "p2p_chunked"
    elif reduce_spreads(collective, nranks, nbytes):
        name = "reduce_two_shot_packet"
    else:
        name = "exchange_packet" if nbytes <= EXCHANGE_PACKET_MAX_BYTES else "exchange_chunked"
    if not REGISTRY[name].accepts(collective, nranks):
        name = {"all_reduce": "allreduce_two_shot_packet", "sendrecv": "p2p_packet"}.get(
            collective, "exchange_packet"
        )
    return name


def _chunked_fallback(collective: str) -> str:
    return "allreduce_two_shot_chunked" if collective == "all_reduce" else "exchange_chunked"


def exchange_zero_copy_min_traffic(collective: str, nranks: int) -> int:
    """Bytes an exchange must move over all ranks to map (exchangeZeroCopyMinTraffic)."""
    if collective in ("gather", "scatter") and nranks >= ROOTED_COPY_LOW_TRAFFIC_MIN_RANKS:
        return ROOTED_COPY_ZERO_COPY_MIN_TRAFFIC
    return EXCHANGE_ZERO_COPY_MIN_TRAFFIC_MANY_RANKS if nranks >= 4 else EXCHANGE_ZERO_COPY_MIN_TRAFFIC


def maps_buffers(collective: str, nranks: int, nbytes: int) -> bool:
    """Whether a call outside windows takes the mapped zero-copy kernel (AlgorithmSelector::mapsBuffers,
    with the library's default MSCCLPP_NCCL_ZERO_COPY=1 and no PreMulSum): it reads and writes the peers'
    buffers once every peer has mapped their allocations, and runs the chunked schedule until then."""
    all_reduce = collective == "all_reduce"
    if collective == "sendrecv" or nbytes < (
        ZERO_COPY_MIN_BYTES if all_reduce else EXCHANGE_ZERO_COPY_MIN_BYTES
    ):
        return False
    if not all_reduce:
        traffic = nbytes * nranks * (1 if collective in ROOTED else nranks)
        if traffic < exchange_zero_copy_min_traffic(collective, nranks):
            return False
    if nranks > MAX_ZERO_COPY_RANKS:
        return False
    return REGISTRY[_chunked_fallback(collective)].accepts(collective, nranks)


@dataclass(frozen=True)
class Layout:
    """A communicator as the table keys it."""

    gpu: str
    nranks: int
    ranks_per_gpu: int
    arch: str = ""  # "sm_90"; "" = unknown (no entry stands in)


@dataclass(frozen=True)
class Plan:
    """What runs for one call: the algorithm, its shape where the table gives one, and where it came from.
    mapped: the call runs the mapped zero-copy kernel, `algorithm` being the chunked schedule it runs
    where some rank's buffers are not mapped yet."""

    algorithm: str
    source: str  # "table" or "rules"
    shape: dict[str, int] = field(default_factory=dict)  # blocks, threads, chunk_bytes from the table
    mapped: bool = False

    def describe(self) -> str:
        shape = ", ".join(f"{k} {v}" for k, v in self.shape.items()) or "default grid"
        text = f"{self.algorithm} ({shape})"
        if self.mapped:
            text = f"zero-copy on mapped buffers, else {text}"
        return f"{text} [{self.source}]"


def _entry_matches(entry: dict[str, Any], layout: Layout, stand_in: bool) -> bool:
    """stand_in: no entry names this GPU, so those of its architecture answer for it."""
    same_arch = stand_in and bool(layout.arch) and entry.get("arch") == layout.arch
    return (
        (entry["gpu"] in ("*", layout.gpu) or same_arch)
        and entry["nranks"] in ("*", layout.nranks)
        and entry["ranks_per_gpu"] in ("*", layout.ranks_per_gpu)
    )


def _specificity(entry: dict[str, Any]) -> int:
    keys = ("gpu", "nranks", "ranks_per_gpu", "dtype_bytes")
    return sum(entry.get(k, "*") != "*" for k in keys)


def names_gpu(table: dict[str, Any], gpu: str) -> bool:
    """Whether an entry names this GPU; where none does, entries of its architecture stand in
    (TuningTable::namesGpu)."""
    return any(e["gpu"] == gpu for e in table.get("entries", []))


def applicable_entries(table: dict[str, Any] | None, layout: Layout) -> list[dict[str, Any]]:
    """The table's entries that can answer for this communicator, in lookup order (most specific first,
    file order among equals), as TuningTable::filtered keeps them: where no entry names the GPU, those
    that name another of its architecture stand in."""
    if not table:
        return []
    stand_in = not names_gpu(table, layout.gpu)
    entries = [e for e in table.get("entries", []) if _entry_matches(e, layout, stand_in)]
    return sorted(entries, key=_specificity, reverse=True)  # stable: file order among equals


def table_rule(
    entries: Sequence[dict[str, Any]], collective: str, dtype_bytes: int, nbytes: int
) -> dict[str, Any] | None:
    """The first rule covering `nbytes` in the first entry for this collective and element size that has
    one (TuningTable::find)."""
    for entry in entries:
        if entry["collective"] != collective or entry.get("dtype_bytes", "*") not in ("*", dtype_bytes):
            continue
        for rule in entry["rules"]:
            if rule["max_bytes"] is None or rule["max_bytes"] >= nbytes:
                return rule
    return None


def choose(
    entries: Sequence[dict[str, Any]], layout: Layout, collective: str, dtype_bytes: int, nbytes: int
) -> Plan:
    """AlgorithmSelector::choose for buffers outside windows: the table's rule when it names an algorithm
    that can run here, else the built-in rules."""
    rule = table_rule(entries, collective, dtype_bytes, nbytes)
    if rule is not None:
        info = REGISTRY.get(rule["algorithm"])
        if info is not None and info.accepts(collective, layout.nranks):
            shape = {k: int(rule[k]) for k in ("blocks", "threads", "chunk_bytes") if k in rule}
            return Plan(info.name, "table", shape)
    return Plan(builtin_algorithm(collective, layout.nranks, nbytes), "rules")


def plan(
    entries: Sequence[dict[str, Any]], layout: Layout, collective: str, dtype_bytes: int, nbytes: int
) -> Plan:
    """AlgorithmSelector::plan for buffers outside windows."""
    chosen = choose(entries, layout, collective, dtype_bytes, nbytes)
    if not maps_buffers(collective, layout.nranks, nbytes):
        return chosen
    if REGISTRY[chosen.algorithm].protocol == "chunked":
        return Plan(chosen.algorithm, chosen.source, chosen.shape, mapped=True)
    return Plan(_chunked_fallback(collective), "rules", mapped=True)


# --- the table in use ------------------------------------------------------------------------------------


def shipped_table_path() -> Path:
    return Path(__file__).resolve().parent / "tuning" / "default.json"


def table_in_use(env: dict[str, str] | None = None) -> tuple[Path | None, str]:
    """The table the library would read (MSCCLPP_NCCL_TUNING_FILE, else the shipped one) and a note on it."""
    e = os.environ if env is None else env
    chosen = e.get("MSCCLPP_NCCL_TUNING_FILE", "")
    if chosen:
        path = Path(chosen)
        if not path.is_file():
            return (
                None,
                f"MSCCLPP_NCCL_TUNING_FILE={chosen} does not exist: the built-in rules choose everything",
            )
        return path, f"MSCCLPP_NCCL_TUNING_FILE={chosen}"
    path = shipped_table_path()
    if not path.is_file():
        return None, "no table shipped with the package: the built-in rules choose everything"
    return path, f"the shipped table {path}"


def load_table_file(path: Path) -> dict[str, Any]:
    """A table, validated as the tuner validates it (ValueError naming the problem otherwise)."""
    from .tune.table import load_table

    return load_table(str(path))


def sizes(min_bytes: int = 8, max_bytes: int = 256 * MIB) -> list[int]:
    """Powers of two from min_bytes to max_bytes."""
    out, size = [], max(1, min_bytes)
    while size <= max_bytes:
        out.append(size)
        size *= 2
    return out


def human(nbytes: int) -> str:
    for unit, scale in (("G", 1 << 30), ("M", MIB), ("K", KIB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return str(nbytes)


def table_lines(
    layout: Layout,
    dtype_bytes: int,
    collectives: Sequence[str] = COLLECTIVES,
    size_list: Sequence[int] | None = None,
    env: dict[str, str] | None = None,
) -> list[str]:
    """The lines of `info --table`: the table in use and how much of it applies, then per collective the
    size ranges that run each plan."""
    path, note = table_in_use(env)
    table = None
    lines = [f"table:     {note}"]
    if path is not None:
        try:
            table = load_table_file(path)
        except (OSError, ValueError) as e:
            lines.append(
                f"           the library would ignore it ({e}): the built-in rules choose everything"
            )
    entries = applicable_entries(table, layout)
    total = len(table["entries"]) if table else 0
    where = f"{layout.gpu}, {layout.nranks} ranks, {layout.ranks_per_gpu} per GPU"
    if table is not None:
        lines.append(f"           {len(entries)} of {total} entries apply to {where}")
        if entries and not names_gpu(table, layout.gpu):
            named = sorted({e["gpu"] for e in entries if e["gpu"] != "*"})
            if named:
                lines.append(
                    f"           (entries for {', '.join(named)}, of its architecture {layout.arch})"
                )
        if not entries:
            lines.append(
                "           no entry fits this machine and layout: the built-in rules choose everything"
            )
    lines.append(
        f"choices for {where}, {dtype_bytes}-byte elements, buffers outside windows"
        " (bytes: count x element size; exchanges: per rank)"
    )
    size_list = list(size_list or sizes())
    for collective in collectives:
        lines.append(f"  {collective}")
        runs: list[tuple[int, int, str]] = []
        for nbytes in size_list:
            text = plan(entries, layout, collective, dtype_bytes, nbytes).describe()
            if runs and runs[-1][2] == text:
                runs[-1] = (runs[-1][0], nbytes, text)
            else:
                runs.append((nbytes, nbytes, text))
        for low, high, text in runs:
            span = human(low) if low == high else f"{human(low)}-{human(high)}"
            lines.append(f"    {span:>12}  {text}")
    return lines
