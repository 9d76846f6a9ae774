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
