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


DEVICE_ENV = "MSCCLPP_NCCL_DEVICE"
# Where launchers put a process's rank among those of its host: torchrun and ours, Open MPI, MPICH and
# Intel MPI (Hydra), Slurm.
LOCAL_RANK_ENVS = ("LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID")


def local_device(count: int | None = None, env: dict[str, str] | None = None) -> int:
    """The CUDA device index (among the visible ones) this rank should use.

    MSCCLPP_NCCL_DEVICE when set (our launcher sets it for every rank: LOCAL_RANK, or the rank's share of
    a GPU when ranks share); else the local rank a launcher gave (torchrun's LOCAL_RANK, or MPI's), modulo
    `count` devices when given, so that more ranks than GPUs share them in turn; else 0."""
    env = os.environ if env is None else env
    text = env.get(DEVICE_ENV)
    if text is not None and text.strip():
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"{DEVICE_ENV}={text!r} is not a device index") from None
    for name in LOCAL_RANK_ENVS:
        text = env.get(name)
        if text is not None and text.strip().isdigit():
            local = int(text)
            return local % count if count else local
    return 0


def gpu_archs() -> list[str]:
    """Each GPU's architecture as the tuning table spells it ("sm_90"), from nvidia-smi's compute
    capability; [] without nvidia-smi or a driver, or where it cannot tell."""
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    query = [smi, "--query-gpu=compute_cap", "--format=csv,noheader"]
    try:
        out = subprocess.run(query, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return []
    if out.returncode != 0:
        return []
    archs = []
    for line in out.stdout.splitlines():
        m = re.fullmatch(r"\s*(\d+)\.(\d+)\s*", line)
        if not m:
            return []
        archs.append(f"sm_{m.group(1)}{m.group(2)}")
    return archs


def gpu_names() -> list[str]:
    """The name of each GPU `nvidia-smi -L` lists (cudaDeviceProp::name, as the tuning table keys it)."""
    names = []
    for line in nvidia_smi_lines():
        m = re.match(r"GPU \d+: (.*?)(?: \(UUID: [^)]*\))?$", line)
        if m:
            names.append(m.group(1).strip())
    return names
