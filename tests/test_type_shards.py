"""CPU test of the kernel sources' type shards (native/algorithms/type_shards.cuh): every call's launcher
looks for its kernel in the shard that compiles it, for every collective, element type, operator and
reduce flag, and no shard is left empty. A mismatch would fail the call's launch on a GPU; here it fails
on any machine with nvcc."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


def test_launchers_look_where_kernels_are_compiled(setup_py: ModuleType, tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    program = tmp_path / "type_shards_check"
    build = [nvcc, "-std=c++17", "--expt-relaxed-constexpr", f"-I{ROOT}", f"-I{ROOT / 'include'}"]
    build += [str(ROOT / "tests" / "type_shards_check.cu"), "-o", str(program)]
    subprocess.run(build, check=True, capture_output=True, text=True)
    run = subprocess.run([str(program)], capture_output=True, text=True)
    assert run.returncode == 0, run.stdout
    calls = [int(m) for m in re.findall(r"^shard \d+: (\d+) calls$", run.stdout, re.M)]
    assert len(calls) == setup_py.type_shards() and all(n > 0 for n in calls), run.stdout
