"""Tables perf/packet_kernel_bench outputs of several builds, as the experiments' run.sh name them
(NAME_RANKS_TAG.txt; TAG R, smallR or midBxR for repeat R): graph us per call of each build, with its ratio
to the build named baseline; small sizes (TAG R or smallR) as one mean over the sizes per collective, the
mid sizes (midB, B blocks) per size. Usage: python3 perf/packet_bench_compare.py OUTDIR"""

import sys
from collections import defaultdict
from pathlib import Path

Key = tuple[int, str, str, int]  # ranks, grid ("small" or "midB"), collective, bytes (0: every size)


def load(out: Path) -> dict[str, dict[Key, list[float]]]:
    """build -> (ranks, grid, collective, bytes) -> its graph_us figures over the repeats."""
    times: dict[str, dict[Key, list[float]]] = defaultdict(lambda: defaultdict(list))
    for path in sorted(out.glob("*_*_*.txt")):
        name, ranks, tag = path.stem.rsplit("_", 2)
        grid = tag.rstrip("0123456789").rstrip("x") or "small"
        for line in path.read_text().splitlines():
            fields = line.split()
            if line.startswith("#") or len(fields) != 3:
                continue
            try:
                size, us = int(fields[1]), float(fields[2])
            except ValueError:
                continue
            times[name][(int(ranks), grid, fields[0], 0 if grid == "small" else size)].append(us)
    return times


def main() -> None:
    times = load(Path(sys.argv[1]))
    builds = sorted(times, key=lambda b: (b != "baseline", b))
    keys = sorted({k for build in times.values() for k in build})
    print("graph us per call (ratio to baseline); small: mean over the sizes timed")
    print("| ranks | grid | collective | bytes | " + " | ".join(builds) + " |")
    print("| --- " * (len(builds) + 4) + "|")
    for key in keys:
        base = times.get("baseline", {}).get(key)
        cells = []
        for build in builds:
            figures = times[build].get(key)
            if not figures:
                cells.append("-")
                continue
            mean = sum(figures) / len(figures)
            ratio = f" ({mean / (sum(base) / len(base)):.2f})" if base and build != "baseline" else ""
            cells.append(f"{mean:.2f}{ratio}")
        ranks, grid, collective, size = key
        print(f"| {ranks} | {grid} | {collective} | {size or 'all'} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
