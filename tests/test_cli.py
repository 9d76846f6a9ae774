"""`python -m mscclpp_nccl {path,info,selfcheck,--version}` without a GPU."""

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
    target.write_bytes(b"")
    r = cli("path", env={"MSCCLPP_NCCL_LIB": str(target)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == str(target)


def test_path_of_a_missing_library_fails(tmp_path: Path) -> None:
    """Nothing on stdout: LD_PRELOAD=$(python -m mscclpp_nccl path) must not name a file the loader skips."""
    target = tmp_path / "libnccl.so.2"
    r = cli("path", env={"MSCCLPP_NCCL_LIB": str(target)})
    assert r.returncode == 1
    assert r.stdout == ""
    assert str(target) in r.stderr and "no such file" in r.stderr


def test_version_names_the_package_and_the_abi() -> None:
    from mscclpp_nccl import __version__

    r = cli("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout == f"mscclpp-nccl {__version__}, NCCL ABI 2.32.3\n"


def test_info_shows_version(nccl_lib: Path) -> None:
    r = cli("info")
    assert r.returncode == 0, r.stdout + r.stderr
    assert str(nccl_lib) in r.stdout
    assert "2.32.3" in r.stdout and "23203" in r.stdout
    assert "NCCL API:  2.32" in r.stdout
    from mscclpp_nccl import __version__

    assert r.stdout.startswith(f"package:   mscclpp-nccl {__version__}\n")
    assert "GPUs:" in r.stdout


def test_selfcheck_without_gpu_says_so() -> None:
    # CUDA_VISIBLE_DEVICES="" hides every GPU, so this holds on a GPU machine too. Nothing was checked:
    # exit 3, never 0.
    r = cli("selfcheck", env={"CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 3, r.stdout + r.stderr
    assert "nothing checked: no NVIDIA GPU visible" in r.stderr
    assert "library:" in r.stdout


def test_unknown_command_fails() -> None:
    assert cli("frobnicate").returncode != 0
