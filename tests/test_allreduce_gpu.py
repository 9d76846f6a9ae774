"""ncclAllReduce on the GPU: N ranks sharing the GPUs present (under MPS), checked against NumPy.

The scenarios live in tests/gpu/allreduce_worker.py; each rank checks its own result.
"""

from __future__ import annotations

import pytest
from multirank import ROOT, assert_all_passed, run_ranks

WORKER = ROOT / "tests" / "gpu" / "allreduce_worker.py"
SCENARIOS = ["matrix", "large", "graph", "two_comms", "split", "bad_input", "abort"]


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_allreduce_scenarios(nranks: int) -> None:
    assert_all_passed(run_ranks(nranks, WORKER, *SCENARIOS), SCENARIOS, nranks)


# Each chunked algorithm forced at every size: the matrix then exercises its unaligned, tiny and odd
# sizes too. The second variant uses 5 blocks and 1 KiB chunks, so slots wrap many times per call, at
# an odd number of ranks.
FORCED = {
    "chunked": ("all_reduce=allreduce_two_shot_chunked", [2, 4, 8]),
    "chunked_small_chunks": ("all_reduce=allreduce_two_shot_chunked/5/0/1024", [3]),
}
FORCED_SCENARIOS = ["matrix", "large", "graph", "two_comms", "abort"]


@pytest.mark.gpu
@pytest.mark.parametrize(
    "variant,nranks", [(variant, n) for variant, (_, counts) in FORCED.items() for n in counts]
)
def test_allreduce_forced_algorithm(variant: str, nranks: int) -> None:
    env = {"MSCCLPP_NCCL_ALGO": FORCED[variant][0]}
    output = run_ranks(nranks, WORKER, *FORCED_SCENARIOS, env=env)
    assert_all_passed(output, FORCED_SCENARIOS, nranks)


# Reductions over 10 ranks (the suites above stop at 8): the one-shot and two-shot all-reduces and the
# packet exchange's reduce and reduce_scatter, every type and op, exact against NumPy. A packet receive
# polls its senders in windows of 4 (PacketStep::kSweepRanks): 10 ranks take three, the last one partial.
@pytest.mark.gpu
def test_reductions_over_more_ranks_than_a_sweep() -> None:
    assert_all_passed(run_ranks(10, WORKER, "matrix"), ["matrix"], 10)
    collectives = ROOT / "tests" / "gpu" / "collectives_worker.py"
    assert_all_passed(run_ranks(10, collectives, "matrix"), ["matrix"], 10)
