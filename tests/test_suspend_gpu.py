"""ncclCommSuspend, ncclCommResume and ncclCommMemStats on the GPU (tests/gpu/suspend_worker.py): the
memory suspend frees comes back to the driver as ncclCommMemStats says, calls in between fail, and the
communicator is exact again after resume."""

from __future__ import annotations

import pytest
from multirank import ROOT, run_worker

WORKER = ROOT / "tests" / "gpu" / "suspend_worker.py"


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_suspend_frees_and_resume_restores(nranks: int) -> None:
    output = run_worker(nranks, WORKER, "suspend")
    print("\n".join(line for line in output.splitlines() if "RESULT suspend" in line))  # shown with -s
