"""Runs a worker script as N ranks through the project's launcher (several ranks share a GPU under
MPS), with bounded waits so that a deadlock fails in seconds."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def wait_for_device(limit_s: float = 30.0) -> None:
    """Waits until a new process can allocate on the GPU. After a client is killed, the MPS server
    turns new clients away ("busy or unavailable") for a moment while it cleans up after it."""
    probe = [sys.executable, "-c", "import cupy; cupy.zeros(1); cupy.cuda.runtime.deviceSynchronize()"]
    deadline = time.monotonic() + limit_s
    while subprocess.run(probe, capture_output=True, check=False).returncode != 0:
        assert time.monotonic() < deadline, "the GPU stayed unavailable to new processes"
        time.sleep(1.0)


def run_ranks(
    nranks: int,
    worker: Path,
    *args: str,
    timeout: float = 600,
    env: dict[str, str] | None = None,
    launcher_args: list[str] | None = None,
    expect_rc: int = 0,
    mps: bool = True,
) -> str:
    """Runs `worker` as `nranks` ranks sharing the GPU: under MPS by default, else time-sliced (the ranks
    are kept off any MPS daemon that the environment names)."""
    full_env = dict(os.environ)
    full_env.setdefault("MSCCLPP_NCCL_WAIT_TIMEOUT", "60")
    full_env.setdefault("MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT", "60")
    full_env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), full_env.get("PYTHONPATH")]))
    full_env.update(env or {})
    share = "--mps" if mps else "--share-gpus"
    cmd = [sys.executable, "-m", "mscclpp_nccl.run", "-n", str(nranks), share, "--timeout", str(timeout)]
    cmd += [*(launcher_args or []), "--", sys.executable, str(worker), *args]
    with tempfile.TemporaryDirectory(prefix="no-mps-") as no_daemon:
        if not mps:  # a CUDA client joins the daemon whose pipe directory it is given, if one answers there
            full_env["CUDA_MPS_PIPE_DIRECTORY"] = no_daemon
        proc = subprocess.run(
            cmd, cwd=ROOT, env=full_env, capture_output=True, text=True, timeout=timeout + 30
        )
    output = proc.stdout + proc.stderr
    assert proc.returncode == expect_rc, output[-6000:]
    return output


def run_worker(nranks: int, worker: Path, scenario: str, *args: str, timeout: float = 180) -> str:
    """Runs `worker` (with `args`) as `nranks` ranks under MPS once the GPU takes new clients, and checks
    that every rank printed `PASS <scenario>`."""
    wait_for_device()
    output = run_ranks(nranks, worker, *args, timeout=timeout)
    assert_all_passed(output, [scenario], nranks)
    return output


def assert_all_passed(output: str, scenarios: list[str], nranks: int) -> None:
    for name in scenarios:
        passes = output.count(f"PASS {name}")
        assert passes == nranks, f"{name}: {passes} of {nranks} ranks passed\n{output[-6000:]}"
