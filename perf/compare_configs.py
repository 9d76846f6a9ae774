"""Compares configurations of our library timed by perf/nccl_timer: where does a forced grid or algorithm
beat the shipped table, eager or in graphs?

Usage: python perf/compare_configs.py DIR [MARGIN]
DIR holds `CONFIG_COLLECTIVE_N.txt` (rank 0's timer output for N ranks); the config named `table` is the
baseline. Prints, per collective and rank count, every size where another config is faster than the
table by more than MARGIN (default 0.05, i.e. 5%) eager or in graphs, with both times of each.
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

from timer_summary import human, read  # perf/, beside this script

BASELINE = "table"


def compare(directory: Path, margin: float) -> list[str]:
    runs: dict[tuple[str, int], dict[str, dict[int, tuple[float, float]]]] = defaultdict(dict)
    for path in sorted(directory.glob("*_*_*.txt")):
        match = re.fullmatch(r"([^_]+)_(.+)_(\d+)", path.stem)
        if match:
            runs[(match.group(2), int(match.group(3)))][match.group(1)] = read(path)
    lines = ["| collective | ranks | size | table eager / graph us | faster (config: eager / graph us) |"]
    lines.append("| --- | --- | --- | --- | --- |")
    for (collective, nranks), configs in sorted(runs.items()):
        base = configs.get(BASELINE, {})
        for size in sorted(base):
            eager, graph = base[size]
            better = [
                f"{name}: {times[size][0]:.1f} / {times[size][1]:.1f}"
                for name, times in sorted(configs.items())
                if name != BASELINE
                and size in times
                and (times[size][0] < eager * (1 - margin) or times[size][1] < graph * (1 - margin))
            ]
            if better:
                row = f"| {collective} | {nranks} | {human(size)} | {eager:.1f} / {graph:.1f} |"
                lines.append(f"{row} {'; '.join(better)} |")
    return lines


if __name__ == "__main__":
    print("\n".join(compare(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 0.05)))
