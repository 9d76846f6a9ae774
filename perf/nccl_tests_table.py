"""Side-by-side table from perf/nccl_tests.sh: nccl-tests' own times for ours and stock NCCL.

Usage: python perf/nccl_tests_table.py DIR [--csv FILE] [--library NAME] [--gpu TEXT]
DIR holds `{ours,stock}_BINARY_N_MODE.txt` (nccl-tests output). For each binary, rank count and mode it
prints the ratio stock time / ours per size (the smaller of out-of-place and in-place on each side), the
geometric mean over 8 B-32 MB, the slowest ratio, and ours as a share of the memory-traffic floor from
32 MB (every byte that must be read or written once, at 4.3 TB/s). With --csv it writes every row.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import re
import sys
from pathlib import Path

FLOOR_BYTES_PER_S = 4.3e12
MB = 1 << 20
HARNESS = "nccl-tests 2.19.6 (ncclMemAlloc buffers, bfloat16, -c 0)"
COMMAND = (
    "perf/nccl_tests.sh: mpirun -np N -x NCCL_TESTS_DEVICE=0 -x NCCL_NVLS_ENABLE=0 -x LD_PRELOAD=LIB "
    "BINARY_perf $SIZES -g 1 -d bfloat16 $ITERS -c 0 [-G 5] [-R r]; stock adds NCCL_MULTI_RANK_GPU_ENABLE=1 "
    "NCCL_MAX_CTAS=32/N (N > 2)"
)
NAME = re.compile(r"(ours|stock)_(\w+?)_(\d+)_(\w+)\.txt$")


def traffic_bytes(binary: str, size: int, n: int) -> int:
    """Bytes every rank together must read and write at least; `size` is nccl-tests' size column."""
    if binary in ("all_reduce", "alltoall", "sendrecv"):
        return 2 * n * size
    if binary in ("all_gather", "broadcast", "reduce_scatter", "reduce"):
        return (n + 1) * size
    return 2 * size  # gather, scatter: the root's whole buffer is read (or written) once, in pieces


def read(path: Path) -> dict[int, float]:
    """size -> time in us (the smaller of out-of-place and in-place)."""
    times: dict[int, float] = {}
    for line in path.read_text(errors="replace").splitlines():
        fields = line.split()
        if len(fields) < 10 or not fields[0].isdigit() or not fields[1].isdigit():
            continue
        try:
            out_of_place, in_place = float(fields[5]), float(fields[9])
        except ValueError:
            continue
        times[int(fields[0])] = min(out_of_place, in_place)
    return times


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("dir", type=Path)
    parser.add_argument("--csv", type=Path)
    parser.add_argument("--library", default="mscclpp-nccl")
    parser.add_argument("--gpu", default="1x H200 under MPS (ranks share it), CUDA 13.0")
    args = parser.parse_args()
    runs: dict[tuple[str, int, str], dict[str, dict[int, float]]] = {}
    for path in sorted(args.dir.glob("*.txt")):
        match = NAME.search(path.name)
        if match:
            lib, binary, n, mode = match.group(1), match.group(2), int(match.group(3)), match.group(4)
            runs.setdefault((binary, n, mode), {})[lib] = read(path)
    rows = []
    date = datetime.date.today().isoformat()
    for (binary, n, mode), libs in sorted(runs.items()):
        ours, stock = libs.get("ours", {}), libs.get("stock", {})
        sizes = sorted(s for s in ours if s in stock and s > 0 and ours[s] > 0 and stock[s] > 0)
        if not sizes:
            print(f"{binary:15s} {n} {mode:9s}: no comparable rows (ours {len(ours)}, stock {len(stock)})")
            continue
        ratios = {s: stock[s] / ours[s] for s in sizes}
        small = [ratios[s] for s in sizes if s <= 32 * MB]
        floor = [
            traffic_bytes(binary, s, n) / FLOOR_BYTES_PER_S * 1e6 / ours[s] for s in sizes if s >= 32 * MB
        ]
        slowest = min(sizes, key=lambda s: ratios[s])
        print(
            f"{binary:15s} {n} {mode:9s}: geomean(8B-32MB) {geomean(small):5.2f}x  "
            f"slowest {ratios[slowest]:5.2f}x at {slowest} B  "
            f"floor from 32MB {min(floor, default=math.nan):4.0%}-{max(floor, default=math.nan):4.0%}  "
            "below 1.1x: " + ", ".join(f"{s}:{ratios[s]:.2f}" for s in sizes if ratios[s] < 1.1)
        )
        for s in sizes:
            rows.append(
                [HARNESS, COMMAND, args.library, args.gpu, date, binary, n, mode, s, ours[s], stock[s]]
            )
    if args.csv:
        with args.csv.open("w", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(
                [
                    "harness",
                    "command",
                    "library",
                    "gpu",
                    "date",
                    "collective",
                    "ranks",
                    "mode",
                    "bytes",
                    "ours_us",
                    "stock_us",
                ]
            )
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
