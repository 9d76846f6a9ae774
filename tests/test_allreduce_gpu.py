"""ncclAllReduce on the GPU: N ranks sharing the GPUs present (under MPS), checked against NumPy.

The scenarios live in tests/gpu/allreduce_worker.py; each rank checks its own result.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "gpu" / "allreduce_worker.py"
SCENARIOS = ["matrix", "large", "graph", "two_comms", "split", "bad_input", "abort"]


def run_ranks(nranks: int, *args: str, timeout: float = 600) -> str:
    env = dict(os.environ)
    # A deadlock must cost seconds, not the whole run; abort must beat this bound.
    env.setdefault("MSCCLPP_NCCL_WAIT_TIMEOUT", "60")
    env.setdefault("MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT", "60")
    cmd = [sys.executable, "-m", "mscclpp_nccl.run", "-n", str(nranks), "--mps", "--timeout", str(timeout)]
    cmd += ["--", sys.executable, str(WORKER), *args]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout + 30)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    return output


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_allreduce_scenarios(nranks: int) -> None:
    output = run_ranks(nranks, *SCENARIOS)
    for name in SCENARIOS:
        passes = output.count(f"PASS {name}")
        assert passes == nranks, f"{name}: {passes} of {nranks} ranks passed\n{output[-6000:]}"
