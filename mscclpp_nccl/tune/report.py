"""The tuner's lines: one per tuned size (each candidate's time, the winner) and the rules of an entry."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..progress import format_duration


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
