"""Prints a Markdown table of eager and graph time per size from perf/nccl_timer outputs.

Usage: python perf/timer_summary.py DIR   (DIR holds the timer's outputs, e.g. perf/timer_set.sh's)
Each file is one run's output (rank 0's lines are prefixed "[0]" by the launcher).
"""

from __future__ import annotations

import sys
from pathlib import Path


def human(size: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


def read(path: Path) -> dict[int, tuple[float, float]]:
    """size -> (eager us, graph us)."""
    rows: dict[int, tuple[float, float]] = {}
    for line in path.read_text().splitlines():
        fields = line.removeprefix("[0]").split()
        if len(fields) >= 3 and fields[0].isdigit():
            rows[int(fields[0])] = (float(fields[1]), float(fields[2]))
    return rows


def main(directory: str) -> None:
    runs = {path.stem: read(path) for path in sorted(Path(directory).glob("*.txt"))}
    sizes = sorted({size for rows in runs.values() for size in rows})
    print("| run (eager / graph us) | " + " | ".join(human(s) for s in sizes) + " |")
    print("| --- |" + " --- |" * len(sizes))
    for name, rows in runs.items():
        cells = [f"{rows[s][0]:.1f} / {rows[s][1]:.1f}" if s in rows else "" for s in sizes]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
