"""Rank claims in the TCP bootstrap: a claim is bound to its authenticated connection, one rank per
connection; a second claim of a rank, at the root or at a rank's listener, fails the communicator with a
clear error on every rank; and the memory that queued frames take is capped per process, not per claim.
We hold the job's key in these tests: they play a rank of the job that misbehaves."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from pathlib import Path

from test_bootstrap_auth import listen, serve_as_root, write_id
from test_bootstrap_wire import (
    MAX_FRAME_BYTES,
    MIB,
    PURPOSE_PEER,
    PURPOSE_ROOT,
    QUEUED_BYTES_BOUND,
    challenge,
    connect,
    driver,  # noqa: F401 - the fixture
    env,
    finish,
    frame,
    hello,
    peer_claim,
    prove,
    read_id,
    root_reply,
    rss_bytes,
    start,
    victim_factory,  # noqa: F401 - the fixture
)

CLAIMED_TWICE = "rank 1 was claimed by two connections"


def test_rank_claim_twice_at_a_listener_fails_every_rank(driver: Path, tmp_path: Path) -> None:  # noqa: F811
    """We play the root for three real ranks, then claim rank 1 at rank 0's listener before the real
    rank 1 connects there. When it does, every rank fails promptly, naming the double claim."""
    key = bytes(range(32))
    root = listen()
    write_id(tmp_path / "uid", key, root.getsockname())
    procs = [start([driver, "rank", tmp_path / "uid", str(r), "3", "20"], env()) for r in range(3)]
    try:
        conns, table = serve_as_root(root, key, 3)
        impostor = connect(table[0])
        assert prove(impostor, key, PURPOSE_PEER, peer_claim(1)), "rank 0 did not prove the key"
        assert root_reply(impostor)[0] == 0, "rank 0 refused the first claim of rank 1"
        started = time.monotonic()
        results = [finish(p, 40) for p in procs]
        took = time.monotonic() - started
    finally:
        root.close()
    for r, (rc, out) in enumerate(results):
        assert rc != 0 and CLAIMED_TWICE in out, f"rank {r}: {out}"
    assert took < 12, f"the ranks took {took:.1f} s to fail"
    impostor.close()
    for conn in conns:
        conn.close()


def test_a_failure_stops_a_rank_waiting_for_a_peer_to_listen(driver: Path, tmp_path: Path) -> None:  # noqa: F811
    """Rank 1 of three never comes: its address refuses connections, so rank 0, sending to it, retries
    until its timeout. We then claim rank 1 twice at rank 0's listener. Rank 0 stops retrying at once
    and fails naming the double claim, as does rank 2, which learns it from rank 0. Rank 0's teardown
    still spends up to 5 s trying to tell rank 1, hence the bound, well under the timeout."""
    key = bytes(range(32))
    root = listen()
    vacant = listen()
    refusing = vacant.getsockname()
    vacant.close()
    write_id(tmp_path / "uid", key, root.getsockname())
    procs = [start([driver, "rank", tmp_path / "uid", str(r), "3", "20"], env()) for r in (0, 2)]
    try:
        conns, table = serve_as_root(root, key, 3, others={1: refusing})
        time.sleep(0.5)  # rank 0 is now retrying its connection to rank 1
        claims = []
        for expect_refused in (False, True):
            claim = connect(table[0])
            assert prove(claim, key, PURPOSE_PEER, peer_claim(1)), "rank 0 did not prove the key"
            assert (root_reply(claim)[0] != 0) == expect_refused, "rank 0 judged a claim of rank 1 wrongly"
            claims.append(claim)
        started = time.monotonic()
        results = [finish(p, 40) for p in procs]
        took = time.monotonic() - started
    finally:
        root.close()
    for rc, out in results:
        assert rc != 0 and CLAIMED_TWICE in out, out
    assert took < 15, f"the ranks took {took:.1f} s to fail (their timeout is 20 s)"
    for s in (*claims, *conns):
        s.close()


def test_rank_claim_twice_at_the_root_fails_every_rank(driver: Path, tmp_path: Path) -> None:  # noqa: F811
    """We claim rank 1 at the root first. The real rank 1, and the ranks that arrive after the failure,
    all learn it from the root at once instead of waiting for their timeout."""
    id_path = tmp_path / "uid"
    root_proc = start([driver, "uid", id_path, "60"], env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="20"))
    try:
        key, root = read_id(id_path)
        first = connect(root)
        assert prove(first, key, PURPOSE_ROOT, hello(1, 3))
        time.sleep(0.2)
        e = env(MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="20")
        started = time.monotonic()
        results = [finish(start([driver, "rank", id_path, "1", "3"], e), 40)]
        results += [finish(p, 40) for p in [start([driver, "rank", id_path, str(r), "3"], e) for r in (0, 2)]]
        took = time.monotonic() - started
        status, text = root_reply(first)
        first.close()
    finally:
        root_proc.kill()
        root_proc.communicate()
    assert status != 0 and b"joined twice" in text, text
    for rc, out in results:
        assert rc != 0 and "rank 1 of 3 joined twice" in out, out
    assert took < 10, f"the ranks took {took:.1f} s to fail"


def test_rank_claim_one_rank_per_connection(driver: Path, victim_factory) -> None:  # noqa: F811
    """A connection that claimed rank 2 and then tries to claim rank 3 gets no answer (its second
    challenge is only bytes of rank 2's stream); the real claim of rank 3 is still accepted."""
    v = victim_factory(4, MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30")
    held = v.claim(1)
    stacked = v.claim(2)
    stacked.sendall(challenge(PURPOSE_PEER, bytes(32)))
    stacked.settimeout(1.0)
    with contextlib.suppress(TimeoutError, ConnectionError):
        assert stacked.recv(64) == b"", "a second challenge on one connection was answered"
    third = v.claim(3)
    log, (rc, out) = v.complete(driver, held)
    assert "GOT alive" in log and "OK rank 0" in log, log
    assert rc == 0 and "OK rank 1" in out, out
    for s in (held, stacked, third):
        s.close()


def test_rank_claim_queue_cap_is_per_process(driver: Path, victim_factory) -> None:  # noqa: F811
    """Three claimed ranks each send real 64 MiB frames that nobody takes: together they queue no more
    than the process's cap (256 MiB), not the cap once per claim; rank 1's small message still gets
    through, and the rendezvous with the real rank 1 completes."""
    v = victim_factory(5, MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="30")
    held = v.claim(1)
    floods = [v.claim(r) for r in (2, 3, 4)]
    time.sleep(0.2)
    before = rss_bytes(v.proc.pid)
    payload = bytes(MAX_FRAME_BYTES - 1)

    def send_all(s: socket.socket) -> None:
        with contextlib.suppress(OSError):
            for _ in range(6):
                s.sendall(frame(77, payload))

    senders = [threading.Thread(target=send_all, args=(s,), daemon=True) for s in floods]
    for t in senders:
        t.start()
    peak = 0
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        peak = max(peak, rss_bytes(v.proc.pid) - before)
        time.sleep(0.05)
    assert all(t.is_alive() for t in senders), "a flood went through: no back-pressure"
    assert peak < QUEUED_BYTES_BOUND, f"three claimed ranks grew the victim by {peak / MIB:.0f} MiB"
    log, (rc, out) = v.complete(driver, held)
    assert "GOT alive" in log and "OK rank 0" in log, log
    assert rc == 0 and "OK rank 1" in out, out
    for s in (held, *floods):
        s.close()
    for t in senders:
        t.join(timeout=10)
