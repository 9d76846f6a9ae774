"""CPU test of the variable the private stock NCCL needs during its init (native/fallback/init_variable.cc,
through tests/init_variable_driver.cc): held by every concurrent init of a process without a lock
between them (members of one stock communicator in one process initialise together, and a lock held
across one init deadlocked the others), set only where the user left it unset, and gone afterwards."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = ["tests/init_variable_driver.cc", "native/fallback/init_variable.cc"]
NAME = "MSCCLPP_NCCL_TEST_INIT_VARIABLE"


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(tmp_path_factory.mktemp("init_variable") / "driver", SOURCES, [], 0)


def run(driver: Path, threads: int, needed: bool, user_value: str | None = None) -> list[str]:
    env = driver_env()
    env.pop(NAME, None)
    if user_value is not None:
        env[NAME] = user_value
    proc = subprocess.run(
        [str(driver), str(threads), "1" if needed else "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


@pytest.mark.parametrize("threads", [1, 2, 8])
def test_every_concurrent_init_sees_it_and_it_is_gone_after(driver: Path, threads: int) -> None:
    lines = run(driver, threads, needed=True)
    assert sorted(lines[:-1]) == sorted(f"thread {t} saw 1" for t in range(threads))
    assert lines[-1] == "after <unset>"


def test_a_value_the_user_set_is_kept(driver: Path) -> None:
    lines = run(driver, 4, needed=True, user_value="0")
    assert all(line.endswith("saw 0") for line in lines[:-1]), lines
    assert lines[-1] == "after 0"


def test_not_needed_sets_nothing(driver: Path) -> None:
    lines = run(driver, 3, needed=False)
    assert all(line.endswith("saw <unset>") for line in lines[:-1]), lines
    assert lines[-1] == "after <unset>"
