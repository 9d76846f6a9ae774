"""mscclpp_nccl.tune on the GPU: 4 ranks (sharing the GPUs present, under MPS when they share), asserting
a clean exit, a tuning table in the exact format the library reads, every candidate verified correct,
and the plot.

The default-grid test also proves that the library accepts every MSCCLPP_NCCL_ALGO item the tuner forces
by default, for every collective, and gives right results with each.
"""

from __future__ import annotations

import collections
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, os.path.dirname(__file__))
from stock_nccl import stock_lib

from mscclpp_nccl.bench import COLLECTIVES, size_series
from mscclpp_nccl.run import assign_gpus, visible_gpus
from mscclpp_nccl.tune import default_candidates, load_raw, load_table

ROOT = Path(__file__).resolve().parent.parent
RANKS = 4
ONE = "allreduce_one_shot_packet"
TWO = "allreduce_two_shot_packet"


def run_tune(args: list[str], tmp_path: Path, timeout: float = 900) -> tuple[str, dict[str, Any]]:
    """Runs the tuner; asserts exit 0; returns its output and its raw measurements."""
    env = dict(os.environ)
    env.pop("MSCCLPP_NCCL_ALGO", None)
    raw = tmp_path / "raw.json"
    cmd = [sys.executable, "-m", "mscclpp_nccl.tune", "--nranks", str(RANKS), *args, "-T", "60"]
    cmd += ["--run-timeout", str(timeout), "--raw", str(raw)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout + 120)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"exit {proc.returncode}\n{output[-8000:]}"
    return proc.stdout, load_raw(str(raw))


def progress_lines(stdout: str) -> list[str]:
    return [line for line in stdout.splitlines() if line.startswith("[")]


def expected_ranks_per_gpu() -> int:
    return max(collections.Counter(assign_gpus(RANKS, visible_gpus())).values())


def assert_all_verified(coll_doc: dict[str, Any]) -> None:
    assert coll_doc["complete"], coll_doc
    assert coll_doc["excluded"] == {}, coll_doc["excluded"]
    specs = {c["spec"] for c in coll_doc["candidates"]}
    for point in coll_doc["points"]:
        assert set(point["results"]) == specs, point
        for spec, r in point["results"].items():
            assert r["status"] in ("ok", "pruned"), (point["size"], spec, r)
            assert r["time_us"] > 0


@pytest.mark.gpu
def test_tune_all_reduce(tmp_path: Path, nccl_lib: Path) -> None:
    out, png = tmp_path / "tuning.json", tmp_path / "tuning.png"
    args = ["--collectives", "all_reduce", "-b", "8", "-e", "1M", "-f", "2", "--candidates", ONE, f"{TWO}/8"]
    args += ["--replays", "3", "--calls-per-graph", "5", "--out", str(out), "--plot", str(png)]
    stdout, raw = run_tune(args, tmp_path)
    sizes = size_series(8, 1 << 20, 2, 0)

    table = load_table(str(out))  # validates the format exactly
    (entry,) = table["entries"]
    assert (entry["collective"], entry["nranks"], entry["dtype_bytes"]) == ("all_reduce", RANKS, 2)
    assert entry["ranks_per_gpu"] == expected_ranks_per_gpu()
    assert entry["gpu"] == raw["ours"]["gpu"] and entry["gpu"]
    rules = entry["rules"]
    assert {r["algorithm"] for r in rules} <= {ONE, TWO}
    assert all(r["max_bytes"] in sizes for r in rules[:-1]) and rules[-1]["max_bytes"] is None
    for r in rules:
        assert r.get("blocks") == (8 if r["algorithm"] == TWO else None)

    (coll,) = raw["ours"]["collectives"]
    assert [p["size"] for p in coll["points"]] == sizes
    assert_all_verified(coll)
    lines = progress_lines(stdout)
    assert len(lines) == len(sizes) and all("-> best " in line for line in lines)
    assert "estimated" in stdout and "left]" in lines[-1]
    if importlib.util.find_spec("matplotlib") is not None:
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    else:  # the table is still written; the plot is skipped with a message
        assert "matplotlib is not installed" in stdout and not png.exists()


@pytest.mark.gpu
def test_tune_default_grid_every_collective(tmp_path: Path, nccl_lib: Path) -> None:
    out = tmp_path / "tuning.json"
    args = [
        "-b",
        "64K",
        "-e",
        "1M",
        "-f",
        "16",
        "--replays",
        "2",
        "--calls-per-graph",
        "2",
        "--out",
        str(out),
    ]
    stdout, raw = run_tune(args, tmp_path, timeout=1200)
    ours = raw["ours"]
    assert [c["collective"] for c in ours["collectives"]] == list(COLLECTIVES)
    for coll_doc in ours["collectives"]:
        expected = [c.spec for c in default_candidates(coll_doc["collective"], ours["max_blocks"])]
        assert [c["spec"] for c in coll_doc["candidates"]] == expected
        assert_all_verified(coll_doc)
    table = load_table(str(out))
    assert sorted(e["collective"] for e in table["entries"]) == sorted(COLLECTIVES)
    assert len(progress_lines(stdout)) == 2 * len(COLLECTIVES)


@pytest.mark.gpu
def test_tune_against_stock(tmp_path: Path, nccl_lib: Path) -> None:
    lib, why = stock_lib()
    if lib is None:
        pytest.skip(why)
    out = tmp_path / "tuning.json"
    args = ["--collectives", "all_reduce", "-b", "8", "-e", "64K", "-f", "8", "--candidates", ONE]
    args += ["--replays", "3", "--calls-per-graph", "4", "--out", str(out), "--stock-lib", str(lib)]
    stdout, raw = run_tune(args, tmp_path)
    assert "# timing stock NCCL" in stdout
    stock = raw["stock"]
    assert stock is not None and stock["stock"] is True and stock["library"] == str(lib)
    (coll,) = stock["collectives"]
    assert [p["size"] for p in coll["points"]] == size_series(8, 64 << 10, 8, 0)
    assert_all_verified(coll)
    assert load_table(str(out))["entries"][0]["rules"] == [{"max_bytes": None, "algorithm": ONE}]
