"""CPU test of concurrent deregistration (shim/live_handles.h as shim/memory.cc uses it, through
tests/deregister_race_driver.cc under AddressSanitizer): one thread deregisters a handle while another
is still checking it, to deregister it too or to read it. Exactly one deregistration wins, the other is
refused, and nothing reads a freed handle."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = ["tests/deregister_race_driver.cc"]
ROUNDS = 40  # even


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("deregister") / "deregister_race_driver"
    return build_driver(out, SOURCES, ["0"], 0, ["-pthread"])


def test_deregister_race_one_wins_and_nothing_reads_freed_memory(driver: Path) -> None:
    proc = subprocess.run(
        [str(driver), str(ROUNDS)], capture_output=True, text=True, env=driver_env(), timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.search(r"rounds (\d+) won (\d+) lost (\d+) read (\d+)", proc.stdout)
    assert m, proc.stdout + proc.stderr
    rounds, won, lost, read = (int(g) for g in m.groups())
    # Even rounds race two deregistrations (one loses), odd ones a read and a deregistration (both
    # succeed: the read finishes first).
    assert (rounds, won, lost, read) == (ROUNDS, ROUNDS, ROUNDS // 2, ROUNDS // 2)
