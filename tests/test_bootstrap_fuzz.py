"""CPU fuzz of the TCP bootstrap. Two worker processes send thousands of random and adversarial connections
at rank 0's listener and at two root services, all in `driver` processes: wrong keys, the right key then
garbage, truncated headers, huge sizes, reserved tags, a second claim stacked on a claimed connection, a
recorded claim replayed, valid hellos followed by garbage, half-open connections. Meanwhile a claimed
rank fills the process's frame cap with real 64 MiB frames, and squatters answer real ranks in place of
their root. The victim must not crash, its RSS and descriptor count stay bounded, rank 1's real
connection keeps working, a legitimate communicator forms on the fuzzed root afterwards, and every rank
of the root that got valid hellos can still join it.

Run as `python tests/test_bootstrap_fuzz.py worker ...` it is one fuzzing worker."""

from __future__ import annotations

import contextlib
import os
import random
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

from test_bootstrap_auth import Squatter, write_id
from test_bootstrap_wire import (
    HELLO_MAGIC,
    MAX_FRAME_BYTES,
    MAX_RANKS,
    MIB,
    PURPOSE_PEER,
    PURPOSE_ROOT,
    QUEUED_BYTES_BOUND,
    challenge,
    driver,  # noqa: F401 - the fixture
    env,
    fd_count,
    finish,
    frame,
    hello,
    join_as_ranks,
    peer_claim,
    proof_of,
    prove,
    read_id,
    recv_exact,
    rss_bytes,
    start,
    victim_factory,  # noqa: F401 - the fixture
)

NRANKS = 16  # rank 1 is our real connection, ranks 2-3 the flood; the workers claim 4..15, each once
WORKERS = 2
CASES_PER_WORKER = 4000
ROOT_RANKS = 128  # of the root that gets valid hellos: each worker's hellos use ranks of its own, once
INT_MIN = -(1 << 31)
TAG_FAILURE = INT_MIN + 3  # a claimed rank may fail the communicator: that is its right, not a bug
# The process-wide frame cap, filled by the flood of two claimed ranks (QUEUED_BYTES_BOUND says what else).
RSS_LIMIT = QUEUED_BYTES_BOUND
FD_LIMIT = 2 * 64 + 32  # two capped pending sets, the claimed ranks and the process's own
INVALID_RANKS = [0, -1, NRANKS, INT_MIN, 2**31 - 1]  # refused before a claim counts


def _sizes(rng: random.Random) -> int:
    return rng.choice(
        [MAX_FRAME_BYTES - 1, MAX_FRAME_BYTES, MAX_FRAME_BYTES + 1, 1 << 40, (1 << 64) - 1, 0, 7]
    )


