"""The TCP bootstrap against peers that do not follow its protocol: the wire format spoken by hand from
Python (layouts mirror native/bootstrap/rendezvous.cc, handshake.h, bootstrap.cc and key_proof.h on
purpose), with tests of the key in NCCL_COMM_ID mode, the bound on hello.nranks, frame sizes, the cap on
unauthenticated connections and the idle deadline of unused rendezvous. tests/test_bootstrap_auth.py tests
the challenge and response and the rank claims; tests/test_bootstrap_fuzz.py reuses the helpers.
The C++ driver (tests/bootstrap_driver.cc) is built with g++ (sanitized where the toolchain allows)."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import hmac
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

REPO = Path(__file__).resolve().parent.parent
SOURCES = [
    *(
        str(f.relative_to(REPO))
        for d in ("bootstrap", "common")
        for f in sorted((REPO / "native" / d).glob("*.cc"))
    ),
    "tests/bootstrap_driver.cc",
]
HELLO_MAGIC = 0x4F4C4548
CHALLENGE_MAGIC = 0x31434E4D
PURPOSE_ROOT = 1
PURPOSE_PEER = 2
MAX_RANKS = 1 << 16
MAX_FRAME_BYTES = 64 << 20
INVALID_USAGE = 5
MIB = 1 << 20
# The most that frames nobody takes may grow a process by: the process-wide cap (256 MiB), which is
# checked before a frame's buffer doubles, so one doubling past it (up to half a frame) and the buffer
# it replaces while it is copied; the floor of a few other connections; the allocator's slack. Far below
# a cap per claimed rank (768 MiB for three) or no cap at all.
QUEUED_BYTES_BOUND = 256 * MIB + 2 * (MAX_FRAME_BYTES // 2) + 16 * MIB + 64 * MIB


@functools.cache
def _build(directory: Path) -> Path:
    return build_driver(directory / "bootstrap_driver", SOURCES, [], 2, ["-pthread"])


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _build(tmp_path_factory.getbasetemp())


def env(**extra: str) -> dict[str, str]:
    e = driver_env()
    # A small quarantine keeps AddressSanitizer's own memory out of the RSS measurements.
    e["ASAN_OPTIONS"] = "detect_leaks=0:quarantine_size_mb=4:allocator_may_return_null=1"
    e.update(extra)
    return e


def start(
    args: list[str | os.PathLike[str]], environment: dict[str, str], log: Path | None = None
) -> subprocess.Popen[str]:
    cmd = [os.fspath(a) for a in args]
    if log is None:
        return subprocess.Popen(
            cmd, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    with open(log, "w") as out:  # the child keeps its own copy
        return subprocess.Popen(cmd, env=environment, stdout=out, stderr=subprocess.STDOUT, text=True)


def finish(proc: subprocess.Popen[str], timeout: float = 60) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        return -9, (out or "") + "\n<killed: timed out>"
    return proc.returncode, out or ""


def wait_for(path: Path, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, f"the driver exited ({proc.returncode}) before {path.name} appeared"
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)


# --- /proc measurements ---------------------------------------------------------------------------


def status_field(pid: int, field: str) -> int:
    """A number of /proc/PID/status (VmRSS in KiB, Threads)."""
    text = Path(f"/proc/{pid}/status").read_text()
    m = re.search(rf"^{field}:\s+(\d+)", text, re.MULTILINE)
    assert m, f"no {field} in /proc/{pid}/status"
    return int(m[1])


def rss_bytes(pid: int) -> int:
    return status_field(pid, "VmRSS") * 1024


def fd_count(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


# --- the wire -------------------------------------------------------------------------------------


def read_id(path: Path) -> tuple[bytes, tuple[str, int]]:
    """(key, root address) of a unique id file: magic, flags, 32-byte key, then the address."""
    deadline = time.monotonic() + 30
    while not path.exists() or path.stat().st_size < 128:
        assert time.monotonic() < deadline, f"no id in {path}"
        time.sleep(0.02)
    raw = path.read_bytes()
    return raw[8:40], unpack_address(raw[40:68])


def unpack_address(raw: bytes) -> tuple[str, int]:
    family = struct.unpack_from("<H", raw)[0]
    assert family == socket.AF_INET, f"address family {family}: the tests listen on IPv4 loopback"
    port = struct.unpack_from(">H", raw, 2)[0]
    return socket.inet_ntoa(raw[4:8]), port


def pack_address(host: str, port: int) -> bytes:
    return struct.pack("<H", socket.AF_INET) + struct.pack(">H", port) + socket.inet_aton(host) + bytes(20)


def hello(rank: int, nranks: int, magic: int = HELLO_MAGIC, family_ok: bool = True) -> bytes:
    """A rank's claim to the root (it follows the rank's proof)."""
    listen = pack_address("127.0.0.1", 9) if family_ok else bytes(28)
    return struct.pack("<Iii", magic, rank, nranks) + listen


def peer_claim(rank: int) -> bytes:
    return struct.pack("<i", rank)


def proof_of(key: bytes, label: str, purpose: int, ours: bytes, theirs: bytes, claim: bytes = b"") -> bytes:
    message = f"mscclpp-nccl {label}".encode() + struct.pack("<I", purpose) + ours + theirs + claim
    return hmac.new(key, message, hashlib.sha256).digest()


def challenge(purpose: int, nonce: bytes) -> bytes:
    return struct.pack("<II", CHALLENGE_MAGIC, purpose) + nonce


def prove(sock: socket.socket, key: bytes, purpose: int, claim: bytes) -> bool:
    """The connector's side of the handshake: challenges the acceptor and sends our proof and `claim`
    whatever it answered. True when the acceptor proved that it holds `key`."""
    nonce = os.urandom(32)
    sock.sendall(challenge(purpose, nonce))
    answer = recv_exact(sock, 64)
    theirs, proof = answer[:32], answer[32:]
    proven = hmac.compare_digest(proof, proof_of(key, "acceptor", purpose, nonce, theirs))
    sock.sendall(proof_of(key, "connector", purpose, nonce, theirs, claim) + claim)
    return proven


def answer(sock: socket.socket, key: bytes, purpose: int, claim_bytes: int) -> bytes | None:
    """The acceptor's side: answers a challenge read from `sock`; the connector's claim when it proved
    `key`, else None."""
    magic, got_purpose = struct.unpack("<II", recv_exact(sock, 8))
    nonce = recv_exact(sock, 32)
    assert (magic, got_purpose) == (CHALLENGE_MAGIC, purpose), (magic, got_purpose)
    ours = os.urandom(32)
    sock.sendall(ours + proof_of(key, "acceptor", purpose, nonce, ours))
    proof = recv_exact(sock, 32)
    claim = recv_exact(sock, claim_bytes)
    return (
        claim if hmac.compare_digest(proof, proof_of(key, "connector", purpose, nonce, ours, claim)) else None
    )


def frame(tag: int, payload: bytes = b"", announced: int | None = None) -> bytes:
    size = len(payload) if announced is None else announced
    return struct.pack("<iIQ", tag, 0, size) + payload


def connect(addr: tuple[str, int], timeout: float = 10) -> socket.socket:
    return socket.create_connection(addr, timeout=timeout)


def connect_when_up(addr: tuple[str, int], within: float = 10) -> socket.socket:
    """Connects to a listener that a process just started may not have opened yet."""
    deadline = time.monotonic() + within
    while True:
        try:
            return connect(addr)
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.02)


def recv_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError(f"closed after {len(data)} of {n} bytes")
        data += chunk
    return data


def root_reply(sock: socket.socket) -> tuple[int, bytes]:
    status, size = struct.unpack("<iI", recv_exact(sock, 8))
    return status, recv_exact(sock, size)


def join_as_ranks(
    id_path: Path, ranks: range, nranks: int
) -> tuple[list[socket.socket], list[tuple[str, int]]]:
    """Joins the rendezvous as `ranks` (the driver is the others); returns their root connections (kept
    open, as a real rank's) and the address table."""
    key, root = read_id(id_path)
    socks = []
    for r in ranks:
        s = connect(root)
        assert prove(s, key, PURPOSE_ROOT, hello(r, nranks)), "the root did not prove the key"
        socks.append(s)
    tables = [root_reply(s) for s in socks]
    status, table = tables[0]
    assert status == 0, f"the root refused: {table!r}"
    return socks, [unpack_address(table[i * 28 : (i + 1) * 28]) for i in range(nranks)]


def closed_by_peer(sock: socket.socket, timeout: float) -> bool:
    sock.settimeout(timeout)
    try:
        return sock.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionError:
        return True


class Victim:
    """`driver victim`: rank 0 of `nranks` on comm.id (we are the other ranks), plus a root it serves."""

    def __init__(self, driver: Path, tmp_path: Path, nranks: int, **extra: str) -> None:
        self.dir = tmp_path
        self.log = tmp_path / "victim.log"
        self.proc = start([driver, "victim", tmp_path, str(nranks)], env(**extra), self.log)
        self.socks, self.table = join_as_ranks(tmp_path / "comm.id", range(1, nranks), nranks)
        wait_for(tmp_path / "ready", self.proc)
        self.key, _ = read_id(tmp_path / "comm.id")
        self.listener = self.table[0]
        self.root_key, self.root = read_id(tmp_path / "root.id")

    def try_claim(self, rank: int) -> tuple[socket.socket, int, bytes]:
        """Connects to the victim's listener as `rank`: the socket and the victim's verdict (status, text;
        -1 when it closed the connection instead)."""
        s = connect(self.listener)
        try:
            assert prove(s, self.key, PURPOSE_PEER, peer_claim(rank)), "the victim did not prove the key"
            return (s, *root_reply(s))
        except ConnectionError:
            return s, -1, b""

    def claim(self, rank: int) -> socket.socket:
        s, status, text = self.try_claim(rank)
        assert status == 0, f"the victim refused rank {rank}: {status} {text!r}"
        return s

    def complete(self, driver: Path, held: socket.socket) -> tuple[str, tuple[int, str]]:
        """Sends tag 5 "alive" on `held` (rank 1's connection), then a real rank 1 joins root.id with the
        victim; returns the victim's log and the real rank's (rc, output)."""
        held.sendall(frame(5, b"alive"))
        other = finish(
            start([driver, "rank", self.dir / "root.id", "1", "2"], env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="20"))
        )
        rc = finish(self.proc)[0]
        return f"rc {rc}\n" + self.log.read_text(), other

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for s in self.socks:
            s.close()


