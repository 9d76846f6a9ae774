"""Windows (ncclCommWindowRegister) and the zero-copy all-reduce: N ranks sharing the GPU under MPS,
checked against NumPy. The scenarios live in tests/gpu/window_worker.py; each rank checks its own result.
"""

from __future__ import annotations

import re

import pytest
from multirank import ROOT, assert_all_passed, run_ranks

WORKER = ROOT / "tests" / "gpu" / "window_worker.py"
SCENARIOS = ["matrix", "small", "large", "cudamalloc", "group", "graph", "fallbacks", "exchanges", "pointers"]
# Zero-copy forced at every size, on an odd grid: segments shorter than a block's share, idle blocks.
FORCED_SCENARIOS = ["small", "large", "graph"]
LOG = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,TUNING"}


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 3, 4, 8])
def test_windows(nranks: int) -> None:
    # The choice of every call is logged: the zero-copy kernel must actually have run.
    output = run_ranks(nranks, WORKER, *SCENARIOS, env=LOG)
    assert_all_passed(output, SCENARIOS, nranks)
    assert "zero-copy collectives" in output, "no window was mapped by every rank"
    assert "allreduce_zero_copy" in output, "no all-reduce ran zero-copy"
    for name in ("all_gather", "reduce_scatter", "alltoall"):
        assert re.search(rf"{name} \d+ bytes \S+: zero-copy \(in windows\)", output), f"no {name} in windows"
    assert "copy through scratch" not in output, "a window could not be mapped by every rank"


@pytest.mark.gpu
def test_windows_forced_zero_copy() -> None:
    env = {**LOG, "MSCCLPP_NCCL_ALGO": "all_reduce=allreduce_zero_copy/5"}
    output = run_ranks(3, WORKER, *FORCED_SCENARIOS, env=env)
    assert_all_passed(output, FORCED_SCENARIOS, 3)
    assert "allreduce_zero_copy (forced), 5 blocks" in output
