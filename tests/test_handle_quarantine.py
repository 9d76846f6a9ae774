"""CPU test of the destroyed-handle quarantine (shim/handle_quarantine.h, through
tests/handle_quarantine_driver.cc): a destroyed communicator handle stays valid memory for the next
1024 destroys, so that a stale handle is reported as an error, and is freed after that, so that a
program that creates and destroys communicators without end stays bounded; a handle still in use (its
initialisation thread still running) is freed only once that use ends."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = ["tests/handle_quarantine_driver.cc"]
DEPTH = 1024  # kDestroyedHandlesKept in shim/comm_handle.h


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("quarantine") / "handle_quarantine_driver"
    return build_driver(out, SOURCES, ["4", "10"], 0, ["-pthread"])


def run(driver: Path, depth: int, count: int) -> tuple[int, int, int, int]:
    proc = subprocess.run(
        [str(driver), str(depth), str(count)], capture_output=True, text=True, env=driver_env(), check=True
    )
    m = re.search(r"freed (\d+) held (\d+) newest_freed (-?\d+)\nafter delete freed (\d+)", proc.stdout)
    assert m, proc.stdout + proc.stderr
    freed, held, newest, after = (int(g) for g in m.groups())
    return freed, held, newest, after


def test_the_shipped_depth_matches_the_header() -> None:
    header = (Path(__file__).resolve().parents[1] / "shim" / "comm_handle.h").read_text()
    assert f"constexpr size_t kDestroyedHandlesKept = {DEPTH};" in header


@pytest.mark.parametrize("count", [10, DEPTH, 5000])
def test_the_newest_handles_stay_and_the_oldest_are_freed(driver: Path, count: int) -> None:
    freed, held, newest, after = run(driver, DEPTH, count)
    assert held == min(count, DEPTH)
    assert freed == count - held
    # Only the oldest go: nothing among the newest DEPTH was freed. Four threads add at once, so a
    # serial may land out of order by at most the serials the other threads hold (three).
    assert newest < count - DEPTH + 3 if freed else newest == -1
    assert after == count


@pytest.mark.parametrize("count", [DEPTH + 1, 5000])
def test_quarantine_in_use_handle_is_kept_until_its_use_ends(driver: Path, count: int) -> None:
    """A handle destroyed while its initialisation thread still runs stays, however many handles are
    destroyed after it, and is freed once that thread is done."""
    proc = subprocess.run(
        [str(driver), str(DEPTH), str(count), "in_use"],
        capture_output=True,
        text=True,
        env=driver_env(),
        timeout=60,
        check=True,
    )
    assert proc.stdout == "in_use freed 0\nafter_use freed 1\n", proc.stdout + proc.stderr
