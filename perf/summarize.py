"""Prints a Markdown table of out-of-place time per size from the bench's JSON results.

Usage: python perf/summarize.py DIR   (DIR holds the -J files, e.g. perf/results/2026-11-29-h200's,
       unpacked with: tar -xJf perf/results/2026-11-29-h200/raw.tar.xz -C DIR)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def human(size: int) -> str:
    for unit, scale in (("MB", 1 << 20), ("KB", 1 << 10)):
        if size >= scale:
            return f"{size // scale} {unit}"
    return f"{size} B"


def main(directory: str) -> None:
    runs = {path.stem: json.loads(path.read_text()) for path in sorted(Path(directory).glob("*.json"))}
    sizes = sorted({row["size"] for run in runs.values() for row in run["results"] if row["size"] > 0})
    print("| run | " + " | ".join(human(s) for s in sizes) + " |")
    print("| --- |" + " --- |" * len(sizes))
    for name, run in runs.items():
        times = {row["size"]: row["out_of_place"]["time"] for row in run["results"]}
        cells = [f"{times[s]:.1f}" if s in times else "" for s in sizes]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
