"""Zero-copy without windows (native/transport/DESIGN-zero-copy.md): large all-reduces on ordinary device
memory go zero-copy once every peer has mapped the allocations, and stay exact through reuse, reallocation at
the same address, graph replays, memory that cannot be shared and more allocations than are kept. N ranks
share the GPU under MPS; the scenarios live in tests/gpu/zero_copy_worker.py, each rank checking its own
results.
"""

from __future__ import annotations

import re

import pytest
from multirank import ROOT, assert_all_passed, run_ranks

WORKER = ROOT / "tests" / "gpu" / "zero_copy_worker.py"
SCENARIOS = ["recurring", "realloc", "graph", "unshareable", "many", "exchanges"]
LOG = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING"}


def mapped_calls(output: str) -> tuple[int, int]:
    """(ready, not ready) counts over every rank's log of all-reduces that took the mapped path."""
    ready = len(re.findall(r"zero-copy \(mapped, ready\)", output))
    waiting = len(re.findall(r"zero-copy \(mapped, not ready\)", output))
    return ready, waiting


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_zero_copy_without_windows(nranks: int) -> None:
    output = run_ranks(nranks, WORKER, *SCENARIOS, env=LOG)
    assert_all_passed(output, SCENARIOS, nranks)
    ready, waiting = mapped_calls(output)
    # recurring (14 calls), realloc (15), graph (2 captured, waiting for the peers, + 4 eager), many (600),
    # exchanges (42 at the larger ranges, more at the smaller): most of recurring, realloc, graph and
    # exchanges find every peer's mapping in place.
    assert ready >= 40 * nranks, f"only {ready} mapped calls were ready ({waiting} not)\n{output[-3000:]}"
    assert waiting > 0, "every call was ready: the first use of an allocation cannot be"


@pytest.mark.gpu
def test_zero_copy_disabled() -> None:
    env = {**LOG, "MSCCLPP_NCCL_ZERO_COPY": "0"}
    output = run_ranks(2, WORKER, "recurring", "graph", env=env)
    assert_all_passed(output, ["recurring", "graph"], 2)
    assert mapped_calls(output) == (0, 0), "MSCCLPP_NCCL_ZERO_COPY=0 still took the mapped path"


# cumem: 8 eager all-reduces and 20 replays of a captured one, all but the first eager calls zero-copy.
# segments (buffers over several allocations): 8 eager all-reduces (the first not ready), a captured one
# (which waits for the peers) and 6 after an allocation under the buffer changed (a new run, whose first
# calls are not ready); without runs none would be ready.
@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
@pytest.mark.parametrize("scenario,ready_per_rank", [("cumem", 6), ("segments", 10)])
def test_zero_copy_on_cumem_memory(scenario: str, ready_per_rank: int, nranks: int) -> None:
    output = run_ranks(nranks, WORKER, scenario, env=LOG)
    assert_all_passed(output, [scenario], nranks)
    ready, waiting = mapped_calls(output)
    assert ready >= ready_per_rank * nranks, (
        f"only {ready} mapped calls in {scenario} were ready ({waiting} not)"
    )


@pytest.mark.gpu
def test_registered_buffers_are_zero_copy_from_the_first_call() -> None:
    output = run_ranks(4, WORKER, "registered", env=LOG)
    assert_all_passed(output, ["registered"], 4)
    ready, waiting = mapped_calls(output)
    assert (ready, waiting) == (6 * 4, 0), f"{ready} ready, {waiting} not: registration was not honoured"


@pytest.mark.gpu
def test_mem_alloc_buffers_are_zero_copy_from_the_first_call() -> None:
    output = run_ranks(4, WORKER, "offered", env=LOG)
    assert_all_passed(output, ["offered"], 4)
    ready, waiting = mapped_calls(output)
    assert (ready, waiting) == (6 * 4, 0), (
        f"{ready} ready, {waiting} not: ncclMemAlloc memory was not offered"
    )


@pytest.mark.gpu
def test_freed_memory_returns_to_the_driver() -> None:
    output = run_ranks(4, WORKER, "memory_returns")
    assert_all_passed(output, ["memory_returns"], 4)


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_sendrecv_pulls_from_the_senders_buffer(nranks: int) -> None:
    output = run_ranks(nranks, WORKER, "sendrecv", env=LOG)
    assert_all_passed(output, ["sendrecv"], nranks)
    ready = len(re.findall(r"p2p_chunked, zero-copy \(mapped, ready\)", output))
    waiting = len(re.findall(r"p2p_chunked, zero-copy \(mapped, not ready\)", output))
    # Per rank: 6 + 4 ring sends, a captured one, 4 x n sends to every peer, 6 to one peer: all but each
    # buffer's first use (and the capture's, which waits for the mapping) find the receiver's mapping.
    assert ready >= 10 * nranks, f"only {ready} zero-copy sends were ready ({waiting} not)\n{output[-3000:]}"
    assert waiting > 0, "every send was ready: the first use of an allocation cannot be"
