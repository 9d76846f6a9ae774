"""CPU tests that a refused thread never ends the process (native/common/threads.cc, through
tests/thread_failure_driver.cc, whose pthread_create fails with EAGAIN after a given number of
threads). std::thread throws std::system_error then, and an exception that leaves a thread body calls
std::terminate; the library turns both into an error code, a log line, or the work run on the caller."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = [
    "tests/thread_failure_driver.cc",
    "tests/thread_refusal.cc",
    "native/common/threads.cc",
    "native/common/parameters.cc",
    "native/common/env.cc",
    "native/common/logging.cc",
]
SYSTEM_ERROR = 2  # Status::kSystemError, ncclSystemError


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("thread_failure") / "thread_failure_driver"
    return build_driver(out, SOURCES, [], 2, ["-pthread"])


def run(driver: Path, mode: str, allowed: int | None) -> str:
    env = driver_env() | {"NCCL_DEBUG": "WARN"}
    if allowed is not None:
        env["MSCCLPP_TEST_THREADS_ALLOWED"] = str(allowed)
    done = subprocess.run(
        [str(driver), mode], capture_output=True, text=True, env=env, timeout=30, check=False
    )
    report = f"exit {done.returncode}\nstdout:\n{done.stdout}\nstderr:\n{done.stderr}"
    assert done.returncode == 0 and "DONE" in done.stdout, report
    return done.stdout + done.stderr


def test_thread_failure_is_an_error_code(driver: Path) -> None:
    out = run(driver, "start", 0)
    assert f"STATUS {SYSTEM_ERROR} ran 0 driver: cannot start a thread" in out, out


def test_thread_failure_runs_concurrent_tasks_on_the_caller(driver: Path) -> None:
    """The abort of a multi-host communicator fans out this way (from a destructor too): with no thread
    to be had, every task still runs, on the caller, and a warning says so."""
    for allowed, inline in ((0, 3), (1, 2)):
        out = run(driver, "concurrent", allowed)
        assert f"RAN 3 INLINE {inline}" in out, out
        assert re.search(rf"{inline} of 3 tasks run one after another", out), out
    assert "RAN 3 INLINE 0" in run(driver, "concurrent", None)


def test_thread_failure_of_the_body_is_logged(driver: Path) -> None:
    out = run(driver, "throw", None)
    assert "SURVIVED 0" in out and "helper thread ended with an exception: thrown by the body" in out, out