@pytest.fixture
def victim_factory(driver: Path, tmp_path: Path) -> Iterator:
    made: list[Victim] = []

    def make(nranks: int, **extra: str) -> Victim:
        made.append(Victim(driver, tmp_path, nranks, **extra))
        return made[-1]

    yield make
    for v in made:
        v.close()


# --- 1. NCCL_COMM_ID with a shared secret ---------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def comm_id_key(comm_id: str, secret: str) -> bytes:
    """The key of an NCCL_COMM_ID job with MSCCLPP_NCCL_COMM_SECRET: bound to the job's address."""
    shared = hashlib.sha256(f"mscclpp-nccl comm secret:{secret}".encode()).digest()
    return hmac.new(shared, f"mscclpp-nccl comm id:{comm_id}".encode(), hashlib.sha256).digest()


def test_comm_id_key_comes_from_the_environment(driver: Path) -> None:
    """With MSCCLPP_NCCL_COMM_SECRET the id's key is an HMAC of NCCL_COMM_ID under the secret, so another
    job's address gives another key; without it, a warning shows at default verbosity (loopback too),
    and a rank without the secret is refused by a root that has it."""

    def commid(**extra: str) -> tuple[str, str]:
        rc, out = finish(start([driver, "commid"], env(**extra)))
        m = re.search(r"^OK commid ([0-9a-f]{64})$", out, re.MULTILINE)
        assert rc == 0 and m, out
        return m[1], out

    remote = "192.0.2.1:29500"  # TEST-NET-1: parsed, never contacted
    key, out = commid(NCCL_COMM_ID=remote, MSCCLPP_NCCL_COMM_SECRET="s3cret")
    assert key == comm_id_key(remote, "s3cret").hex()
    assert "WARN" not in out, out
    other, _ = commid(NCCL_COMM_ID="192.0.2.1:29501", MSCCLPP_NCCL_COMM_SECRET="s3cret")
    assert other != key, "two jobs with one secret share a key"
    bare, out = commid(NCCL_COMM_ID=remote)
    assert bare != key and bare == hashlib.sha256(f"mscclpp-nccl comm id:{remote}".encode()).hexdigest()
    assert "WARN" in out and "any local user" in out, out
    _, out = commid(NCCL_COMM_ID="127.0.0.1:29500")
    assert "WARN" in out and "without MSCCLPP_NCCL_COMM_SECRET: any local user" in out, out

    comm_id = f"127.0.0.1:{_free_port()}"
    base = {"NCCL_COMM_ID": comm_id, "MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT": "3"}
    rank0 = start([driver, "rank", "-", "0", "2"], env(MSCCLPP_NCCL_COMM_SECRET="s3cret", **base))
    time.sleep(0.3)  # rank 0 serves the root
    started = time.monotonic()
    rc1, out1 = finish(start([driver, "rank", "-", "1", "2"], env(**base)))
    refused_after = time.monotonic() - started
    rc0, out0 = finish(rank0)
    assert rc1 != 0 and "did not prove that it holds this job's key" in out1, out1
    assert refused_after < 2.0, f"the rank without the secret took {refused_after:.1f} s to be refused"
    assert rc0 != 0 and "rank 1 of 2 never arrived" in out0, out0

    comm_id = f"127.0.0.1:{_free_port()}"
    good = env(NCCL_COMM_ID=comm_id, MSCCLPP_NCCL_COMM_SECRET="s3cret", MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="20")
    procs = [start([driver, "rank", "-", str(r), "2"], good) for r in range(2)]
    for r, (rc, out) in enumerate(finish(p) for p in procs):
        assert rc == 0 and f"OK rank {r}" in out, out


