"""CPU tests of the TCP bootstrap: the C++ driver (tests/bootstrap_driver.cc) is built with g++ and run as
several processes. No GPU or CUDA is needed."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
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
    try:
        for proc in strangers:  # the strangers get in first
            assert proc.stdout is not None and proc.stdout.readline().strip() == "CONNECTED"
        results = _run_ranks(driver, str(id_file), range(4), 4, env)
        for proc in strangers:
            # Read through the same buffered stream as readline (communicate with a timeout bypasses it).
            rc = proc.wait(timeout=30)
            out = proc.stdout.read() if proc.stdout else ""
            assert rc == 0 and "OK stranger dropped" in out, out
    finally:
        for proc in strangers:
            proc.kill()
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


def test_abort_link_ends_a_rendezvous_in_progress(driver: Path) -> None:
    """What ncclCommAbort of a parent does to a split's child still in its rendezvous."""
    rc, out = _finish(_start([driver, "abortlink"], _env()), 30)
    assert rc == 0 and "OK abortlink" in out, out


# --- peer loss --------------------------------------------------------------------------------------

DETECT_LIMIT_NS = 1_000_000_000  # the failure contract: survivors know within a second


class _Watchers:
    """N `driver watch` processes of one rendezvous, each with its behaviour."""

    def __init__(self, driver: Path, tmp_path: Path, behaviours: Sequence[str]) -> None:
        self.dir = tmp_path
        env = _env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30")
        id_file = tmp_path / "uid"
        self.root = _start([driver, "uid", id_file, "60"], env)
        n = len(behaviours)
        self.procs = [
            _start([driver, "watch", id_file, str(r), str(n), tmp_path, b], env)
            for r, b in enumerate(behaviours)
        ]

    def wait_ready(self) -> None:
        deadline = time.monotonic() + 30
        while not all((self.dir / f"ready.{r}").exists() for r in range(len(self.procs))):
            for r, p in enumerate(self.procs):
                # A rank may end at once after it is ready (exit, quit): only an earlier end is wrong.
                if p.poll() is not None and not (self.dir / f"ready.{r}").exists():
                    raise AssertionError(f"rank {r} ended before it was ready: {_finish(p, 5)[1]}")
            assert time.monotonic() < deadline, "the ranks never got ready"
            time.sleep(0.02)

    def kill(self, rank: int) -> int:
        """SIGKILLs the rank's process; returns CLOCK_MONOTONIC ns taken just before."""
        before = time.monotonic_ns()
        self.procs[rank].kill()
        return before

    def finish(self) -> list[tuple[int, str]]:
        try:
            return [_finish(p, RANK_TIMEOUT_S) for p in self.procs]
        finally:
            self.root.kill()
            self.root.communicate()


def _lost(out: str) -> list[tuple[int, int]]:
    """The (peer, ns) of every LOST line."""
    return [(int(m[1]), int(m[2])) for m in re.finditer(r"^LOST (-?\d+) (\d+)$", out, re.MULTILINE)]


@pytest.mark.parametrize("victim_behaviour", ["hang", "fork-hang"])
def test_killed_peer_is_reported_within_a_second(driver: Path, tmp_path: Path, victim_behaviour: str) -> None:
    """Rank 2 of 4 is killed with SIGKILL while the others wait for it in a barrier: each survivor's
    handler names rank 2 within a second, and its barrier fails (kRemoteError) within a second too.
    With fork-hang a forked child holds copies of the victim's sockets, as a DataLoader worker would."""
    victim = 2
    behaviours = ["barrier"] * 4
    behaviours[victim] = victim_behaviour
    ranks = _Watchers(driver, tmp_path, behaviours)
    child = None
    try:
        ranks.wait_ready()
        if victim_behaviour == "fork-hang":
            child = int((tmp_path / f"child.{victim}").read_text())
        time.sleep(0.3)  # the survivors are in their barrier by now
        killed_at = ranks.kill(victim)
        if child is not None:
            # Past the detection limit: a detection that needed the child gone fails the check below.
            time.sleep(1.2)
            os.kill(child, signal.SIGKILL)
        results = ranks.finish()
    finally:
        if child is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child, signal.SIGKILL)
    for rank, (rc, out) in enumerate(results):
        if rank == victim:
            continue
        assert rc == 0 and f"DONE rank {rank}" in out, f"rank {rank} (rc {rc}): {out}"
        lost = _lost(out)
        assert [peer for peer, _ in lost] == [victim], f"rank {rank}: {out}"
        detect_ns = lost[0][1] - killed_at
        assert 0 <= detect_ns < DETECT_LIMIT_NS, f"rank {rank}: detected after {detect_ns / 1e6:.1f} ms"
        m = re.search(r"^BARRIER (\d+) (\d+)$", out, re.MULTILINE)
        assert m, f"rank {rank}: {out}"
        assert int(m[1]) == 6, f"rank {rank}: barrier ended with status {m[1]}, expected kRemoteError"
        assert int(m[2]) - killed_at < DETECT_LIMIT_NS, f"rank {rank}: barrier failed late: {out}"


@pytest.mark.parametrize(
    ("behaviour", "reported"),
    [("leave", False), ("exit", False), ("quit", True)],
    ids=["destroyed", "exit-without-destroy", "_exit-without-goodbye"],
)
def test_orderly_departure_is_no_loss(driver: Path, tmp_path: Path, behaviour: str, reported: bool) -> None:
    """Rank 1 of 3 leaves: by destroying its bootstrap, or by exit() with it never destroyed (the
    exit-time goodbye). Neither is a loss. _exit() skips the goodbye, so that one must be reported:
    it shows the other two cases pass for the right reason."""
    behaviours = ["linger", behaviour, "linger"]
    ranks = _Watchers(driver, tmp_path, behaviours)
    ranks.wait_ready()
    results = ranks.finish()
    rc, out = results[1]
    assert rc == 0, f"rank 1 (rc {rc}): {out}"
    for rank in (0, 2):
        rc, out = results[rank]
        assert rc == 0 and f"DONE rank {rank}" in out, f"rank {rank} (rc {rc}): {out}"
        expected = [1] if reported else []
        assert [peer for peer, _ in _lost(out)] == expected, f"rank {rank}: {out}"
