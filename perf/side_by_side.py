"""The speed-up figures of one side-by-side run of perf/nccl_timer: ours against stock NCCL, measured in
the same device command (perf/side_by_side.sh writes the files).

Usage: python perf/side_by_side.py DIR
DIR holds `ours_COLL_N.txt` and `stock_COLL_N.txt` (rank 0's timer output, N ranks). Prints, per
collective and rank count, the slowest ratio (stock time / ours) over all sizes, eager and in graphs;
the geometric mean over 8 B-32 MB; and, for the four bandwidth collectives, ours as a share of the
memory-traffic floor from 32 MB up (each input read once, each output written once, at 4.3 TB/s). Then,
per rank count, a row over every collective: the slowest point, and the geometric mean of all points
from 8 B to 32 MB (the figure the speed-up targets use: every size at least 1.1x, the geometric mean).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from targets import geomean  # perf/, beside this script
from timer_summary import read

FLOOR_BYTES_PER_S = 4.3e12
MB = 1 << 20
BANDWIDTH = ("all_reduce", "all_gather", "reduce_scatter", "broadcast")
# Sizes that nccl-tests splits over the ranks (the timer's per-rank count is size / 2 / N, bf16).
SPLIT = ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter")


def moves_data(collective: str, size: int, nranks: int) -> bool:
    """False where every rank's count is zero: both libraries then do nothing, and the ratio of two
    empty calls says nothing (nccl-tests skips such sizes too)."""
    return collective not in SPLIT or size // 2 // nranks > 0


def floor_us(collective: str, size: int, nranks: int) -> float:
    """Microseconds to read every input once and write every output once (nccl-tests' size column)."""
    moved = 2 * nranks * size if collective == "all_reduce" else (nranks + 1) * size
    return moved / FLOOR_BYTES_PER_S * 1e6


def summarize(directory: Path) -> list[str]:
    lines = [
        "| collective | ranks | slowest ratio eager / graph (size) | geomean 8 B-32 MB eager / graph | "
        "% of floor from 32 MB, eager / graph |",
        "| --- | --- | --- | --- | --- |",
    ]
    pairs = []
    for ours_path in sorted(directory.glob("ours_*_*.txt")):
        match = re.fullmatch(r"ours_(.+)_(\d+)", ours_path.stem)
        stock_path = directory / f"stock_{match.group(1)}_{match.group(2)}.txt" if match else None
        if match and stock_path and stock_path.exists():
            pairs.append((match.group(1), int(match.group(2)), read(ours_path), read(stock_path)))
    pooled: dict[int, list[tuple[str, int, float, float]]] = {}  # nranks -> (collective, size, ratios)
    for collective, nranks, ours, stock in pairs:
        sizes = sorted(s for s in set(ours) & set(stock) if moves_data(collective, s, nranks))
        if not sizes:
            continue
        ratios = {s: (stock[s][0] / ours[s][0], stock[s][1] / ours[s][1]) for s in sizes}
        pooled.setdefault(nranks, []).extend((collective, s, *ratios[s]) for s in sizes)
        worst_eager = min(sizes, key=lambda s: ratios[s][0])
        worst_graph = min(sizes, key=lambda s: ratios[s][1])
        small = [s for s in sizes if s <= 32 * MB]
        mean = (geomean([ratios[s][0] for s in small]), geomean([ratios[s][1] for s in small]))
        floor = ""
        if collective in BANDWIDTH:
            large = [s for s in sizes if s >= 32 * MB]
            shares = [
                (floor_us(collective, s, nranks) / ours[s][0], floor_us(collective, s, nranks) / ours[s][1])
                for s in large
            ]
            if shares:
                floor = (
                    f"{100 * min(e for e, _ in shares):.0f}-{100 * max(e for e, _ in shares):.0f}% / "
                    f"{100 * min(g for _, g in shares):.0f}-{100 * max(g for _, g in shares):.0f}%"
                )
        lines.append(
            f"| {collective} | {nranks} | {ratios[worst_eager][0]:.2f}x ({worst_eager} B) / "
            f"{ratios[worst_graph][1]:.2f}x ({worst_graph} B) | {mean[0]:.2f}x / {mean[1]:.2f}x | {floor} |"
        )
    for nranks, points in sorted(pooled.items()):
        eager = min(points, key=lambda p: p[2])
        graph = min(points, key=lambda p: p[3])
        small = [p for p in points if p[1] <= 32 * MB]
        names = len({p[0] for p in points})
        lines.append(
            f"| all {names} | {nranks} | {eager[2]:.2f}x ({eager[0]} {eager[1]} B) / "
            f"{graph[3]:.2f}x ({graph[0]} {graph[1]} B) | {geomean([p[2] for p in small]):.2f}x / "
            f"{geomean([p[3] for p in small]):.2f}x | |"
        )
    return lines


if __name__ == "__main__":
    print("\n".join(summarize(Path(sys.argv[1]))))
