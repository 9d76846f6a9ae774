"""The GPUs this machine shows (nvidia-smi, CUDA_VISIBLE_DEVICES), found without creating a CUDA context."""

from __future__ import annotations

import os
import re
import shutil
import subprocess


def nvidia_smi_lines() -> list[str]:
    """`nvidia-smi -L` GPU lines (MIG lines excluded); [] without nvidia-smi or a driver."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.startswith("GPU ")]


def visible_gpus(env: dict[str, str] | None = None) -> list[str]:
    """GPUs this process may use, as CUDA_VISIBLE_DEVICES entries, without creating a CUDA context.

    CUDA_VISIBLE_DEVICES wins when set (an empty value hides every GPU); else nvidia-smi's indices.
    """
    env = os.environ if env is None else env
    cvd = env.get("CUDA_VISIBLE_DEVICES")
    if cvd is not None:
        entries = [e.strip() for e in cvd.split(",") if e.strip()]
        # CUDA stops enumerating at the first invalid entry, e.g. "-1" or "NoDevFiles".
        valid = []
        for e in entries:
            if e.startswith("-") or e == "NoDevFiles":
                break
            valid.append(e)
        return valid
    return [str(i) for i in range(len(nvidia_smi_lines()))]


def gpu_uuids() -> dict[str, str]:
    """nvidia-smi index -> GPU UUID."""
    uuids = {}
    for line in nvidia_smi_lines():
        m = re.match(r"GPU (\d+):.*\(UUID: (GPU-[0-9a-fA-F-]+)\)", line)
        if m:
            uuids[m.group(1)] = m.group(2)
    return uuids
