"""Our tuning table to and from NCCL's tuner-plugin CSV (the example plugin's NCCL_TUNER_CONFIG_FILE:
`collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff`), where
the meanings map:

- collectives: allreduce, allgather, reducescatter, broadcast and reduce (NCCL's tuner has no alltoall,
  gather, scatter or sendrecv: those entries are left out);
- bytes: NCCL counts all of an all-gather's or reduce-scatter's data, our table the range per rank, so
  those convert with the entry's nranks (an entry for any number of ranks cannot, and is left out);
- protocol: our packet algorithms are NCCL's LL (data and flag in one store), the chunked and zero-copy
  ones its simple; channels are our blocks (-1: the default grid);
- algorithm: ours have no NCCL counterpart, so the CSV says ring, NCCL's one-host algorithm, and on
  import only the protocol chooses (LL: packets, one-shot for all-reduces up to 64 KiB; simple: chunks);
- nNodes is 1 (a table is for one host; several go to stock NCCL, which reads the CSV itself);
  nRanks is the entry's nranks or -1; numPipeOps -1; regBuff 1 for the zero-copy all-reduce of windows.

What the CSV cannot say (GPU model, ranks per GPU, element size, threads, chunk_bytes) is written as a
comment on export and taken as "any" (the library's default) on import. Sizes an imported CSV leaves
uncovered get the library's built-in rules, so that the table still answers for every size."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..selection import (
    EXCHANGE_PACKET_MAX_BYTES,
    ONE_SHOT_MAX_BYTES,
    REGISTRY,
    TWO_SHOT_PACKET_MAX_BYTES,
    builtin_algorithm,
)
from .table import WILDCARD, new_table, validate_table

SIZE_MAX = (1 << 64) - 1  # NCCL's "no limit"
FIELDS = "collective,min_bytes,max_bytes,algorithm,protocol,channels,nNodes,nRanks,numPipeOps,regBuff"
TO_NCCL = {
    "all_reduce": "allreduce",
    "all_gather": "allgather",
    "reduce_scatter": "reducescatter",
    "broadcast": "broadcast",
    "reduce": "reduce",
}
FROM_NCCL = {v: k for k, v in TO_NCCL.items()}
TOTAL_BYTES = ("all_gather", "reduce_scatter")  # NCCL counts every rank's part


class CsvError(ValueError):
    """A CSV line that does not follow NCCL's format."""


def _protocol(algorithm: str) -> str:
    return "ll" if REGISTRY[algorithm].protocol == "packet" else "simple"


def export_csv(table: dict[str, Any]) -> tuple[str, list[str]]:
    """The table as NCCL tuner-plugin CSV, and notes on the entries left out."""
    validate_table(table)
    out = io.StringIO()
    out.write(
        f"# NCCL tuner-plugin CSV (NCCL_TUNER_CONFIG_FILE) from an mscclpp-nccl tuning table\n# {FIELDS}\n"
    )
    notes: list[str] = []
    writer = csv.writer(out, lineterminator="\n")
    for i, entry in enumerate(table["entries"]):
        collective, nranks = entry["collective"], entry["nranks"]
        what = f"entries[{i}] ({collective}, gpu {entry['gpu']}, nranks {nranks})"
        if collective not in TO_NCCL:
            notes.append(f"{what}: NCCL's tuner has no {collective}; left out")
            continue
        if collective in TOTAL_BYTES and nranks == WILDCARD:
            notes.append(
                f"{what}: bytes per rank cannot become NCCL's totals for any number of ranks; left out"
            )
            continue
        scale = nranks if collective in TOTAL_BYTES else 1
        out.write(
            f"# gpu {entry['gpu']}, ranks_per_gpu {entry['ranks_per_gpu']},"
            f" dtype_bytes {entry.get('dtype_bytes', WILDCARD)}\n"
        )
        low = 0
        for rule in entry["rules"]:
            high = SIZE_MAX if rule["max_bytes"] is None else rule["max_bytes"] * scale
            algorithm = rule["algorithm"]
            writer.writerow(
                [
                    TO_NCCL[collective],
                    low,
                    high,
                    "ring",
                    _protocol(algorithm),
                    rule.get("blocks", -1),
                    1,
                    -1 if nranks == WILDCARD else nranks,
                    -1,
                    1 if REGISTRY[algorithm].needs_windows else -1,
                ]
            )
            low = high + 1
    return out.getvalue(), notes


@dataclass(frozen=True)
class _Line:
    collective: str
    low: int
    high: int
    protocol: str
    channels: int
    nranks: int
    order: int


def _int(text: str, what: str, lineno: int) -> int:
    try:
        return int(text.strip())
    except ValueError:
        raise CsvError(f"line {lineno}: {what} is not an integer: {text.strip()!r}") from None


