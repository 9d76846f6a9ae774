"""CPU tests of passing file descriptors between ranks (native/transport/fd_passing.cc, which windows use
for cuMem memory): tests/fd_passing_driver.cc, built with g++, runs as several processes over the TCP
bootstrap and hands each peer a memfd whose contents it reads back. No GPU or CUDA is needed.

The stranger tests run this file as a script (`stranger` mode): a local process, of our uid or of
nobody's, that finds the descriptor socket in /proc/net/unix the way an attacker would, connects while
the exchange waits for a late rank, and reports whether it was dropped and whether it got a descriptor."""

from __future__ import annotations

import os
import re
import resource
import selectors
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = [
    "native/bootstrap/abort_link.cc",
    "native/bootstrap/bootstrap.cc",
    "native/bootstrap/handshake.cc",
    "native/bootstrap/rendezvous.cc",
    "native/bootstrap/socket.cc",
    "native/common/env.cc",
    "native/common/parameters.cc",
    "native/common/json.cc",
    "native/common/logging.cc",
    "native/common/threads.cc",
    "native/transport/fd_passing.cc",
    "native/transport/unix_socket.cc",
    "tests/fd_passing_driver.cc",
    "tests/thread_refusal.cc",
]
RANK_TIMEOUT_S = 60
LATE_MS = 1500  # how long the late rank keeps the exchange open for the stranger
STRANGER_WAIT_S = 30.0
NOBODY = 65534
FLOOD_S = LATE_MS / 1000 + 2.5  # how long the flooder keeps the backlog full: past the late rank's exchange


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fd_passing") / "fd_passing_driver"
    return build_driver(out, SOURCES, [], 2, ["-pthread"])


def run_ranks(
    driver: Path, idfile: Path, nranks: int, extra: list[str], env: dict[str, str]
) -> list[tuple[int, str]]:
    """Runs every rank of the driver to completion: (exit code, output) per rank."""
    procs = [
        subprocess.Popen(
            [str(driver), str(idfile), str(r), str(nranks), *extra],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(nranks)
    ]
    outputs = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=RANK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0] + "\n<killed: timed out>"
        outputs.append((proc.returncode, out))
    return outputs


def assert_all_ok(outputs: list[tuple[int, str]]) -> None:
    for rank, (code, out) in enumerate(outputs):
        assert code == 0 and f"OK rank {rank}" in out, f"rank {rank} exited {code}:\n{out}"


@pytest.mark.parametrize("nranks,silent", [(2, -1), (4, -1), (5, 2)])
def test_every_rank_gets_every_peers_descriptor(
    driver: Path, tmp_path: Path, nranks: int, silent: int
) -> None:
    assert_all_ok(run_ranks(driver, tmp_path / "id", nranks, [str(silent)], driver_env()))


def descriptor_sockets() -> set[str]:
    """The abstract unix socket names ("@...") of descriptor passing on this host, as anyone can list them."""
    with open("/proc/net/unix") as table:
        return {line.split()[-1] for line in table if line.split()[-1].startswith("@mscclpp-nccl.")}


def next_socket(before: set[str]) -> str | None:
    """The address of the first descriptor socket not in `before` to appear, or None after a while."""
    deadline = time.monotonic() + STRANGER_WAIT_S
    while not (new := descriptor_sockets() - before):
        if time.monotonic() > deadline:
            print("RESULT no descriptor socket appeared", flush=True)
            return None
        time.sleep(0.002)
    return "\0" + min(new)[1:]


