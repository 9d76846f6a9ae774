"""ncclPutSignal, ncclSignal and ncclWaitSignal on the GPU (tests/gpu/one_sided_worker.py): data put into
peers' symmetric windows, from ncclMemAlloc and cudaMalloc memory, arrives exactly (checked against
NumPy) by the time the waits for its signals end, and the calls NCCL refuses are refused."""

from __future__ import annotations

import pytest
from multirank import ROOT, run_worker

WORKER = ROOT / "tests" / "gpu" / "one_sided_worker.py"


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_put_signal_and_wait(nranks: int) -> None:
    run_worker(nranks, WORKER, "one_sided")