# --- 2. hello.nranks ------------------------------------------------------------------------------


def test_hello_nranks_is_bounded_and_must_agree(driver: Path, tmp_path: Path) -> None:
    id_path = tmp_path / "uid"
    root_proc = start([driver, "uid", id_path, "60"], env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30"))
    try:
        key, root = read_id(id_path)
        before = rss_bytes(root_proc.pid)
        huge = 1 << 22  # an address table of 112 MiB if it were believed
        with connect(root) as s:
            assert prove(s, key, PURPOSE_ROOT, hello(0, huge))
            status, text = root_reply(s)
        grown = rss_bytes(root_proc.pid) - before
        assert status == INVALID_USAGE, text
        assert text.decode() == f"bootstrap: nranks={huge} exceeds the limit of {MAX_RANKS} ranks"
        assert grown < 8 * MIB, f"the root grew by {grown / MIB:.1f} MiB"
        first = connect(root)
        assert prove(first, key, PURPOSE_ROOT, hello(0, 2))  # the first real rank fixes nranks=2
        time.sleep(0.2)
        with connect(root) as s:
            assert prove(s, key, PURPOSE_ROOT, hello(1, 3))
            status, text = root_reply(s)
        assert status == INVALID_USAGE and b"joined with nranks=3 but others use nranks=2" in text, text
        status, text = root_reply(first)  # everyone learns why the rendezvous failed
        assert status == INVALID_USAGE and b"nranks=3" in text, text
        first.close()
    finally:
        root_proc.kill()
        root_proc.communicate()
    rc, out = finish(start([driver, "rank", id_path, "0", str(MAX_RANKS + 1), "5"], env()))
    assert rc != 0 and f"{MAX_RANKS + 1} ranks exceed the limit of {MAX_RANKS}" in out, out


# --- 3. frames -------------------------------------------------------------------------------------


def test_frames_are_capped_and_buffers_grow_with_the_data(driver: Path, victim_factory) -> None:
    """Ranks 2-7 announce frames just under the cap and send 1 KiB of each: the victim's memory grows by
    what arrived, not by 6 x 64 MiB. Rank 8 announces 1 TiB: its connection is dropped with a warning."""
    v = victim_factory(9, NCCL_DEBUG="WARN", MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30")
    held = v.claim(1)
    time.sleep(0.2)
    before = rss_bytes(v.proc.pid)
    liars = []
    for r in range(2, 8):
        s = v.claim(r)
        s.sendall(frame(77, bytes(1024), announced=MAX_FRAME_BYTES - 1))
        liars.append(s)
    time.sleep(0.5)
    grown = rss_bytes(v.proc.pid) - before
    assert grown < 16 * MIB, (
        f"six announced {MAX_FRAME_BYTES >> 20} MiB frames grew the victim by {grown / MIB:.0f} MiB"
    )
    huge = v.claim(8)
    huge.sendall(frame(77, bytes(64), announced=1 << 40))
    assert closed_by_peer(huge, 5), "a 1 TiB frame header was not refused"
    time.sleep(0.2)
    log, (rc, out) = v.complete(driver, held)
    assert "GOT alive" in log, log
    assert "OK rank 0" in log and rc == 0 and "OK rank 1" in out, log + out
    assert f"announced a frame of {1 << 40} bytes, over the limit of {MAX_FRAME_BYTES}" in log, log
    for s in [held, huge, *liars]:
        s.close()


def test_a_peer_with_the_key_cannot_queue_without_bound(driver: Path, victim_factory) -> None:
    """Rank 2 holds the key and sends ten frames just under the cap (640 MiB) that nobody takes: the
    victim queues 256 MiB of them, then reads that connection no further, so the sender blocks and the
    victim's memory stays bounded; the rendezvous with the real rank 1 still completes."""
    v = victim_factory(3, NCCL_DEBUG="WARN", MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30")
    held = v.claim(1)
    flood = v.claim(2)
    time.sleep(0.2)
    before = rss_bytes(v.proc.pid)
    payload = bytes(MAX_FRAME_BYTES - 1)
    sent: list[int] = []

    def send_all() -> None:
        with contextlib.suppress(OSError):
            for _ in range(10):
                flood.sendall(frame(77, payload))
                sent.append(1)

    sender = threading.Thread(target=send_all, daemon=True)
    sender.start()
    time.sleep(3.0)
    grown = rss_bytes(v.proc.pid) - before
    assert sender.is_alive() and len(sent) < 10, f"all {len(sent)} frames went through: no back-pressure"
    assert grown < QUEUED_BYTES_BOUND, f"640 MiB of unread frames grew the victim by {grown / MIB:.0f} MiB"
    log, (rc, out) = v.complete(driver, held)
    assert "GOT alive" in log, log
    assert "OK rank 0" in log and rc == 0 and "OK rank 1" in out, log + out
    flood.close()
    held.close()
    sender.join(timeout=10)


# --- 4. unauthenticated connections ---------------------------------------------------------------

FLOOD = 1000
_FLOODER = """
import socket, sys, time
addr = (sys.argv[1], int(sys.argv[2]))
held = [socket.create_connection(addr) for _ in range(int(sys.argv[3]))]
print("HELD", len(held), flush=True)
time.sleep(60)
"""


def test_silent_connections_are_capped_and_a_rendezvous_still_completes(driver: Path, tmp_path: Path) -> None:
    id_path = tmp_path / "uid"
    root_proc = start([driver, "uid", id_path, "60"], env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30"))
    _, (host, port) = read_id(id_path)
    time.sleep(0.2)
    base = fd_count(root_proc.pid)
    flooder = subprocess.Popen(
        [sys.executable, "-c", _FLOODER, host, str(port), str(FLOOD)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert flooder.stdout and flooder.stdout.readline().split() == ["HELD", str(FLOOD)]
        time.sleep(0.5)  # the root accepts what is in its backlog
        held = fd_count(root_proc.pid) - base
        started = time.monotonic()
        procs = [
            start([driver, "rank", id_path, str(r), "2"], env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="20"))
            for r in range(2)
        ]
        results = [finish(p) for p in procs]
        took = time.monotonic() - started
    finally:
        flooder.kill()
        flooder.wait()
        root_proc.kill()
        root_proc.communicate()
    assert held <= 64, f"{FLOOD} silent connections hold {held} descriptors of the root"
    for r, (rc, out) in enumerate(results):
        assert rc == 0 and f"OK rank {r}" in out, out
    assert took < 5, f"the rendezvous took {took:.1f} s under the flood"


# --- 5. unused ids --------------------------------------------------------------------------------


def test_unused_ids_end_their_root_after_the_timeout(driver: Path) -> None:
    count = 20
    proc = start([driver, "idle", str(count), "30"], env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="1"))
    try:
        assert proc.stdout is not None
        said = proc.stdout.readline().split()
        assert said[:2] == ["IDS", str(count)], said
        threads, fds = int(said[3]), int(said[5])
        deadline = time.monotonic() + 10
        while status_field(proc.pid, "Threads") > 1 and time.monotonic() < deadline:
            time.sleep(0.1)
        after_threads, after_fds = status_field(proc.pid, "Threads"), fd_count(proc.pid)
        waited = 10 - (deadline - time.monotonic())
    finally:
        proc.kill()
        proc.communicate()
    assert threads >= count + 1, f"{threads} threads with {count} ids"
    assert after_threads == 1, f"{after_threads} threads left {waited:.1f} s later"
    assert waited < 3, f"the roots ended after {waited:.1f} s with a 1 s timeout"
    assert fds - after_fds >= count, f"descriptors {fds} -> {after_fds}: the listeners stayed open"