class Worker:
    def __init__(self, seed: int, listener: tuple[str, int], key: bytes, roots: list[str]) -> None:
        """`roots`: host, port and hex key of the final rendezvous's root, then of the hello root."""
        self.rng = random.Random(seed)
        self.listener, self.key = listener, key
        self.root, self.root_key = (roots[0], int(roots[1])), bytes.fromhex(roots[2])
        self.hello_root, self.hello_key = (roots[3], int(roots[4])), bytes.fromhex(roots[5])
        # Valid claims and hellos use ranks of this worker's own, each once: a second claim of a rank
        # fails the communicator by design, which would end the fuzz.
        self.ranks = list(range(4 + seed, NRANKS, WORKERS))
        self.root_ranks = list(range(seed, ROOT_RANKS, WORKERS))
        self.sent = 0
        self.answered = 0  # stacked claims and replays that got an answer: must stay 0

    def claim_rank(self) -> int:
        return self.ranks.pop() if self.ranks and self.rng.random() < 0.3 else self.rng.choice(INVALID_RANKS)

    def listener_case(self, s: socket.socket) -> None:
        rng, key = self.rng, self.key
        kind = rng.randrange(9)
        if kind == 0:  # wrong key, then something frame-shaped
            self.prove(s, rng.randbytes(32), PURPOSE_PEER, peer_claim(self.claim_rank()))
            self.send(s, frame(7, b"x" * 8))
        elif kind in (1, 2, 3, 4):
            self.prove(s, key, PURPOSE_PEER, peer_claim(self.claim_rank()))
            if kind == 1:  # garbage
                self.send(s, rng.randbytes(rng.randrange(1, 200)))
            elif kind == 2:  # truncated headers
                self.send(s, frame(9, b"")[: rng.randrange(1, 16)])
            elif kind == 3:  # huge sizes
                self.send(s, frame(11, rng.randbytes(64), announced=_sizes(rng)))
            else:  # reserved tags
                tag = rng.choice([t for t in range(INT_MIN, INT_MIN + 16) if t != TAG_FAILURE])
                self.send(s, frame(tag, rng.randbytes(rng.randrange(8))))
        elif kind == 5:  # a second claim stacked on a claimed connection
            if self.prove(s, key, PURPOSE_PEER, peer_claim(self.claim_rank())):
                recv_exact(s, 8)  # the verdict, or a refusal's header
                self.send(s, challenge(PURPOSE_PEER, rng.randbytes(32)))
                self.expect_no_answer(s)
        elif kind == 6:  # our claim, recorded and replayed on a new connection
            nonce = rng.randbytes(32)
            self.send(s, challenge(PURPOSE_PEER, nonce))
            theirs = recv_exact(s, 64)[:32]
            claim = peer_claim(self.claim_rank())
            recorded = proof_of(key, "connector", PURPOSE_PEER, nonce, theirs, claim) + claim
            self.send(s, recorded)
            with socket.create_connection(self.listener, timeout=5) as again:
                self.send(again, challenge(PURPOSE_PEER, nonce))
                recv_exact(again, 64)
                self.send(again, recorded)
                self.expect_no_answer(again)
        elif kind == 7:  # a challenge cut short
            self.send(s, challenge(PURPOSE_PEER, rng.randbytes(32))[: rng.randrange(40)])
        else:
            self.send(s, rng.randbytes(rng.randrange(1, 300)))

    def root_case(self, s: socket.socket) -> None:
        """The root of the final rendezvous: never a valid hello, so it stays open for it."""
        rng, key = self.rng, self.root_key
        kind = rng.randrange(6)
        if kind == 0:
            self.prove(s, rng.randbytes(32), PURPOSE_ROOT, hello(0, 2))
        elif kind == 1:  # bad magic
            magic = (HELLO_MAGIC + 1 + rng.randrange(1 << 31)) % (1 << 32)
            self.prove(s, key, PURPOSE_ROOT, hello(0, 2, magic=magic))
        elif kind == 2:  # ranks and sizes out of range
            nranks = rng.choice([0, -1, MAX_RANKS + 1, 2**31 - 1, INT_MIN])
            self.prove(s, key, PURPOSE_ROOT, hello(rng.randrange(-5, 5), nranks))
        elif kind == 3:
            self.prove(s, key, PURPOSE_ROOT, hello(rng.choice([2, 5, -1]), 2))
        elif kind == 4:  # no address
            self.prove(s, key, PURPOSE_ROOT, hello(0, 2, family_ok=False))
        else:
            self.send(s, challenge(PURPOSE_ROOT, rng.randbytes(32))[: rng.randrange(1, 40)])

    def hello_case(self, s: socket.socket) -> None:
        """The other root: valid hellos (each rank once), then garbage on the same connection."""
        if not self.root_ranks:
            return
        self.prove(s, self.hello_key, PURPOSE_ROOT, hello(self.root_ranks.pop(), ROOT_RANKS))
        self.send(s, self.rng.randbytes(self.rng.randrange(1, 4000)))

    def prove(self, s: socket.socket, key: bytes, purpose: int, claim: bytes) -> bool:
        self.sent += 2  # the challenge, then the proof and claim
        return prove(s, key, purpose, claim)

    def send(self, s: socket.socket, data: bytes) -> None:
        s.sendall(data)
        self.sent += 1

    def expect_no_answer(self, s: socket.socket) -> None:
        s.settimeout(0.3)
        with contextlib.suppress(TimeoutError, ConnectionError):
            if s.recv(1):
                self.answered += 1

    def run(self) -> None:
        half_open: list[socket.socket] = []
        for case in range(CASES_PER_WORKER):
            target = [self.listener, self.listener, self.root, self.hello_root][case % 4]
            try:
                s = socket.create_connection(target, timeout=5)
            except OSError:
                continue  # refused under load: the victim's backlog is its own business
            try:
                if target is self.listener:
                    self.listener_case(s)
                elif target is self.root:
                    self.root_case(s)
                else:
                    self.hello_case(s)
            except OSError:
                pass  # dropped while sending: fine
            if self.rng.random() < 0.15 and target is not self.hello_root:
                if self.rng.random() < 0.5:
                    with contextlib.suppress(OSError):
                        s.shutdown(socket.SHUT_WR)  # half-open: we stop writing, keep reading
                half_open.append(s)
                if len(half_open) > 100:
                    half_open.pop(0).close()
            else:
                s.close()
        for s in half_open:
            s.close()