def _parse(text: str) -> tuple[list[_Line], list[str]]:
    lines: list[_Line] = []
    notes: list[str] = []
    for lineno, row in enumerate(csv.reader(io.StringIO(text)), start=1):
        if not row or not "".join(row).strip() or row[0].strip().startswith("#"):
            continue
        if not 8 <= len(row) <= 10:
            raise CsvError(f"line {lineno}: {len(row)} fields; NCCL's format has 8 to 10: {FIELDS}")
        name = row[0].strip().lower()
        low, high = _int(row[1], "min_bytes", lineno), _int(row[2], "max_bytes", lineno)
        protocol = row[4].strip().lower()
        channels = _int(row[5], "channels", lineno)
        nodes, nranks = _int(row[6], "nNodes", lineno), _int(row[7], "nRanks", lineno)
        if protocol not in ("ll", "ll128", "simple"):
            raise CsvError(f"line {lineno}: protocol {row[4].strip()!r} is not ll, ll128 or simple")
        if low > high or low < 0:
            raise CsvError(f"line {lineno}: min_bytes {low} and max_bytes {high} are no range")
        if name not in FROM_NCCL:
            notes.append(f"line {lineno}: {name} is no collective of ours with a table (skipped)")
            continue
        if nodes not in (1, -1):
            notes.append(f"line {lineno}: {nodes} nodes: several hosts run on stock NCCL (skipped)")
            continue
        collective = FROM_NCCL[name]
        if collective in TOTAL_BYTES and nranks < 1:
            notes.append(f"line {lineno}: {name} for any nRanks: its totals have no bytes per rank (skipped)")
            continue
        lines.append(_Line(collective, low, high, protocol, channels, nranks, len(lines)))
    return lines, notes


def _algorithm_for(collective: str, protocol: str, high: int) -> str:
    if protocol == "simple":
        return "allreduce_two_shot_chunked" if collective == "all_reduce" else "exchange_chunked"
    if collective == "all_reduce":
        return "allreduce_one_shot_packet" if high <= ONE_SHOT_MAX_BYTES else "allreduce_two_shot_packet"
    return "exchange_packet"


def _builtin_rules(collective: str, nranks: int, low: int, high: int | None) -> list[dict[str, Any]]:
    """The built-in rules over [low, high] (None: no limit), split where they change."""
    bounds = (
        [ONE_SHOT_MAX_BYTES, TWO_SHOT_PACKET_MAX_BYTES]
        if collective == "all_reduce"
        else [EXCHANGE_PACKET_MAX_BYTES]
    )
    inside = [b for b in bounds if low <= b and (high is None or b < high)]
    rules = []
    for bound in [*inside, high]:
        # The rules are constant between bounds: ask at the segment's largest size (past the last bound
        # for the open end).
        size = bound if bound is not None else max([low, *(b + 1 for b in bounds if b < SIZE_MAX)])
        rules.append({"max_bytes": bound, "algorithm": builtin_algorithm(collective, max(nranks, 2), size)})
    return rules


def _merged(rules: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Consecutive rules that say the same become one (the later max_bytes)."""
    out: list[dict[str, Any]] = []
    for rule in rules:
        same = out and {k: v for k, v in out[-1].items() if k != "max_bytes"} == {
            k: v for k, v in rule.items() if k != "max_bytes"
        }
        if same:
            out[-1]["max_bytes"] = rule["max_bytes"]
        else:
            out.append(dict(rule))
    return out


def import_csv(text: str) -> tuple[dict[str, Any], list[str]]:
    """A tuning table from NCCL tuner-plugin CSV, and notes on what was skipped. Lines of one collective
    and nRanks become one entry; where lines overlap, the one that starts first wins (NCCL takes the first
    matching line of the file)."""
    lines, notes = _parse(text)
    groups: dict[tuple[str, int], list[_Line]] = {}
    for line in lines:
        groups.setdefault((line.collective, line.nranks), []).append(line)
    entries = []
    for (collective, nranks), group in groups.items():
        scale = nranks if collective in TOTAL_BYTES else 1
        rules: list[dict[str, Any]] = []
        covered = -1  # the largest byte count the rules so far answer for
        for line in sorted(group, key=lambda x: (x.low, x.order)):
            low, high = line.low // scale, line.high // scale
            if high <= covered:
                continue
            if low > covered + 1:
                rules += _builtin_rules(collective, nranks, covered + 1, low - 1)
            rule: dict[str, Any] = {"max_bytes": None if line.high >= SIZE_MAX else high}
            rule["algorithm"] = _algorithm_for(collective, line.protocol, high)
            if line.channels > 0:
                rule["blocks"] = min(line.channels, 1024)
            rules.append(rule)
            covered = SIZE_MAX if rule["max_bytes"] is None else high
            if rule["max_bytes"] is None:
                break
        if covered < SIZE_MAX:
            rules += _builtin_rules(collective, nranks, covered + 1, None)
        # Our tables start at 1 byte (a rule for 0 bytes alone says nothing a call could ask).
        rules = [r for r in _merged(rules) if r["max_bytes"] is None or r["max_bytes"] > 0]
        entries.append(
            {
                "gpu": WILDCARD,
                "nranks": nranks if nranks > 0 else WILDCARD,
                "ranks_per_gpu": WILDCARD,
                "collective": collective,
                "rules": rules,
            }
        )
    table = new_table(entries)
    validate_table(table)
    return table, notes
