"""Authentication of the TCP bootstrap (native/bootstrap/key_proof.h): a process that squats the root's
port, or a rank's, learns nothing of the job's key and is refused; a recorded rendezvous replayed to a new
one with the same key joins nothing. The squatter and the replayer speak no protocol of their own: they
record and repeat bytes, so the tests hold whatever the handshake looks like."""

from __future__ import annotations

import contextlib
import hashlib
import os
import socket
import struct
import threading
import time
from pathlib import Path

from test_bootstrap_wire import (
    PURPOSE_PEER,
    PURPOSE_ROOT,
    answer,
    challenge,
    comm_id_key,
    connect_when_up,
    driver,  # noqa: F401 - the fixture
    env,
    finish,
    hello,
    pack_address,
    proof_of,
    read_id,
    recv_exact,
    start,
    unpack_address,
)

ID_MAGIC = 0x31424E4D
FLAG_ROOT_AT_RANK0 = 1


def write_id(path: Path, key: bytes, root: tuple[str, int], flags: int = 0) -> None:
    raw = struct.pack("<II", ID_MAGIC, flags) + key + pack_address(*root)
    path.write_bytes(raw + bytes(128 - len(raw)))


def listen() -> socket.socket:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    return s


def read_for(sock: socket.socket, seconds: float) -> bytes:
    """What arrives on `sock` until it closes or stays quiet for `seconds`."""
    data = b""
    sock.settimeout(seconds)
    with contextlib.suppress(OSError):
        while chunk := sock.recv(65536):
            data += chunk
    return data


def serve_as_root(
    root: socket.socket, key: bytes, nranks: int, others: dict[int, tuple[str, int]] | None = None
) -> tuple[list[socket.socket], list[tuple[str, int]]]:
    """Plays the root (we hold the key) for the real ranks of `nranks`; `others` names the listeners of
    the ranks that are not real. Returns the real ranks' connections (kept open) and the table sent."""
    table: dict[int, bytes] = {r: pack_address(*a) for r, a in (others or {}).items()}
    conns = []
    root.settimeout(20)
    while len(table) < nranks:
        conn = root.accept()[0]
        claim = answer(conn, key, PURPOSE_ROOT, len(hello(0, nranks)))
        assert claim is not None, "a real rank did not prove the key to us"
        table[struct.unpack_from("<i", claim, 4)[0]] = claim[12:40]
        conns.append(conn)
    raw = b"".join(table[r] for r in range(nranks))
    for conn in conns:
        conn.sendall(struct.pack("<iI", 0, len(raw)) + raw)
    return conns, [unpack_address(table[r]) for r in range(nranks)]


class Squatter:
    """Holds a port that ranks take for the root's: records what each connection sends, then answers with
    a reply that would pass for the root's (status 0 and a two-rank table naming its own second port as
    rank 0), and records what arrives at that second port, where ranks would go next."""

    def __init__(self, root: socket.socket | None = None) -> None:
        self.root = root or listen()
        self.rank0 = listen()
        self.received: list[bytes] = []
        self.stop = False
        self.threads = [
            threading.Thread(target=self._serve, args=(self.root,), daemon=True),
            threading.Thread(target=self._record, args=(self.rank0,), daemon=True),
        ]
        for t in self.threads:
            t.start()

    @property
    def address(self) -> tuple[str, int]:
        return self.root.getsockname()

    def _accept(self, listener: socket.socket) -> socket.socket | None:
        listener.settimeout(0.2)
        while not self.stop:
            with contextlib.suppress(TimeoutError):
                return listener.accept()[0]
        return None

    def _serve(self, listener: socket.socket) -> None:
        while (conn := self._accept(listener)) is not None:
            with conn:
                first = read_for(conn, 0.5)
                table = pack_address(*self.rank0.getsockname()) + pack_address("127.0.0.1", 9)
                with contextlib.suppress(OSError):
                    conn.sendall(struct.pack("<iI", 0, len(table)) + table)
                self.received.append(first + read_for(conn, 1.0))

    def _record(self, listener: socket.socket) -> None:
        while (conn := self._accept(listener)) is not None:
            with conn:
                self.received.append(read_for(conn, 1.0))

    def close(self) -> bytes:
        self.stop = True
        for t in self.threads:
            t.join(timeout=5)
        self.root.close()
        self.rank0.close()
        return b"".join(self.received)


