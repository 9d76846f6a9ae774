"""Tables perf/packet_kernel_bench outputs of several builds (run.sh names them NAME_RANKS_REPEAT.txt):
per rank count and collective, each build's graph time per call averaged over sizes and repeats, and its
ratio to the baseline's. Usage: python3 compare.py OUTDIR"""

import sys
from collections import defaultdict
from pathlib import Path


def load(out: Path) -> dict[tuple[str, int, str], list[float]]:
    """(build, ranks, collective) -> every graph_us figure of it."""
    times: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    for path in sorted(out.glob("*_*_*.txt")):
        name, ranks, _repeat = path.stem.rsplit("_", 2)
        for line in path.read_text().splitlines():
            fields = line.split()
            if line.startswith("#") or len(fields) != 3:
                continue
            try:
                times[(name, int(ranks), fields[0])].append(float(fields[2]))
            except ValueError:
                continue
    return times


def main() -> None:
    times = load(Path(sys.argv[1]))
    builds = sorted({b for b, _, _ in times}, key=lambda b: (b != "baseline", b))
    for ranks in sorted({n for _, n, _ in times}):
        collectives = sorted({c for _, n, c in times if n == ranks})
        print(f"\n{ranks} ranks: graph us per call, mean over 8 B-4 KB (ratio to baseline)")
        print("| collective | " + " | ".join(builds) + " |")
        print("| --- " * (len(builds) + 1) + "|")
        for collective in collectives:
            cells = []
            base = times.get(("baseline", ranks, collective))
            for build in builds:
                figures = times.get((build, ranks, collective))
                if not figures:
                    cells.append("-")
                    continue
                mean = sum(figures) / len(figures)
                ratio = f" ({mean / (sum(base) / len(base)):.2f})" if base and build != "baseline" else ""
                cells.append(f"{mean:.2f}{ratio}")
            print(f"| {collective} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
