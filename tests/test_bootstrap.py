"""CPU tests of the TCP bootstrap: the C++ driver (tests/bootstrap_driver.cc) is built with g++ and run as
several processes. No GPU or CUDA is needed."""

from __future__ import annotations

import os
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SOURCES = [
    *sorted((REPO / "native" / "bootstrap").glob("*.cc")),
    *sorted((REPO / "native" / "common").glob("*.cc")),
    REPO / "tests" / "bootstrap_driver.cc",
]
RANK_TIMEOUT_S = 60


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is not installed")
    out = tmp_path_factory.mktemp("bootstrap") / "bootstrap_driver"
    cmd = [compiler, "-std=c++17", "-O2", "-Wall", "-Wextra", f"-I{REPO}", "-pthread"]
    cmd += [str(s) for s in SOURCES] + ["-o", str(out)]
    subprocess.run(cmd, check=True, timeout=300)
    return out


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_") and not k.startswith("MSCCLPP_")}
    env.update(extra)
    return env


def _start(args: Sequence[str | os.PathLike[str]], env: dict[str, str]) -> subprocess.Popen[str]:
    cmd = [os.fspath(a) for a in args]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _finish(proc: subprocess.Popen[str], timeout: float) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return -9, out + "\n<killed: timed out>"
    return proc.returncode, out


@pytest.fixture
def root(driver: Path, tmp_path: Path) -> Iterator[tuple[Path, subprocess.Popen[str]]]:
    """A process that created an id (written to a file) and serves it; stopped after the test."""
    id_file = tmp_path / "uid"
    proc = _start([driver, "uid", id_file, "120"], _env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30"))
    yield id_file, proc
    proc.kill()
    proc.communicate()


def _run_ranks(
    driver: Path, id_arg: str, ranks: Sequence[int], nranks: int, env: dict[str, str]
) -> list[tuple[int, str]]:
    procs = [_start([driver, "rank", id_arg, str(r), str(nranks)], env) for r in ranks]
    return [_finish(p, RANK_TIMEOUT_S) for p in procs]


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _assert_all_ok(results: Sequence[tuple[int, str]]) -> None:
    for rank, (rc, out) in enumerate(results):
        assert rc == 0 and f"OK rank {rank}" in out, f"rank {rank} (rc {rc}): {out}"


def test_four_ranks(driver: Path, root: tuple[Path, subprocess.Popen[str]]) -> None:
    id_file, _ = root
    _assert_all_ok(_run_ranks(driver, str(id_file), range(4), 4, _env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30")))


def test_ranks_as_threads_of_one_process(driver: Path) -> None:
    rc, out = _finish(_start([driver, "threads", "4"], _env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30")), 60)
    assert rc == 0, out
    assert all(f"OK rank {r}" in out for r in range(4)), out


def test_stranger_is_dropped(driver: Path, root: tuple[Path, subprocess.Popen[str]]) -> None:
    id_file, _ = root
    env = _env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30")
    strangers = [
        _start([driver, "stranger", id_file], env),
        _start([driver, "stranger", id_file, "silent"], env),
    ]
    time.sleep(0.3)  # let the strangers get in first
    results = _run_ranks(driver, str(id_file), range(4), 4, env)
    for proc in strangers:
        rc, out = _finish(proc, 30)
        assert rc == 0 and "OK stranger dropped" in out, out
    _assert_all_ok(results)


def test_missing_rank_fails_and_names_it(driver: Path, tmp_path: Path) -> None:
    env = _env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="3")
    id_file = tmp_path / "uid"
    server = _start([driver, "uid", id_file, "60"], env)
    try:
        start = time.monotonic()
        results = _run_ranks(driver, str(id_file), range(3), 4, env)
        elapsed = time.monotonic() - start
    finally:
        server.kill()
        server.communicate()
    assert elapsed < 20, f"took {elapsed:.1f} s"
    for rank, (rc, out) in enumerate(results):
        assert rc != 0, f"rank {rank} succeeded without rank 3: {out}"
        assert re.search(r"ranks? 3 of 4 never arrived", out), f"rank {rank}: {out}"


def test_nccl_comm_id(driver: Path) -> None:
    env = _env(NCCL_COMM_ID=f"127.0.0.1:{_free_port()}", MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30")
    _assert_all_ok(_run_ranks(driver, "-", range(4), 4, env))


def test_abort_unblocks_pending_calls(driver: Path) -> None:
    rc, out = _finish(_start([driver, "abort"], _env()), 30)
    assert rc == 0 and "OK abort" in out, out
