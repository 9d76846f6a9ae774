"""CPU fuzz of the TCP bootstrap: two worker processes send thousands of random and adversarial frames and
connection patterns (wrong secrets, the right secret then garbage, truncated headers, huge sizes, reserved
tags, repeated ranks, half-open connections) at rank 0's listener and at a root service, both in one
`driver victim` process. The victim must not crash, its RSS and descriptor count stay bounded, rank 1's
real connection keeps working, and a legitimate communicator forms on the fuzzed root afterwards.

Run as `python tests/test_bootstrap_fuzz.py worker ...` it is one fuzzing worker."""

from __future__ import annotations

import contextlib
import random
import socket
import subprocess
import sys
import time
from pathlib import Path

from test_bootstrap_wire import (
    HELLO_MAGIC,
    MAX_FRAME_BYTES,
    MAX_RANKS,
    MIB,
    PURPOSE_PEER,
    PURPOSE_ROOT,
    challenge,
    driver,  # noqa: F401 - the fixture
    fd_count,
    frame,
    hello,
    peer_claim,
    prove,
    rss_bytes,
    victim_factory,  # noqa: F401 - the fixture
)

NRANKS = 16  # the workers claim ranks 2..15 (rank 1 is our real connection)
WORKERS = 2
CASES_PER_WORKER = 4000
INT_MIN = -(1 << 31)
RSS_LIMIT = 64 * MIB
FD_LIMIT = 2 * 64 + 32  # two capped pending sets, the claimed ranks and the process's own


def _sizes(rng: random.Random) -> int:
    return rng.choice(
        [MAX_FRAME_BYTES - 1, MAX_FRAME_BYTES, MAX_FRAME_BYTES + 1, 1 << 40, (1 << 64) - 1, 0, 7]
    )


# A case: the proof to give first (key, purpose, claim) or None, then raw messages.
Case = tuple[tuple[bytes, int, bytes] | None, list[bytes]]


def _listener_case(rng: random.Random, key: bytes) -> Case:
    """One connection to rank 0's listener; never a valid claim of a rank below 2."""
    kind = rng.randrange(8)
    wrong = bytes(rng.randrange(256) for _ in range(32))
    rank = rng.choice([rng.randrange(2, NRANKS), 0, -1, NRANKS, INT_MIN, 2**31 - 1])
    if kind == 0:  # wrong key, then something frame-shaped
        return (wrong, PURPOSE_PEER, peer_claim(rank)), [frame(7, b"x" * 8)]
    if kind == 1:  # right key, then garbage
        return (key, PURPOSE_PEER, peer_claim(rank)), [rng.randbytes(rng.randrange(1, 200))]
    if kind == 2:  # truncated headers
        return (key, PURPOSE_PEER, peer_claim(rank)), [frame(9, b"")[: rng.randrange(1, 16)]]
    if kind == 3:  # huge sizes
        return (key, PURPOSE_PEER, peer_claim(rank)), [frame(11, rng.randbytes(64), announced=_sizes(rng))]
    if kind == 4:  # reserved tags
        payload = rng.randbytes(rng.randrange(8))
        return (key, PURPOSE_PEER, peer_claim(rank)), [frame(INT_MIN + rng.randrange(16), payload)]
    if kind == 5:  # the root's purpose at a rank's listener
        return (key, PURPOSE_ROOT, peer_claim(rank)), [frame(5, b"fake!")]
    if kind == 6:  # a challenge cut short
        return None, [challenge(PURPOSE_PEER, rng.randbytes(32))[: rng.randrange(40)]]
    return None, [rng.randbytes(rng.randrange(1, 300))]


