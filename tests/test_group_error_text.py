"""CPU test of the error text of a failed group (shim/group.cc, through tests/group_error_text_driver.cc):
work queued for ncclGroupEnd runs on threads of the group's own, and the text of a failure there is
per-thread. ncclGroupEnd must hand it to the calling thread, so that ncclGetLastError explains the
failure instead of being empty or stale."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from host_build import REPO, build_driver, driver_env

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stock_nccl import require_cuda_include

SOURCES = [
    "shim/group.cc",
    "native/common/threads.cc",
    "native/common/parameters.cc",
    "native/common/env.cc",
    "native/common/logging.cc",
    "tests/group_error_text_driver.cc",
]
INVALID_USAGE = 5
INTERNAL_ERROR = 3


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("group_error") / "group_error_text_driver"
    flags = ["-iquote", str(REPO / "tests" / "stubs"), require_cuda_include(), "-pthread"]
    return build_driver(out, SOURCES, ["none"], 0, flags)


def run(driver: Path, case: str) -> tuple[int, str]:
    proc = subprocess.run(
        [str(driver), case], capture_output=True, text=True, env=driver_env(), timeout=60, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    m = re.fullmatch(r"result (-?\d+) error <(.*)>\n", proc.stdout)
    assert m, proc.stdout + proc.stderr
    return int(m.group(1)), m.group(2)


@pytest.mark.parametrize("case", ["fail", "mixed"])
def test_group_error_text_reaches_the_caller(driver: Path, case: str) -> None:
    assert run(driver, case) == (INVALID_USAGE, "queued work failed on its own thread")


def test_group_error_text_of_an_exception_reaches_the_caller(driver: Path) -> None:
    result, text = run(driver, "throw")
    assert result == INTERNAL_ERROR
    assert "thrown by queued work" in text


def test_group_error_text_is_left_alone_when_nothing_fails(driver: Path) -> None:
    assert run(driver, "none") == (0, "stale text of an earlier call")
