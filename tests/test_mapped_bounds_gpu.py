"""GPU test of the checks on mapped zero-copy posts (native/algorithms/mapped_bounds.h): ranks that call
all_reduce or all_gather with different counts, or broadcast with different roots, on buffers large enough
to go mapped, each get ncclInvalidUsage as the communicator's asynchronous error, with no hang or timeout
and nothing written; the same calls matched stay exact. The scenarios live in
tests/gpu/mapped_bounds_worker.py, each rank checking its own results."""

from __future__ import annotations

import re

import pytest
from multirank import ROOT, assert_all_passed, run_ranks

WORKER = ROOT / "tests" / "gpu" / "mapped_bounds_worker.py"
SCENARIOS = ["all_reduce", "all_gather", "broadcast_roots"]
LOG = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING"}


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4])
def test_mapped_bounds_ranks_called_with_different_counts_get_invalid_usage(nranks: int) -> None:
    # A kernel that missed the difference would hang until this timeout and then report ncclTimeout.
    env = {**LOG, "MSCCLPP_NCCL_WAIT_TIMEOUT": "20"}
    output = run_ranks(nranks, WORKER, *SCENARIOS, env=env, timeout=300)
    assert_all_passed(output, SCENARIOS, nranks)
    # The mismatched calls took the mapped path, the case the check is for (ready: zero-copy agreed on
    # their buffers' allocations, mapped by the matched calls before).
    for name in ("all_reduce", "all_gather", "broadcast"):
        ready = re.findall(rf"{name} \d+ bytes \S+: zero-copy \(mapped, ready\)", output)
        assert ready, f"no {name} call went mapped zero-copy\n{output[-3000:]}"