def _root_case(rng: random.Random, key: bytes) -> Case:
    """One connection to the root; never a valid hello, so the root stays open for the final rendezvous."""
    kind = rng.randrange(6)
    if kind == 0:  # wrong key
        return (rng.randbytes(32), PURPOSE_ROOT, hello(0, 2)), []
    if kind == 1:  # bad magic
        return (
            key,
            PURPOSE_ROOT,
            hello(0, 2, magic=(HELLO_MAGIC + 1 + rng.randrange(1 << 31)) % (1 << 32)),
        ), []
    if kind == 2:  # ranks and sizes out of range
        nranks = rng.choice([0, -1, MAX_RANKS + 1, 2**31 - 1, INT_MIN])
        return (key, PURPOSE_ROOT, hello(rng.randrange(-5, 5), nranks)), []
    if kind == 3:
        return (key, PURPOSE_ROOT, hello(rng.choice([2, 5, -1]), 2)), []
    if kind == 4:  # no address
        return (key, PURPOSE_ROOT, hello(0, 2, family_ok=False)), []
    return None, [challenge(PURPOSE_ROOT, rng.randbytes(32))[: rng.randrange(1, 40)]]


def worker(
    seed: int, listener: tuple[str, int], secret: bytes, root: tuple[str, int], root_secret: bytes
) -> int:
    """Runs CASES_PER_WORKER connections; returns the number of messages sent."""
    rng = random.Random(seed)
    half_open: list[socket.socket] = []
    sent = 0
    for case in range(CASES_PER_WORKER):
        to_root = case % 4 == 3
        proof, messages = _root_case(rng, root_secret) if to_root else _listener_case(rng, secret)
        try:
            s = socket.create_connection(root if to_root else listener, timeout=5)
        except OSError:
            continue  # refused under load: the victim's backlog is its own business
        try:
            if proof:
                prove(s, *proof)
                sent += 1
            for m in messages:
                s.sendall(m)
                sent += 1
        except OSError:
            pass  # dropped while sending: fine
        if rng.random() < 0.15:
            if rng.random() < 0.5:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_WR)  # half-open: we stop writing, keep reading
            half_open.append(s)
            if len(half_open) > 100:
                half_open.pop(0).close()
        else:
            s.close()
    for s in half_open:
        s.close()
    return sent


def test_fuzzed_rank_and_root_survive(driver: Path, victim_factory) -> None:  # noqa: F811
    v = victim_factory(NRANKS, MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="90")
    held = v.claim(1)
    time.sleep(0.3)
    base_rss, base_fds = rss_bytes(v.proc.pid), fd_count(v.proc.pid)
    started = time.monotonic()
    args = [v.listener[0], str(v.listener[1]), v.key.hex(), v.root[0], str(v.root[1]), v.root_key.hex()]
    workers = [
        subprocess.Popen(
            [sys.executable, __file__, "worker", str(seed), *args], stdout=subprocess.PIPE, text=True
        )
        for seed in range(WORKERS)
    ]
    peak_rss, peak_fds = base_rss, base_fds
    while any(w.poll() is None for w in workers):
        assert v.proc.poll() is None, f"the victim died ({v.proc.returncode}): {v.log.read_text()[-3000:]}"
        peak_rss, peak_fds = max(peak_rss, rss_bytes(v.proc.pid)), max(peak_fds, fd_count(v.proc.pid))
        time.sleep(0.05)
    sent = sum(int(w.communicate()[0].split()[-1]) for w in workers)
    fuzz_s = time.monotonic() - started
    assert v.proc.poll() is None, f"the victim died ({v.proc.returncode}): {v.log.read_text()[-3000:]}"
    print(
        f"{sent} messages in {fuzz_s:.1f} s; RSS {base_rss / MIB:.1f} -> peak {peak_rss / MIB:.1f} MiB; "
        f"descriptors {base_fds} -> peak {peak_fds}"
    )
    assert sent >= 10_000, f"only {sent} messages"
    assert peak_rss - base_rss < RSS_LIMIT, f"RSS grew by {(peak_rss - base_rss) / MIB:.1f} MiB"
    assert peak_fds < FD_LIMIT, f"{peak_fds} descriptors at the peak"
    log, (rc, out) = v.complete(driver, held)
    assert "GOT alive" in log and "OK rank 0" in log, log[-3000:]
    assert rc == 0 and "OK rank 1" in out, out
    held.close()


if __name__ == "__main__" and sys.argv[1:2] == ["worker"]:
    seed, lhost, lport, lsecret, rhost, rport, rsecret = sys.argv[2:9]
    n = worker(
        int(seed), (lhost, int(lport)), bytes.fromhex(lsecret), (rhost, int(rport)), bytes.fromhex(rsecret)
    )
    print("SENT", n)