def test_root_squat_learns_nothing_and_is_refused(driver: Path, tmp_path: Path) -> None:  # noqa: F811
    """A rank whose root's port is held by a squatter: the squatter never sees the key (the old wire sent
    it first thing), its reply is refused, and the rank fails promptly saying why."""
    key = os.urandom(32)
    squatter = Squatter()
    write_id(tmp_path / "uid", key, squatter.address)
    try:
        started = time.monotonic()
        rc, out = finish(start([driver, "rank", tmp_path / "uid", "1", "2", "20"], env()), 30)
        took = time.monotonic() - started
    finally:
        seen = squatter.close()
    assert key not in seen, "the rank sent the job's key to a squatter"
    assert rc != 0 and "refusing the root" in out and "did not prove" in out, out
    assert took < 10, f"the rank took {took:.1f} s to refuse the squatter"


def test_root_squat_on_comm_id_port(driver: Path) -> None:  # noqa: F811
    """NCCL_COMM_ID with a shared secret, its port taken by a squatter before rank 0: rank 0 cannot serve
    and says so, rank 1 refuses the squatter, and no form of the secret reaches it."""
    squatter = Squatter()
    host, port = squatter.address
    comm_id, secret = f"{host}:{port}", "s3cret"
    e = env(NCCL_COMM_ID=comm_id, MSCCLPP_NCCL_COMM_SECRET=secret, MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="20")
    try:
        procs = [start([driver, "rank", "-", str(r), "2"], e) for r in range(2)]
        (rc0, out0), (rc1, out1) = (finish(p, 30) for p in procs)
    finally:
        seen = squatter.close()
    hashed = hashlib.sha256(f"mscclpp-nccl comm secret:{secret}".encode()).digest()
    for leaked in (comm_id_key(comm_id, secret), hashed, secret.encode()):
        assert leaked not in seen, "a form of the secret reached the squatter"
    assert rc0 != 0 and f"rank 0 cannot serve NCCL_COMM_ID={comm_id}" in out0, out0
    assert rc1 != 0 and "did not prove" in out1, out1


def test_root_squat_of_a_rank_listener(driver: Path, tmp_path: Path) -> None:  # noqa: F811
    """Peer connections prove the key both ways too: we serve a real rank 0 a table whose rank 1 is a
    squatter without the key; rank 0 refuses it when it connects, and the key never reaches it."""
    key = os.urandom(32)
    root = listen()
    squatter = Squatter()
    write_id(tmp_path / "uid", key, root.getsockname())
    proc = start([driver, "rank", tmp_path / "uid", "0", "2", "20"], env())
    try:
        conns, _ = serve_as_root(root, key, 2, {1: squatter.address})
        rc, out = finish(proc, 30)
        conns[0].close()
    finally:
        root.close()
        seen = squatter.close()
    assert key not in seen, "rank 0 sent the key to a squatter of rank 1's address"
    assert rc != 0 and "connecting to rank 1" in out and "did not prove" in out, out