def stranger(action: str, uid: int) -> None:
    """Script mode: connects to the next descriptor socket that appears and sends `action`'s bytes, then
    prints how the connection ended and how many descriptors came."""
    before = descriptor_sockets()
    if uid >= 0:  # a fork of root that drops to another user before it connects
        os.setgroups([])
        os.setgid(uid)
        os.setuid(uid)
    print(f"READY pid {os.getpid()} uid {os.geteuid()}", flush=True)
    if (address := next_socket(before)) is None:
        return
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(address)
    payload = {"nothing": b"", "byte": b"x", "hello": os.urandom(16)}[action]
    if payload:
        conn.sendall(payload)
    connected = time.monotonic()
    print("CONNECTED", flush=True)
    conn.settimeout(STRANGER_WAIT_S)
    fds: list[int] = []
    received = 0
    outcome = "eof"
    try:
        while True:
            data, got, _, _ = socket.recv_fds(conn, 64, 4)
            fds += got
            received += len(data)
            if not data:
                break
    except OSError as error:  # a timeout included: the server kept it waiting
        outcome = type(error).__name__
    for fd in fds:
        os.close(fd)
    after = time.monotonic() - connected
    print(f"RESULT {outcome} after {after:.3f} s fds {len(fds)} bytes {received}", flush=True)


