"""CPU tests of how NCCL_DEBUG_FILE is opened (native/common/logging.cc, through tests/debug_file_driver.cc):
a name that another local user can plant (a symlink, a hard link, an existing file) must neither be
followed nor truncated, a new file is 0644 whatever the umask, and children do not inherit it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = ["tests/debug_file_driver.cc", "native/common/logging.cc"]
LINE = "NCCL WARN debug file driver"
PRECIOUS = "precious contents\n"


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(tmp_path_factory.mktemp("debug_file") / "debug_file_driver", SOURCES, [], 0)


def run(driver: Path, log: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = driver_env() | {"NCCL_DEBUG": "WARN", "NCCL_DEBUG_FILE": str(log)}
    return subprocess.run(
        [str(driver), *args], capture_output=True, text=True, env=env, timeout=30, check=False
    )


def test_debug_file_symlink_is_not_followed(driver: Path, tmp_path: Path) -> None:
    """A symlink planted at the log's name (to a file its owner cares about) is neither followed nor
    truncated: the target keeps its contents, and the log goes to stderr with a warning."""
    target = tmp_path / "victim"
    target.write_text(PRECIOUS)
    log = tmp_path / "nccl.log"
    log.symlink_to(target)
    done = run(driver, log)
    assert done.returncode == 0, done.stderr
    assert target.read_text() == PRECIOUS
    assert log.is_symlink()
    assert "cannot open NCCL_DEBUG_FILE" in done.stderr and LINE in done.stderr, done.stderr


def test_debug_file_symlink_to_a_missing_file_creates_nothing(driver: Path, tmp_path: Path) -> None:
    """A dangling symlink would let its planter choose where a new file appears: not created."""
    target = tmp_path / "chosen"
    log = tmp_path / "nccl.log"
    log.symlink_to(target)
    done = run(driver, log)
    assert done.returncode == 0, done.stderr
    assert not target.exists()
    assert LINE in done.stderr, done.stderr


def test_debug_file_existing_file_is_appended_not_truncated(driver: Path, tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    log.write_text(PRECIOUS)
    done = run(driver, log)
    assert done.returncode == 0, done.stderr
    text = log.read_text()
    assert text.startswith(PRECIOUS) and LINE in text, text


def test_debug_file_hard_link_is_refused(driver: Path, tmp_path: Path) -> None:
    """A second name for someone's file (a hard link) is not written to."""
    target = tmp_path / "victim"
    target.write_text(PRECIOUS)
    log = tmp_path / "nccl.log"
    os.link(target, log)
    done = run(driver, log)
    assert done.returncode == 0, done.stderr
    assert target.read_text() == PRECIOUS
    assert LINE in done.stderr, done.stderr


def test_debug_file_new_file_is_0644_and_not_inherited(driver: Path, tmp_path: Path) -> None:
    log = tmp_path / "nccl.log"
    old = os.umask(0)  # the driver inherits it: the mode must come from the library, not the umask
    try:
        done = run(driver, log, "exec")
    finally:
        os.umask(old)
    assert done.returncode == 0, done.stderr
    assert LINE in log.read_text()
    assert log.stat().st_mode & 0o777 == 0o644
    assert str(log) not in done.stdout, done.stdout  # the exec'd ls did not inherit the log
