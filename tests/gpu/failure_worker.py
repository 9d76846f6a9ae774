"""One rank of the failure-contract GPU tests; run N of them with `python -m mscclpp_nccl.run -n N --mps`.

    failure_worker.py DIR SCENARIO[:VARIANT]

The victim (the last rank) runs its rank in a child process that kills itself with SIGKILL, and exits 0
once that child is dead: the launcher stops every rank when one fails, which would end the survivors'
measurements. DIR is a directory shared by the ranks (kill time, progress marks). Scenarios:

- init:before   the victim dies before ncclCommInitRank: survivors' init fails, naming it, within the
                bootstrap timeout (MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT, set small by the test) plus slack.
- init:during   the victim dies while every rank is inside ncclCommInitRank: survivors' init fails (or,
                if it completed first, the loss shows in ncclCommGetAsyncError); nobody hangs.
- collective:abort / collective:destroy
                the victim dies after its part of a few all-reduces while the survivors have hundreds
                queued: each survivor measures the time from the kill to ncclCommGetAsyncError ==
                ncclRemoteError (< 1 s, and ncclGetLastError names the victim), then how long
                ncclCommAbort (< 1 s) or ncclCommDestroy (< 5 s) takes, and that its stream drains.
- blocked:split / blocked:shrink / blocked:window
                the last rank stays out of a collective call that the others make on a second thread;
                their ncclCommAbort from the main thread returns within 1 s and ends that call.
- revoke:shrink  the last rank stops calling while the others have all-reduces queued that wait for it;
                their ncclCommRevoke returns within 1 s with every queued call gone from the GPU, the
                communicator then reports ncclSuccess and refuses new calls (ncclInvalidUsage), and a
                shrink that leaves out the last rank gives a communicator whose all-reduce is exact.

Prints `RESULT ...` lines and `PASS <scenario>`; any failure raises (non-zero exit).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import cupy as cp

from mscclpp_nccl.binding import NcclError, ffi
from mscclpp_nccl.communicator import Communicator, world_from_env
from mscclpp_nccl.gpus import local_device

REMOTE_ERROR = 6
CHILD_FLAG = "MSCCLPP_NCCL_FAILURE_CHILD"
DETECT_LIMIT_S = 1.0
# The fake-host tests, whose communicators hold stock ones, raise these limits with FAILURE_EXTRA_S by
# stock's own abort time (seconds over its network transport: tests/test_hierarchical_gpu.py).
EXTRA_S = float(os.environ.get("FAILURE_EXTRA_S", "0"))
ABORT_LIMIT_S = 1.0 + EXTRA_S
DESTROY_LIMIT_S = 5.0 + EXTRA_S
# Calls queued behind the victim's death. Over stock's network transport (fake hosts) fewer fit: stock's
# enqueue waits for a free slot in its proxy's bounded queue, which a dead peer never frees.
QUEUED_CALLS = int(os.environ.get("FAILURE_QUEUED_CALLS", "400"))
VICTIM_CALLS = 3
COUNT = 16384  # float32 elements per all-reduce: small kernels, many of them queued


def wait_for(paths: list[Path], limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not all(p.exists() for p in paths):
        if time.monotonic() > deadline:
            raise TimeoutError(f"never appeared: {[str(p) for p in paths if not p.exists()]}")
        time.sleep(0.005)


def mark(path: Path, text: str = "") -> None:
    tmp = path.with_name(path.name + ".tmp")  # one per mark: ranks write theirs at once
    tmp.write_text(text)
    tmp.rename(path)  # readers never see half a file


def die(shared: Path) -> None:
    """SIGKILL this process, after writing the kill time (CLOCK_MONOTONIC, shared by the host's processes)."""
    mark(shared / "killed_at", repr(time.monotonic()))
    os.kill(os.getpid(), signal.SIGKILL)


def run_victim_child(argv: list[str]) -> int:
    """The victim's wrapper: its rank runs in a child that must die by SIGKILL."""
    child = subprocess.run([sys.executable, *argv], env={**os.environ, CHILD_FLAG: "1"}, check=False)
    if child.returncode == -signal.SIGKILL:
        print("victim: killed as planned", flush=True)
        return 0
    print(f"victim: the child ended with {child.returncode} instead of SIGKILL", flush=True)
    return 1


# --- init ---------------------------------------------------------------------------------------


def init_victim(variant: str, shared: Path, rank: int, size: int, uid: str) -> None:
    if variant == "before":
        die(shared)
    cp.zeros(1)  # the CUDA context first, so that the others are well inside init when this one dies
    threading.Thread(target=lambda: Communicator(size, rank, uid, device=local_device()), daemon=True).start()
    time.sleep(0.2)
    die(shared)


def init_survivor(variant: str, shared: Path, rank: int, size: int, uid: str) -> None:
    limit = float(os.environ.get("MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT", "300")) + 15  # + the root's grace
    victim = size - 1
    start = time.monotonic()
    try:
        comm = Communicator(size, rank, uid, device=local_device())
    except NcclError as e:
        took = time.monotonic() - start
        print(f"RESULT init_failed_after_ms={took * 1e3:.0f} error={e}", flush=True)
        assert took < limit, f"init failed only after {took:.1f} s"
        if variant == "before":
            assert f"{victim}" in str(e), f"the error does not name rank {victim}: {e}"
        print(f"PASS init:{variant}", flush=True)
        return
    assert variant == "during", "init succeeded without the victim"
    # Init completed before the victim died: the death must show as an async error instead.
    detect = wait_remote_error(comm, shared, victim)
    comm.abort()
    print(f"RESULT init_completed detect_ms={detect * 1e3:.0f}", flush=True)
    print(f"PASS init:{variant}", flush=True)


# --- mid-collective ------------------------------------------------------------------------------


def wait_remote_error(comm: Communicator, shared: Path, victim: int) -> float:
    """Polls ncclCommGetAsyncError as PyTorch's watchdog does; returns seconds from the kill."""
    deadline = time.monotonic() + 30
    while True:
        error = comm.async_error()
        if error != 0:
            seen = time.monotonic()
            break
        assert time.monotonic() < deadline, "the victim's death never showed in ncclCommGetAsyncError"
        time.sleep(0.001)
    assert error == REMOTE_ERROR, f"ncclCommGetAsyncError gave {error}, expected ncclRemoteError"
    text = comm._nccl.last_error(comm.handle)
    assert f"rank {victim} " in text, f"ncclGetLastError does not name rank {victim}: {text!r}"
    wait_for([shared / "killed_at"])
    return seen - float((shared / "killed_at").read_text())


def collective_rank(variant: str, shared: Path, rank: int, size: int, uid: str) -> None:
    victim = size - 1
    comm = Communicator(size, rank, uid, device=local_device())
    stream = cp.cuda.Stream(non_blocking=True)
    data = cp.ones(COUNT, dtype=cp.float32)
    comm.all_reduce(data, stream=stream)
    stream.synchronize()
    if rank == victim:
        for _ in range(VICTIM_CALLS):
            comm.all_reduce(data, stream=stream)
        stream.synchronize()
        wait_for([shared / f"queued.{r}" for r in range(size - 1)])
        die(shared)
    for _ in range(QUEUED_CALLS):  # all but VICTIM_CALLS of these wait for the victim
        comm.all_reduce(data, stream=stream)
    mark(shared / f"queued.{rank}")
    detect = wait_remote_error(comm, shared, victim)
    start = time.monotonic()
    if variant == "abort":
        comm.abort()
    else:
        # What destroy_process_group does when it does not abort: must end too. Finalize reports the
        # lost peer (as stock NCCL's does); the communicator is destroyed all the same.
        try:
            comm.destroy()
            raise AssertionError("destroy reported no error after a peer's death")
        except NcclError as e:
            assert e.code == REMOTE_ERROR, f"destroy raised {e}, expected ncclRemoteError"
    ended = time.monotonic() - start
    stream.synchronize()  # the queued kernels are gone
    drained = time.monotonic() - start
    print(
        f"RESULT detect_ms={detect * 1e3:.1f} {variant}_ms={ended * 1e3:.1f} drained_ms={drained * 1e3:.1f}",
        flush=True,
    )
    assert 0 <= detect < DETECT_LIMIT_S, f"detected {detect:.3f} s after the kill"
    limit = ABORT_LIMIT_S if variant == "abort" else DESTROY_LIMIT_S
    assert ended < limit, f"ncclComm{variant.capitalize()} took {ended:.3f} s"
    print(f"PASS collective:{variant}", flush=True)


# --- abort while another thread is blocked in a call ----------------------------------------------


def blocked_call(variant: str, comm: Communicator) -> None:
    nccl, lib = comm._nccl, comm._nccl.lib
    if variant == "split":
        comm.split(0, comm.rank)
    elif variant == "shrink":
        # Rank 0 excluded (it stands by): the new communicator's rendezvous waits for the last rank, which
        # never comes.
        new = ffi.new("ncclComm_t*")
        excluded = ffi.new("int[]", [0])
        nccl.check(lib.ncclCommShrink(comm.handle, excluded, 1, new, ffi.NULL, 0), comm.handle)
    else:
        buf = cp.zeros(1 << 20, dtype=cp.uint8)
        win = ffi.new("ncclWindow_t*")
        nccl.check(
            lib.ncclCommWindowRegister(comm.handle, ffi.cast("void*", buf.data.ptr), buf.nbytes, win, 1),
            comm.handle,
        )
    raise AssertionError(f"{variant} completed without the last rank")


def blocked_rank(variant: str, shared: Path, rank: int, size: int, uid: str) -> None:
    comm = Communicator(size, rank, uid, device=local_device())
    comm.barrier()
    if rank == size - 1:
        wait_for([shared / f"aborted.{r}" for r in range(size - 1)])
        comm.abort()  # its peers are gone (they aborted): no destroy could complete with them
        print(f"PASS blocked:{variant}", flush=True)
        return
    if variant == "shrink" and rank == 0:  # excluded from the shrink: aborts with the blocked ranks
        mark(shared / "blocked.0")
        wait_for([shared / f"blocked.{r}" for r in range(size - 1)])
        comm.abort()
        mark(shared / "aborted.0")
        print(f"PASS blocked:{variant}", flush=True)
        return
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            blocked_call(variant, comm)
        except BaseException as e:  # reported by the asserts below
            outcome.append(e)

    thread = threading.Thread(target=call, daemon=True)
    thread.start()
    time.sleep(1.0)  # well inside the call by now
    assert thread.is_alive(), f"{variant} returned early: {outcome}"
    # No rank aborts before every rank has seen its call blocked: a peer's abort ends the call too.
    mark(shared / f"blocked.{rank}")
    wait_for([shared / f"blocked.{r}" for r in range(size - 1)])
    start = time.monotonic()
    comm.abort()
    took = time.monotonic() - start
    thread.join(timeout=5)
    mark(shared / f"aborted.{rank}")
    print(f"RESULT blocked={variant} abort_ms={took * 1e3:.1f}", flush=True)
    assert took < ABORT_LIMIT_S, f"ncclCommAbort took {took:.3f} s with {variant} blocked in another thread"
    assert not thread.is_alive(), f"{variant} still blocked 5 s after the abort"
    assert outcome and isinstance(outcome[0], NcclError), f"{variant} ended with {outcome}"
    print(f"PASS blocked:{variant}", flush=True)


# --- revoke ---------------------------------------------------------------------------------------

INVALID_USAGE = 5
REVOKE_QUEUED = 50


def revoke_rank(variant: str, shared: Path, rank: int, size: int, uid: str) -> None:
    comm = Communicator(size, rank, uid, device=local_device())
    nccl, lib = comm._nccl, comm._nccl.lib
    comm.barrier()
    late = size - 1
    if rank == late:  # stops calling; its peers shrink it away, then it leaves
        wait_for([shared / f"shrunk.{r}" for r in range(late)])
        comm.abort()
        print(f"PASS revoke:{variant}", flush=True)
        return
    stream = cp.cuda.Stream(non_blocking=True)
    data = cp.ones(COUNT, dtype=cp.float32)
    for _ in range(REVOKE_QUEUED):  # the first waits for the late rank, the rest behind it
        comm.all_reduce(data, stream=stream)
    time.sleep(0.5)
    assert not stream.done, "the queued all-reduces ended without the late rank"
    start = time.monotonic()
    nccl.check(lib.ncclCommRevoke(comm.handle, 0), comm.handle)
    took = time.monotonic() - start
    stream.synchronize()
    drained = time.monotonic() - start
    error = comm.async_error()
    refused = int(
        lib.ncclAllReduce(
            ffi.cast("void*", data.data.ptr),
            ffi.cast("void*", data.data.ptr),
            1,
            7,
            0,
            comm.handle,
            ffi.cast("void*", stream.ptr),
        )
    )
    finalized = int(lib.ncclCommFinalize(comm.handle))
    excluded = ffi.new("int[1]", [late])
    new = ffi.new("ncclComm_t*")
    nccl.check(lib.ncclCommShrink(comm.handle, excluded, 1, new, ffi.NULL, 0), comm.handle)
    shrunk = Communicator._wrap(nccl, new[0], local_device())
    shrunk_size = shrunk.size
    values = cp.full(COUNT, rank + 1, dtype=cp.float32)
    shrunk.all_reduce(values, stream=stream)
    stream.synchronize()
    expected = float(sum(r + 1 for r in range(late)))
    exact = bool(cp.all(values == expected))
    mark(shared / f"shrunk.{rank}")
    shrunk.destroy()
    nccl.check(lib.ncclCommDestroy(comm.handle))
    print(f"RESULT revoke={variant} revoke_ms={took * 1e3:.1f} drained_ms={drained * 1e3:.1f}", flush=True)
    assert took < ABORT_LIMIT_S and drained < ABORT_LIMIT_S, f"revoke {took:.3f} s, drained {drained:.3f} s"
    assert error == 0, f"ncclCommGetAsyncError gave {error} after the revoke, expected ncclSuccess"
    assert refused == INVALID_USAGE, f"a call on the revoked communicator returned {refused}"
    assert finalized == INVALID_USAGE, f"ncclCommFinalize on the revoked communicator returned {finalized}"
    assert shrunk_size == late, f"the shrunk communicator has {shrunk_size} ranks, expected {late}"
    assert exact, f"the shrunk communicator's all-reduce is not {expected}"
    print(f"PASS revoke:{variant}", flush=True)


SCENARIOS = {"init": (init_victim, init_survivor), "collective": (collective_rank, collective_rank)}


def main() -> int:
    shared, scenario = Path(sys.argv[1]), sys.argv[2]
    name, _, variant = scenario.partition(":")
    rank, size, uid = world_from_env()
    victim = rank == size - 1
    if name in ("blocked", "revoke"):
        (blocked_rank if name == "blocked" else revoke_rank)(variant, shared, rank, size, uid)
        return 0
    if victim and CHILD_FLAG not in os.environ:
        return run_victim_child(sys.argv)
    victim_fn, survivor_fn = SCENARIOS[name]
    (victim_fn if victim else survivor_fn)(variant, shared, rank, size, uid)
    return 0


if __name__ == "__main__":
    sys.exit(main())
