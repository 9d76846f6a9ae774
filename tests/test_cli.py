"""`python -m mscclpp_nccl {path,info,selfcheck}` without a GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "mscclpp_nccl", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
        check=False,
    )


def test_path_prints_only_the_library_path(nccl_lib: Path) -> None:
    r = cli("path")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"{nccl_lib}\n"


def test_path_follows_the_override(tmp_path: Path) -> None:
    target = tmp_path / "libnccl.so.2"
    r = cli("path", env={"MSCCLPP_NCCL_LIB": str(target)})
    assert r.stdout.strip() == str(target)


def test_info_shows_version(nccl_lib: Path) -> None:
    r = cli("info")
    assert r.returncode == 0, r.stdout + r.stderr
    assert str(nccl_lib) in r.stdout
    assert "2.32.3" in r.stdout and "23203" in r.stdout
    assert "NCCL API:  2.32" in r.stdout
    assert "GPUs:" in r.stdout


def test_selfcheck_without_gpu_says_so() -> None:
    # CUDA_VISIBLE_DEVICES="" hides every GPU, so this holds on a GPU machine too.
    r = cli("selfcheck", env={"CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no NVIDIA GPU visible; nothing to run" in r.stdout
    assert "library:" in r.stdout


def test_unknown_command_fails() -> None:
    assert cli("frobnicate").returncode != 0