def _flood(sock: socket.socket) -> None:
    """Real 64 MiB frames until the connection is closed: they fill the process's cap."""
    payload = bytes(MAX_FRAME_BYTES - 1)
    with contextlib.suppress(OSError):
        while True:
            sock.sendall(frame(77, payload))


def _squatted_ranks(driver: Path, tmp_path: Path) -> list[tuple[int, str]]:  # noqa: F811
    """Four real ranks whose root's port a squatter holds (it answers with a root's reply of its own)."""
    squatter = Squatter()
    procs = []
    for i in range(4):
        write_id(tmp_path / f"squatted{i}", os.urandom(32), squatter.address)
        procs.append(start([driver, "rank", tmp_path / f"squatted{i}", str(i % 2), "2", "20"], env()))
    try:
        return [finish(p, 30) for p in procs]
    finally:
        squatter.close()


def test_fuzzed_rank_and_roots_survive(driver: Path, victim_factory, tmp_path: Path) -> None:  # noqa: F811
    hello_proc = start(
        [driver, "uid", tmp_path / "hello.id", "120"], env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="120")
    )
    v = victim_factory(NRANKS, MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="90")
    try:
        held = v.claim(1)
        floods = [v.claim(2), v.claim(3)]
        time.sleep(0.3)
        base_rss, base_fds = rss_bytes(v.proc.pid), fd_count(v.proc.pid)
        flooders = [threading.Thread(target=_flood, args=(f,), daemon=True) for f in floods]
        for t in flooders:
            t.start()
        hello_key, hello_root = read_id(tmp_path / "hello.id")
        started = time.monotonic()
        args = [v.listener[0], str(v.listener[1]), v.key.hex(), v.root[0], str(v.root[1]), v.root_key.hex()]
        args += [hello_root[0], str(hello_root[1]), hello_key.hex()]
        workers = [
            subprocess.Popen(
                [sys.executable, __file__, "worker", str(seed), *args], stdout=subprocess.PIPE, text=True
            )
            for seed in range(WORKERS)
        ]
        squatted = _squatted_ranks(driver, tmp_path)
        peak_rss, peak_fds = base_rss, base_fds
        while any(w.poll() is None for w in workers):
            assert v.proc.poll() is None, (
                f"the victim died ({v.proc.returncode}): {v.log.read_text()[-3000:]}"
            )
            assert hello_proc.poll() is None, "the root that got valid hellos died"
            peak_rss, peak_fds = max(peak_rss, rss_bytes(v.proc.pid)), max(peak_fds, fd_count(v.proc.pid))
            time.sleep(0.05)
        reports = [w.communicate()[0].split() for w in workers]
        fuzz_s = time.monotonic() - started
        assert v.proc.poll() is None, f"the victim died ({v.proc.returncode}): {v.log.read_text()[-3000:]}"
        sent = sum(int(r[1]) for r in reports)
        answered = sum(int(r[3]) for r in reports)
        print(
            f"{sent} messages in {fuzz_s:.1f} s; RSS {base_rss / MIB:.1f} -> peak {peak_rss / MIB:.1f} MiB; "
            f"descriptors {base_fds} -> peak {peak_fds}"
        )
        assert sent >= 10_000, f"only {sent} messages"
        assert answered == 0, f"{answered} stacked claims or replays were answered"
        assert all(t.is_alive() for t in flooders), "the flood of real frames went through: no cap"
        assert peak_rss - base_rss < RSS_LIMIT, f"RSS grew by {(peak_rss - base_rss) / MIB:.1f} MiB"
        assert peak_fds < FD_LIMIT, f"{peak_fds} descriptors at the peak"
        for rc, out in squatted:
            assert rc == 1 and "refusing the root" in out and "Sanitizer" not in out, out
        time.sleep(0.5)  # the hello root sees the fuzzers' connections close
        socks, table = join_as_ranks(tmp_path / "hello.id", range(ROOT_RANKS), ROOT_RANKS)
        assert len(table) == ROOT_RANKS
        for s in socks:
            s.close()
        log, (rc, out) = v.complete(driver, held)
        assert "GOT alive" in log and "OK rank 0" in log, log[-3000:]
        assert rc == 0 and "OK rank 1" in out, out
        for s in (held, *floods):
            s.close()
        for t in flooders:
            t.join(timeout=10)
    finally:
        hello_proc.kill()
        hello_proc.communicate()


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    seed, lhost, lport, lkey = sys.argv[2:6]
    w = Worker(int(seed), (lhost, int(lport)), bytes.fromhex(lkey), sys.argv[6:12])
    w.run()
    print("SENT", w.sent, "ANSWERED", w.answered)
