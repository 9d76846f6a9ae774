"""Registers and spills of every kernel in two trees, as ptxas reports them: a check that needs no GPU.

Compiles each given source in both trees with `-Xptxas -v`, as setup.py compiles it for sm_90 (once per
type shard where it includes native/algorithms/type_shards.cuh), and writes one CSV row per kernel whose
registers or spills differ between the trees. A packet kernel is held to 64 registers
(kPacketBlocksPerSm), so a restructured schedule shows here first whether it costs spills.

    python perf/ptxas_usage.py BEFORE_TREE AFTER_TREE OUT.csv SOURCE... [--before-name N] [--after-name N]
"""

from __future__ import annotations

import argparse
import csv
import datetime
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SHARDS_HEADER = "native/algorithms/type_shards.cuh"
ENTRY = re.compile(r"Compiling entry function '([^']+)'")
SPILLS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
REGISTERS = re.compile(r"Used (\d+) registers")

Usage = dict[str, tuple[int, int, int]]  # kernel -> (registers, spill store bytes, spill load bytes)


def shard_count(tree: Path) -> int:
    match = re.search(r"constexpr int kTypeShards = (\d+);", (tree / SHARDS_HEADER).read_text())
    if match is None:
        sys.exit(f"error: {tree / SHARDS_HEADER} does not define kTypeShards")
    return int(match.group(1))


def demangle(names: list[str]) -> list[str]:
    out = subprocess.run(
        ["c++filt"], input="\n".join(names), capture_output=True, text=True, check=True
    ).stdout
    return [
        re.sub(r"mscclpp_nccl::|\(anonymous namespace\)::|^void ", "", n).split("(")[0]
        for n in out.splitlines()
    ]


def shards_of(tree: Path, source: str, shards: int) -> list[int]:
    """The shards a source compiles as (-1: one compile, the source is not sharded)."""
    return list(range(shards)) if SHARDS_HEADER in (tree / source).read_text() else [-1]


def usage(tree: Path, source: str, shard: int) -> Usage:
    command = [
        "nvcc",
        "-std=c++17",
        "-O3",
        f"-I{tree}",
        f"-I{tree / 'include'}",
        '-DMSCCLPP_NCCL_VERSION="0"',
    ]
    command += ["--expt-relaxed-constexpr", "-gencode", "arch=compute_90,code=sm_90", "-Xptxas", "-v"]
    command += [f"-DMSCCLPP_NCCL_TYPE_SHARD={shard}"] if shard >= 0 else []
    command += ["-c", source, "-o", "/dev/null"]
    result = subprocess.run(command, cwd=tree, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"error: {tree}: {source} shard {shard} does not compile:\n{result.stderr[-2000:]}")
    names, values, spills = [], [], (0, 0)
    for line in result.stderr.splitlines():
        if m := ENTRY.search(line):
            names.append(m.group(1))
        elif m := SPILLS.search(line):
            spills = (int(m.group(2)), int(m.group(3)))
        elif (m := REGISTERS.search(line)) and len(values) < len(names):
            values.append((int(m.group(1)), *spills))
    return dict(zip(demangle(names), values, strict=True))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("sources", nargs="+")
    parser.add_argument("--before-name", default="before")
    parser.add_argument("--after-name", default="after")
    args = parser.parse_args()
    shards = shard_count(args.after)
    jobs = [(source, shard) for source in args.sources for shard in shards_of(args.after, source, shards)]
    with ThreadPoolExecutor() as pool:
        before = list(pool.map(lambda job: usage(args.before, *job), jobs))
        after = list(pool.map(lambda job: usage(args.after, *job), jobs))
    nvcc = (
        subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    )
    command = "python perf/ptxas_usage.py " + " ".join(sys.argv[1:])
    header = [
        "harness",
        "command",
        "baseline",
        "library",
        "gpu",
        "compiler",
        "date",
        "source",
        "type_shard",
        "kernel",
    ]
    header += [
        f"{what}_{side}"
        for side in ("before", "after")
        for what in ("registers", "spill_stores", "spill_loads")
    ]
    rows, differ = [], 0
    for (source, shard), old, new in zip(jobs, before, after, strict=True):
        for kernel in sorted(old.keys() | new.keys()):
            a, b = old.get(kernel, (-1, -1, -1)), new.get(kernel, (-1, -1, -1))
            if a == b:
                continue
            differ += 1
            rows.append(
                [
                    "ptxas -v, sm_90 (perf/ptxas_usage.py)",
                    command,
                    args.before_name,
                    args.after_name,
                    "none (ptxas for sm_90)",
                    nvcc,
                    datetime.date.today().isoformat(),
                    source,
                    shard,
                    kernel,
                    *a,
                    *b,
                ]
            )
    with args.out.open("w", newline="") as f:
        csv.writer(f).writerows([header, *rows])
    more = sum(1 for r in rows if r[14] > r[11])
    fewer = sum(1 for r in rows if r[14] < r[11])
    print(f"{differ} kernels differ; spill stores more in {more}, fewer in {fewer}; rows in {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
