"""One rank of the GPU test of the checks on mapped zero-copy posts (native/algorithms/mapped_bounds.h); run
N with `python -m mscclpp_nccl.run`.

Calls large enough to go mapped zero-copy (native/transport/DESIGN-zero-copy.md) post each rank's count,
collective and root with its buffers, and every rank compares them. Each scenario runs on a communicator
split off for it: three matched calls on the same buffers (exact; the later ones zero-copy, as their
allocations are mapped by then), then one whose counts (or roots) differ between the ranks. That call must
end on every rank, with no hang or timeout, leave every output as it was, and show as ncclInvalidUsage in
ncclCommGetAsyncError; the communicator is then aborted.
"""

from __future__ import annotations

import os
import sys
import time

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from allreduce_worker import Rank, pattern, run_scenarios
from collectives_worker import call as collective

from mscclpp_nccl.communicator import Communicator

INVALID_USAGE = 5  # ncclInvalidUsage
COUNT = 4 << 20  # 16 MiB of float32: mapped at every rank count, all_reduce and exchanges alike
SPARE = 1 << 14  # elements beyond COUNT in every buffer, so that no rank's call runs past its allocation
UNTOUCHED = np.float32(-7)


def expect_sum(count: int, size: int, shift: int) -> np.ndarray:
    return sum(pattern(count, k) + shift for k in range(size))


def check(got: cp.ndarray, expected: np.ndarray, what: str) -> None:
    host = got.get().astype(np.float64)
    bad = np.nonzero(host != expected)[0]
    assert bad.size == 0, f"{what}: {bad.size} of {host.size} wrong, first at {bad[:4]}"


def expect_invalid_usage(r: Rank, comm: Communicator, what: str, outputs: list[cp.ndarray]) -> None:
    """The mismatched call's kernel has ended (the stream is synchronised): its error must be there, and
    `outputs` as filled before the call."""
    deadline = time.monotonic() + 10
    while (error := comm.async_error()) == 0:
        assert time.monotonic() < deadline, f"{what}: no asynchronous error for a call whose ranks differ"
        time.sleep(0.01)
    text = r.nccl.last_error(comm.handle)
    assert error == INVALID_USAGE, f"{what}: async error {error}, not ncclInvalidUsage: {text!r}"
    assert "different counts" in text, f"{what}: the error does not say that counts differ: {text!r}"
    for output in outputs:
        assert bool((output == UNTOUCHED).all()), f"{what}: a call whose ranks differ wrote into an output"
    comm.abort()


def scenario_all_reduce(r: Rank) -> None:
    comm = r.comm.split(0, r.rank)
    send = cp.zeros(COUNT + SPARE, dtype=cp.float32)
    recv = cp.zeros(COUNT + SPARE, dtype=cp.float32)
    for call in range(3):
        send[:COUNT].set(pattern(COUNT, r.rank).astype(np.float32) + call, stream=r.stream)
        r.all_reduce_raw(send, recv, COUNT, "float32", 0, comm=comm)
        r.stream.synchronize()
        check(recv[:COUNT], expect_sum(COUNT, r.size, call), f"matched all_reduce call {call}")
    recv.fill(UNTOUCHED)
    r.stream.synchronize()
    count = COUNT + 1024 * r.rank  # 4 KiB more than the rank before
    r.all_reduce_raw(send, recv, count, "float32", 0, comm=comm)
    r.stream.synchronize()
    expect_invalid_usage(r, comm, "all_reduce", [recv])
    print("PASS all_reduce: 3 matched calls exact, counts that differ: ncclInvalidUsage, nothing written")


def scenario_all_gather(r: Rank) -> None:
    comm = r.comm.split(0, r.rank)
    n = r.size
    send = cp.zeros(COUNT + SPARE, dtype=cp.float32)
    recv = cp.zeros(n * (COUNT + SPARE), dtype=cp.float32)
    for call in range(3):
        send[:COUNT].set(pattern(COUNT, r.rank).astype(np.float32) + call, stream=r.stream)
        collective(r, "all_gather", send, recv, COUNT, "float32", comm=comm.handle)
        r.stream.synchronize()
        expected = np.concatenate([pattern(COUNT, k) + call for k in range(n)])
        check(recv[: n * COUNT], expected, f"matched all_gather call {call}")
    recv.fill(UNTOUCHED)
    r.stream.synchronize()
    collective(r, "all_gather", send, recv, COUNT + 256 * r.rank, "float32", comm=comm.handle)
    r.stream.synchronize()
    expect_invalid_usage(r, comm, "all_gather", [recv])
    print("PASS all_gather: 3 matched calls exact, counts that differ: ncclInvalidUsage, nothing written")


def scenario_broadcast_roots(r: Rank) -> None:
    """Every rank passes the same count but ranks disagree on the root."""
    comm = r.comm.split(0, r.rank)
    buffer = cp.zeros(COUNT + SPARE, dtype=cp.float32)
    for call in range(3):
        buffer[:COUNT].set(pattern(COUNT, r.rank).astype(np.float32) + call, stream=r.stream)
        collective(r, "broadcast", buffer, buffer, COUNT, "float32", root=1, comm=comm.handle)
        r.stream.synchronize()
        check(buffer[:COUNT], pattern(COUNT, 1).astype(np.float64) + call, f"matched broadcast call {call}")
    collective(r, "broadcast", buffer, buffer, COUNT, "float32", root=r.rank % 2, comm=comm.handle)
    r.stream.synchronize()
    expect_invalid_usage(r, comm, "broadcast", [])
    print("PASS broadcast_roots: 3 matched calls exact, then roots that differ: ncclInvalidUsage")


SCENARIOS = {
    "all_reduce": scenario_all_reduce,
    "all_gather": scenario_all_gather,
    "broadcast_roots": scenario_broadcast_roots,
}

if __name__ == "__main__":
    run_scenarios(SCENARIOS)
