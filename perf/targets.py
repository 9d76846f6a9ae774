"""Speed-up over stock NCCL at 4 ranks, geometric mean over fixed stock points, from perf/nccl_timer outputs.

Usage: python perf/targets.py DIR    (DIR holds COLL_4.txt files, as perf/timer_set.sh writes them)

The stock points (STOCK below) are NCCL 2.30.7's, 4 ranks sharing one H200 under MPS, eager, nccl-tests
timing. Where they give a range for the small sizes, every size in it is compared with the range's low
end and, apart, its high end; our time at 16 MB is interpolated linearly between 8 and 32 MB. Prints
the geometric mean per collective and over all points, and the slowest point.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

from timer_summary import read  # perf/, beside this script

KB, MB = 1 << 10, 1 << 20
# collective -> (largest size of the small-size range, (low, high) us of that range, {size: us})
STOCK: dict[str, tuple[int, tuple[float, float], dict[int, float]]] = {
    "all_reduce": (128 * KB, (13.4, 20.1), {512 * KB: 27.3, 2 * MB: 53.3, 8 * MB: 128.0, 32 * MB: 339.8}),
    "all_gather": (256 * KB, (12.8, 14.9), {2 * MB: 43.9, 16 * MB: 128.2}),
    "reduce_scatter": (256 * KB, (13.6, 17.5), {2 * MB: 43.7, 16 * MB: 106.8}),
    "broadcast": (256 * KB, (11.3, 14.0), {2 * MB: 32.7, 16 * MB: 118.5}),
    "alltoall": (0, (0.0, 0.0), {32 * KB: 12.3, 512 * KB: 20.1, 8 * MB: 82.5}),
}


def eager_times(path: Path) -> dict[int, float]:
    return {size: eager for size, (eager, _graph) in read(path).items()}


def ours_at(times: dict[int, float], size: int) -> float:
    if size in times:
        return times[size]
    below = max(s for s in times if s < size)
    above = min(s for s in times if s > size)
    return times[below] + (times[above] - times[below]) * (size - below) / (above - below)


def speedups(collective: str, times: dict[int, float], end: int) -> list[tuple[int, float]]:
    """(size, stock / ours) for every point; `end` 0 / 1 picks the small-size range's low / high end."""
    small_max, small_range, points = STOCK[collective]
    result = [(size, small_range[end] / us) for size, us in sorted(times.items()) if size <= small_max]
    result += [(size, stock / ours_at(times, size)) for size, stock in sorted(points.items())]
    return result


def geomean(values: list[float]) -> float:
    """The geometric mean; NaN for no values (a table cell with nothing to average)."""
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main(directory: str) -> None:
    every: list[list[float]] = [[], []]
    slowest: tuple[float, str, int] = (math.inf, "", 0)
    for collective in STOCK:
        path = Path(directory) / f"{collective}_4.txt"
        if not path.exists():
            print(f"{collective}: no {path.name}")
            continue
        times = eager_times(path)
        means = []
        for end in (0, 1):
            points = speedups(collective, times, end)
            every[end] += [s for _, s in points]
            means.append(geomean([s for _, s in points]))
            slowest = min(slowest, *((s, collective, size) for size, s in points))
        print(f"{collective}: {means[0]:.2f} / {means[1]:.2f}x over {len(points)} points")
    if every[0]:
        print(f"all: {geomean(every[0]):.2f} / {geomean(every[1]):.2f}x over {len(every[0])} points")
        print(f"slowest point: {slowest[1]} {slowest[2]} bytes at {slowest[0]:.2f}x")


if __name__ == "__main__":
    main(sys.argv[1])
