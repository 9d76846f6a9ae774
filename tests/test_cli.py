"""`python -m mscclpp_nccl {path,info,selfcheck,--version}` without a GPU, and how the tools report."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest


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


def test_info_shows_the_parameters_set(nccl_lib: Path) -> None:
    from mscclpp_nccl.binding import Nccl

    cleared = dict.fromkeys(Nccl.load(nccl_lib).parameters(), "")  # empty counts as unset
    r = cli("info", env=cleared)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "settings:  none (every parameter at its default)\n" in r.stdout, r.stdout
    env = {**cleared, "MSCCLPP_NCCL_SCRATCH_BYTES": "1048576", "MSCCLPP_NCCL_ZERO_COPY": "no"}
    r = cli("info", env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    # As the library reads them: an unparsable value counts as the default.
    assert "settings:  MSCCLPP_NCCL_SCRATCH_BYTES=1048576\n" in r.stdout, r.stdout
    assert "           MSCCLPP_NCCL_ZERO_COPY=1\n" in r.stdout, r.stdout


def test_selfcheck_without_gpu_says_so() -> None:
    # CUDA_VISIBLE_DEVICES="" hides every GPU, so this holds on a GPU machine too. Nothing was checked:
    # exit 3, never 0.
    r = cli("selfcheck", env={"CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 3, r.stdout + r.stderr
    assert "nothing checked: no NVIDIA GPU visible" in r.stderr
    assert "library:" in r.stdout


def test_unknown_command_fails() -> None:
    assert cli("frobnicate").returncode != 0


def test_diagnostics_are_log_lines_on_stderr() -> None:
    """What a tool says about its run goes through logging (`LOGGER: LEVEL: message`) on stderr; stdout
    holds only what it produces."""
    r = cli("bench", "all_reduce", env={"CUDA_VISIBLE_DEVICES": ""})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "mscclpp_nccl.bench: ERROR: no NVIDIA GPU visible; nothing to benchmark\n"


def test_the_log_follows_a_replaced_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    from mscclpp_nccl._cli import configure_logging

    configure_logging()
    configure_logging()  # once is enough: no line twice
    logging.getLogger("mscclpp_nccl.run").info("a note")
    logging.getLogger("mscclpp_nccl.run").debug("not shown")
    assert capsys.readouterr().err == "mscclpp_nccl.run: INFO: a note\n"
