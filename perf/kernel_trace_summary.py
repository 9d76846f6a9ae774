"""Where a collective's time goes between kernels, from perf/kernel_trace.cc's files (CUPTI timestamps).

Usage: python perf/kernel_trace_summary.py [--last N] [--csv FILE] [--meta KEY=VALUE ...] DIR...
Each DIR holds one run's trace.<rank>.<pid>.csv files (one per rank). Per rank, the last N kernels (the
timed calls) are taken in start order; call i of every rank is the i-th of those. Per run, medians in
microseconds:
  period    start of a rank's call to the start of its next one (mean_period: their mean, which counts
            the gaps between graph launches that the median leaves out)
  kernel    a rank's kernel, start to end
  gap       a rank's kernel end to the start of its next kernel (its own idle time between calls)
  queued    launch queued to submitted to the GPU; submit the submission to the kernel's start
  skew      the last rank's start after the first rank's
  idle      the first rank's start of call i + 1 after the last rank's end of call i: time no rank's
            kernel runs
  breaks    periods per rank more than twice the median and 5 us longer (graph launches, in graphs), and
  break_us  what each of them adds to the median period, on average
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

Kernel = dict[str, float | str]
COLUMNS = [
    "ranks",
    "calls",
    "period",
    "mean_period",
    "kernel",
    "gap",
    "queued",
    "submit",
    "skew",
    "idle",
    "breaks",
    "break_us",
]


def read_rank(path: Path) -> list[Kernel]:
    with path.open() as handle:
        rows = [row for row in csv.DictReader(line for line in handle if not line.startswith("#"))]
    kernels = [
        {
            "name": row["name"],
            **{key: float(row[key]) / 1000.0 for key in ("queued", "submitted", "start", "end")},
        }
        for row in rows
    ]
    return sorted(kernels, key=lambda k: float(k["start"]))


def summarize(run: Path, last: int) -> Kernel:
    ranks = [read_rank(path) for path in sorted(run.glob("trace.*.csv"))]
    ranks = [kernels for kernels in ranks if kernels]
    if not ranks:
        return {"run": run.name, "error": "no kernels"}
    n = min(last, *(len(kernels) for kernels in ranks))
    calls = [kernels[-n:] for kernels in ranks]

    def median(values: list[float]) -> float:
        return round(statistics.median(values), 2) if values else float("nan")

    def per_rank(value: Callable[[Kernel, Kernel], float]) -> list[float]:
        """value(a, b) of every two consecutive kernels of every rank."""
        return [value(k[i], k[i + 1]) for k in calls for i in range(n - 1)]

    queued = [k["submitted"] - k["queued"] for c in calls for k in c if k["queued"] and k["submitted"]]
    submit = [k["start"] - k["submitted"] for c in calls for k in c if k["submitted"]]
    periods = per_rank(lambda a, b: b["start"] - a["start"])
    typical = statistics.median(periods)
    breaks = [p - typical for p in periods if p > 2 * typical and p > typical + 5]
    first_start = [min(c[i]["start"] for c in calls) for i in range(n)]
    last_start = [max(c[i]["start"] for c in calls) for i in range(n)]
    last_end = [max(c[i]["end"] for c in calls) for i in range(n)]
    return {
        "run": run.name,
        "ranks": len(calls),
        "calls": n,
        "kernel_name": str(calls[0][-1]["name"])[:60],
        "period": median(periods),
        "mean_period": round(statistics.mean(periods), 2),
        "kernel": median([k["end"] - k["start"] for c in calls for k in c]),
        "gap": median(per_rank(lambda a, b: b["start"] - a["end"])),
        "queued": median(queued),
        "submit": median(submit),
        "skew": median([b - a for a, b in zip(first_start, last_start, strict=True)]),
        "idle": median([first_start[i + 1] - last_end[i] for i in range(n - 1)]),
        "breaks": round(len(breaks) / len(calls), 1),
        "break_us": round(statistics.mean(breaks), 1) if breaks else 0.0,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--last", type=int, default=100, help="timed calls per rank (the last kernels)")
    parser.add_argument("--csv", type=Path, help="also write the rows here")
    parser.add_argument(
        "--meta", action="append", default=[], help="KEY=VALUE, a column of every CSV row (provenance)"
    )
    args = parser.parse_args()
    meta = dict(item.split("=", 1) for item in args.meta)
    rows = [{**meta, **summarize(run, args.last)} for run in args.runs]
    keys = [*meta, "run", *COLUMNS, "kernel_name"]
    print(" ".join(f"{key:>8}" for key in COLUMNS), "run")
    for row in rows:
        print(" ".join(f"{row.get(key, ''):>8}" for key in COLUMNS), row["run"], row.get("kernel_name", ""))
    if args.csv:
        with args.csv.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=[*keys, "error"], extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
