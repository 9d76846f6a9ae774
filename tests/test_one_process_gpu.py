"""Several ranks in one process, driven from one thread (nccl-tests, CuPy).

The scenarios live in tests/gpu/one_process_worker.py."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from multirank import ROOT

SCENARIOS = ["group_init", "group_failure", "shrink", "init_all", "nonblocking", "nonblocking_split"]


@pytest.mark.gpu
def test_ranks_in_one_process() -> None:
    env = dict(os.environ, MSCCLPP_NCCL_WAIT_TIMEOUT="60", MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="60")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    worker = ROOT / "tests" / "gpu" / "one_process_worker.py"
    proc = subprocess.run([sys.executable, str(worker)], env=env, capture_output=True, text=True, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    for name in SCENARIOS:
        assert f"PASS {name}" in output, output[-6000:]