class Relay:
    """Forwards one connection to `target` and records what the client sent, in the segments that the
    server's answers separate."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.listener = listen()
        self.target = target
        self.segments: list[bytes] = []
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    @property
    def address(self) -> tuple[str, int]:
        return self.listener.getsockname()

    def _run(self) -> None:
        self.listener.settimeout(30)
        client = self.listener.accept()[0]
        server = connect_when_up(self.target)
        last = None
        with client, server:
            for s in (client, server):
                s.settimeout(0.01)
            while True:
                moved = False
                for src, dst in ((client, server), (server, client)):
                    try:
                        chunk = src.recv(65536)
                    except TimeoutError:
                        continue
                    except OSError:
                        chunk = b""
                    if not chunk:
                        return
                    dst.sendall(chunk)
                    moved = True
                    if src is client:
                        if last is client:
                            self.segments[-1] += chunk
                        else:
                            self.segments.append(chunk)
                    last = src
                if not moved:
                    time.sleep(0.001)


def replay(target: tuple[str, int], segments: list[bytes]) -> bytes:
    """Sends the recorded segments to `target`, each after the answer to the one before; what came back."""
    got = b""
    with connect_when_up(target) as s:
        s.settimeout(5)
        for segment in segments:
            try:
                s.sendall(segment)
            except OSError:
                break
            got += read_for(s, 0.5)
    return got


def test_key_replay_of_a_recorded_rendezvous_joins_nothing(driver: Path, tmp_path: Path) -> None:  # noqa: F811
    """Rank 1 of an NCCL_COMM_ID job reaches its root through a relay that records it. A second job with
    the same NCCL_COMM_ID and secret (so the same key) then gets the recording replayed: the replay does
    not join (no address table comes back), and the second job's real rank 1 still completes it."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        comm_id = f"127.0.0.1:{probe.getsockname()[1]}"
    e = env(NCCL_COMM_ID=comm_id, MSCCLPP_NCCL_COMM_SECRET="s3cret", MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="20")
    rc, out = finish(start([driver, "commid", tmp_path / "uid"], e))
    assert rc == 0, out
    key, root = read_id(tmp_path / "uid")
    relay = Relay(root)
    write_id(tmp_path / "relayed", key, relay.address, FLAG_ROOT_AT_RANK0)
    rank0 = start([driver, "rank", "-", "0", "2"], e)
    time.sleep(0.3)  # rank 0 serves the root
    rank1 = start([driver, "rank", tmp_path / "relayed", "1", "2"], e)
    for r, (rc, out) in enumerate([finish(rank0), finish(rank1)]):
        assert rc == 0 and f"OK rank {r}" in out, f"the relayed rendezvous failed: {out}"
    relay.thread.join(timeout=10)
    assert relay.segments, "the relay recorded nothing"

    rank0 = start([driver, "rank", "-", "0", "2"], e)
    time.sleep(0.5)
    got = replay(root, relay.segments)
    rank1 = start([driver, "rank", "-", "1", "2"], e)
    results = [finish(rank0), finish(rank1)]
    assert not got.startswith(struct.pack("<iI", 0, 2 * 28)), (
        f"the replay joined as rank 1 and got the table: {unpack_address(got[8:36])}"
    )
    for r, (rc, out) in enumerate(results):
        assert rc == 0 and f"OK rank {r}" in out, f"rank {r} after the replay: {out}"


def test_key_replay_of_a_proof_to_a_rank_listener(driver: Path, tmp_path: Path) -> None:  # noqa: F811
    """The peer handshake over fresh nonces: our proof for one connection to a real rank's listener,
    repeated on a second connection, is refused (we hold the key, so the first one is accepted)."""
    key = os.urandom(32)
    root = listen()
    write_id(tmp_path / "uid", key, root.getsockname())
    proc = start([driver, "rank", tmp_path / "uid", "0", "2", "10"], env())
    try:
        conns, (listener, _) = serve_as_root(root, key, 2, {1: ("127.0.0.1", 9)})
        with socket.create_connection(listener, timeout=5) as first:
            nonce = os.urandom(32)
            first.sendall(challenge(PURPOSE_PEER, nonce))
            answered = recv_exact(first, 64)
            with socket.create_connection(listener, timeout=5) as second:
                # The second connection is answered with another nonce: the first one's proof is stale.
                second.sendall(challenge(PURPOSE_PEER, nonce))
                fresh = recv_exact(second, 64)
                assert fresh[:32] != answered[:32], "the listener reused its nonce"
                stale = proof_of(key, "connector", PURPOSE_PEER, nonce, answered[:32], struct.pack("<i", 1))
                second.sendall(stale + struct.pack("<i", 1))
                assert read_for(second, 3) == b"", "a replayed proof was accepted"
        conns[0].close()
    finally:
        root.close()
        proc.kill()
        finish(proc)
