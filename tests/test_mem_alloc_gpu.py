"""ncclMemAlloc / ncclMemFree on one GPU (one process, no launcher): cuMem memory exportable as a file
descriptor where the device supports it, cudaMalloc memory with NCCL_CUMEM_ENABLE=0.

The checks live in tests/gpu/mem_alloc_worker.py.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
WORKER = ROOT / "tests" / "gpu" / "mem_alloc_worker.py"


@pytest.mark.gpu
@pytest.mark.parametrize("cumem", ["default", "0"])
def test_mem_alloc(nccl_lib: Path, cumem: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env["MSCCLPP_NCCL_LIB"] = str(nccl_lib)
    env.pop("NCCL_CUMEM_ENABLE", None)
    if cumem != "default":
        env["NCCL_CUMEM_ENABLE"] = cumem
    proc = subprocess.run(
        [sys.executable, str(WORKER)], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-6000:]
    assert "PASS\n" in proc.stdout, output[-6000:]
