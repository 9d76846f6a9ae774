"""Winner selection and rule compression: from the times of each tuned size to the rules of a table entry."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from .candidates import Candidate
from .results import point_times, run_candidates
from .table import make_entry

# The previous size's winner keeps a size where it is within this fraction of the fastest: equivalent
# candidates (the default grid and the grid the default resolves to, say) then do not split rules on noise.
TIE_TOLERANCE = 0.03


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
            make_entry(
                run["gpu"],
                run["nranks"],
                run["ranks_per_gpu"],
                coll,
                run["dtype_bytes"],
                rules,
                arch=run.get("gpu_arch"),
            )
        )
    return entries, notes