def flooder() -> None:
    """Script mode: fills the backlog of the next descriptor socket that appears (connecting until the
    kernel says it is full), then keeps it full for FLOOD_S, connecting again whenever the server drops a
    connection. Prints how many it held and how many the server dropped."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 16384)), hard))
    before = descriptor_sockets()
    print(f"READY pid {os.getpid()}", flush=True)
    if (address := next_socket(before)) is None:
        return
    watch = selectors.DefaultSelector()

    def connect() -> bool:
        nonlocal full
        try:
            conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        except OSError:  # out of descriptors: the backlog holds all this process could open
            return False
        conn.setblocking(False)
        try:
            conn.connect(address)
        except OSError as error:
            full = full or isinstance(error, BlockingIOError)  # EAGAIN: the backlog is full
            conn.close()
            return False
        watch.register(conn, selectors.EVENT_READ)
        return True

    full = False
    while connect():
        pass
    held = len(watch.get_map())
    print(f"FILLED {held} {'full' if full else 'out of descriptors'}", flush=True)
    dropped = 0
    stop = time.monotonic() + FLOOD_S
    while time.monotonic() < stop:
        for key, _ in watch.select(timeout=0.01):
            watch.unregister(key.fileobj)
            key.fileobj.close()
            dropped += 1
        while connect():
            pass
    print(f"RESULT held {held} dropped {dropped}", flush=True)


def exchange_beside(
    driver: Path, tmp_path: Path, script: list[str], more_env: dict[str, str] | None = None
) -> tuple[str, list[tuple[int, str]], str]:
    """Runs this file in `script` mode beside two ranks, of which only rank 0 offers and rank 1 comes
    LATE_MS late: (what the script said, each rank's exit code and output, a report of all three)."""
    args = [sys.executable, __file__, *script]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    ready = proc.stdout.readline()
    assert ready.startswith("READY"), ready
    env = driver_env() | {"NCCL_DEBUG": "WARN", "MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT": "10"} | (more_env or {})
    outputs = run_ranks(driver, tmp_path / "id", 2, ["1", "1", str(LATE_MS)], env)
    try:
        said = ready + proc.communicate(timeout=STRANGER_WAIT_S + 10)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        said = ready + proc.communicate()[0] + "\n<killed: timed out>"
    return said, outputs, f"{script[0]}:\n{said}\nrank 0:\n{outputs[0][1]}\nrank 1:\n{outputs[1][1]}"


def test_fd_backlog_filled_by_a_stranger_still_exchanges(driver: Path, tmp_path: Path) -> None:
    """A local process fills the offering rank's backlog before the late rank comes and keeps it full:
    the late rank retries, the server drains the strangers meanwhile, and the descriptor still passes
    (with a backlog of nranks, the late rank once found it full and silently copied through scratch)."""
    said, outputs, report = exchange_beside(driver, tmp_path, ["flood"])
    filled = re.search(r"FILLED (\d+)", said)
    assert filled and int(filled.group(1)) > 0, report
    assert_all_ok(outputs)
    result = re.search(r"RESULT held \d+ dropped (\d+)", said)
    assert result and int(result.group(1)) > 0, report  # the server drained the backlog meanwhile
    assert "refused a connection" in outputs[0][1], report


def test_fd_backlog_fallback_is_warned(driver: Path, tmp_path: Path) -> None:
    """Where the backlog does stay full (here no thread can start to drain it, and the flooder holds it
    past the retries' window, half the rendezvous timeout), the late rank copies through scratch, and
    NCCL_DEBUG=WARN says why on both ranks: never silently."""
    env = {"MSCCLPP_TEST_REFUSE_THREADS": "1", "MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT": "4"}
    said, outputs, report = exchange_beside(driver, tmp_path, ["flood"], env)
    filled = re.search(r"FILLED \d+ (full|out of descriptors)", said)
    assert filled, report  # the flooder found the socket and reported how far it got
    if filled.group(1) != "full":
        pytest.skip(f"this process may not open enough descriptors to fill a backlog: {said}")
    assert "descriptor socket served only after every rank connected" in outputs[0][1], report
    late = outputs[1][1]
    assert "EXCHANGE rank 1" in late and "FAIL the descriptor of rank 0" in late, report
    assert re.search(r"cannot reach rank 0's descriptor socket \(its backlog stayed full", late), report
    assert "copy through scratch" in late, report


def exchange_with_stranger(driver: Path, tmp_path: Path, action: str, uid: int, why: str) -> None:
    """Rank 0 offers, rank 1 comes LATE_MS late; a stranger connects to rank 0's socket meanwhile. Asserts
    that the late rank's exchange still takes under a second, that the stranger was dropped promptly
    with no descriptor, and that rank 0 says it refused that process for `why` (its credentials)."""
    said, outputs, report = exchange_beside(driver, tmp_path, ["stranger", action, str(uid)])
    assert "CONNECTED" in said, report
    assert_all_ok(outputs)
    took = re.search(r"EXCHANGE rank 1 took ([0-9.]+) s", outputs[1][1])
    assert took and float(took.group(1)) < 1.0, report
    result = re.search(r"RESULT (\w+) after ([0-9.]+) s fds (\d+) bytes (\d+)", said)
    assert result, report
    # Dropped: closed by the server (reset where it left bytes unread), no descriptor, no byte.
    assert result.group(1) in ("eof", "ConnectionResetError"), report
    assert result.group(3) == "0" and result.group(4) == "0", report
    # Connected before the late rank came: dropped when rank 0 began serving, not at its deadline.
    assert float(result.group(2)) < LATE_MS / 1000 + 1.0, report
    want_uid = os.geteuid() if uid < 0 else uid
    pid = re.search(r"READY pid (\d+)", said)
    assert pid, report
    refusal = f"refused a connection from pid {pid.group(1)} (uid {want_uid}) to its descriptor socket: {why}"
    assert refusal in outputs[0][1], report


@pytest.mark.parametrize("action", ["nothing", "byte"])
def test_stranger_does_not_delay_the_exchange(driver: Path, tmp_path: Path, action: str) -> None:
    """(a) Connecting and sending nothing or one byte once stalled the server until its deadline."""
    exchange_with_stranger(driver, tmp_path, action, -1, "a process no rank announced")


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to drop to another uid")
def test_other_user_is_refused(driver: Path, tmp_path: Path) -> None:
    """(b) A process of another uid is refused and never gets the descriptor."""
    exchange_with_stranger(driver, tmp_path, "byte", NOBODY, "another user")


def test_same_user_with_another_pid_is_refused(driver: Path, tmp_path: Path) -> None:
    """(c) A process of our uid that no rank announced is refused, whatever it sends."""
    exchange_with_stranger(driver, tmp_path, "hello", -1, "a process no rank announced")


if __name__ == "__main__" and len(sys.argv) == 4 and sys.argv[1] == "stranger":
    stranger(sys.argv[2], int(sys.argv[3]))
if __name__ == "__main__" and sys.argv[1:] == ["flood"]:
    flooder()
