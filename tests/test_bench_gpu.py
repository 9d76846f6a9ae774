"""mscclpp_nccl.bench on the GPU: every collective at 4 ranks (sharing the GPUs present, under MPS), 8 B
to 1 MB, each size checked (-c 1), asserting a clean exit and no wrong element.

Collectives the library does not implement yet fail here, with the library's error in the output; that
is expected until they exist. Extra cases: CUDA graphs, every type and op, and the same run against stock
NCCL (--lib) where the nvidia-nccl-cu13 wheel is installed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from stock_nccl import stock_lib

from mscclpp_nccl.bench import COLLECTIVES, ROOTED, UNCHECKED_IN_PLACE, layout, size_series

ROOT = Path(__file__).resolve().parent.parent
RANKS = 4


def run_bench(args: list[str], tmp_path: Path, timeout: float = 900) -> tuple[str, dict[str, Any]]:
    """Runs the benchmark; asserts exit 0; returns its output and its JSON document."""
    env = dict(os.environ)
    # A deadlock must cost seconds, not the whole run.
    env.setdefault("MSCCLPP_NCCL_WAIT_TIMEOUT", "60")
    env.setdefault("MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT", "60")
    path = tmp_path / "bench.json"
    cmd = [sys.executable, "-m", "mscclpp_nccl.bench", *args, "--nranks", str(RANKS), "-T", "120"]
    cmd += ["--run-timeout", str(timeout), "--json", str(path)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout + 60)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode}\n{output[-8000:]}"
    return proc.stdout, json.loads(path.read_text())


def assert_all_right(stdout: str, doc: dict[str, Any], coll: str, rows_expected: int) -> None:
    rows = [line.split() for line in stdout.splitlines() if line.strip() and not line.startswith("#")]
    assert len(rows) == rows_expected, stdout[-4000:]
    for row in rows:
        assert len(row) == 13, row
        assert row[8] == "0", row
        assert row[12] == ("N/A" if coll in UNCHECKED_IN_PLACE else "0"), row
    assert "# Out of bounds values : 0 OK" in stdout
    assert len(doc["results"]) == rows_expected
    for r in doc["results"]:
        assert r["out_of_place"]["nwrong"] == 0
        assert r["in_place"]["nwrong"] == (None if coll in UNCHECKED_IN_PLACE else 0)
        assert r["out_of_place"]["time"] > 0 and r["in_place"]["time"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("coll", COLLECTIVES)
def test_bench_collective(coll: str, tmp_path: Path) -> None:
    args = [coll, "-b", "8", "-e", "1M", "-f", "2", "-c", "1"]
    roots = 1
    if coll in ROOTED:
        args += ["-r", "all"]
        roots = RANKS
    stdout, doc = run_bench(args, tmp_path)
    sizes = size_series(8, 1 << 20, 2, 0)
    assert_all_right(stdout, doc, coll, len(sizes) * roots)
    first = doc["results"][0]
    assert (first["size"], first["count"]) == (
        layout(coll, 8, 4, RANKS).size,
        layout(coll, 8, 4, RANKS).count,
    )


@pytest.mark.gpu
def test_bench_all_reduce_graph(tmp_path: Path) -> None:
    stdout, doc = run_bench(
        ["all_reduce", "-b", "8", "-e", "1M", "-f", "4", "-G", "5", "-d", "bfloat16"], tmp_path
    )
    assert_all_right(stdout, doc, "all_reduce", len(size_series(8, 1 << 20, 4, 0)))
    assert "graph: 5" in stdout


@pytest.mark.gpu
def test_bench_all_reduce_every_type_and_op(tmp_path: Path) -> None:
    args = ["all_reduce", "-b", "8", "-e", "64K", "-f", "8", "-w", "1", "-n", "2", "-d", "all", "-o", "all"]
    stdout, doc = run_bench(args, tmp_path)
    per_combo = len(size_series(8, 64 << 10, 8, 0))
    assert_all_right(stdout, doc, "all_reduce", 12 * 6 * per_combo)


@pytest.mark.gpu
@pytest.mark.parametrize("coll", ["all_reduce", "all_gather", "sendrecv"])
def test_bench_stock_nccl(coll: str, tmp_path: Path) -> None:
    """The same benchmark over stock NCCL, as a comparison would run it (checks the --lib path)."""
    lib, why = stock_lib()
    if lib is None:
        pytest.skip(why)
    stdout, doc = run_bench([coll, "-b", "8", "-e", "1M", "-f", "4", "--lib", str(lib)], tmp_path)
    assert_all_right(stdout, doc, coll, len(size_series(8, 1 << 20, 4, 0)))
    assert doc["library"] == str(lib)
