"""Every other collective and send/recv on the GPU, N ranks sharing the GPUs present (under MPS).

The scenarios live in tests/gpu/collectives_worker.py; each rank checks its own result.
"""

from __future__ import annotations

import pytest
from multirank import ROOT, assert_all_passed, run_ranks

WORKER = ROOT / "tests" / "gpu" / "collectives_worker.py"
SCENARIOS = ["matrix", "large", "graph", "p2p", "groups", "threads"]


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_collective_scenarios(nranks: int) -> None:
    assert_all_passed(run_ranks(nranks, WORKER, *SCENARIOS), SCENARIOS, nranks)
