"""What was built and what this machine has: the lines of `python -m mscclpp_nccl info`."""

from __future__ import annotations

import os

from . import VERSION
from ._library import build_info, library_path
from .gpus import nvidia_smi_lines


def gpu_lines() -> list[str]:
    """The GPUs this machine shows (`nvidia-smi -L`), else what CuPy sees; [] when none."""
    lines = nvidia_smi_lines()
    if lines:
        return lines
    try:
        import cupy

        n = cupy.cuda.runtime.getDeviceCount()
        return [f"GPU {i}: {cupy.cuda.runtime.getDeviceProperties(i)['name'].decode()}" for i in range(n)]
    except Exception:  # no CuPy, no driver or no device: all mean "none"
        return []


def describe() -> tuple[list[str], bool]:
    """Lines saying what was built and what this machine has; ok is False when the library won't load."""
    path = library_path()
    lines = [f"package:   mscclpp-nccl {VERSION}", f"library:   {path}"]
    ok = True
    try:
        from .binding import Nccl, version_tuple

        nccl = Nccl.load(path)
        code = nccl.version()
        major, minor, patch = version_tuple(code)
        lines.append(f"version:   {major}.{minor}.{patch} (code {code})")
        lines.append(f"NCCL API:  {major}.{minor}")
        # The library's parameters set in this environment, as it reads them (an invalid value: its default).
        settings = [f"{k}={v}" for k, v in sorted(nccl.parameters().items()) if os.environ.get(k)]
        lines.append("settings:  " + (settings[0] if settings else "none (every parameter at its default)"))
        lines += [f"           {setting}" for setting in settings[1:]]
    except Exception as e:  # not built, not loadable, or cffi missing: say so, do not crash
        ok = False
        lines.append(f"version:   unavailable ({e})")
    info = build_info()
    if info:
        archs = [str(a) for a in info.get("archs", [])]
        targets = ", ".join(f"sm_{a}" for a in archs)
        if archs:
            targets += f" (+ compute_{archs[-1]} PTX)"
        lines.append(f"targets:   {targets or 'unknown'}")
        lines.append(f"built:     {info.get('build_date', '?')} with {info.get('nvcc', '?')}")
        if info.get("git_commit"):
            lines.append(f"commit:    {info['git_commit']}")
    else:
        lines.append("targets:   unknown (no build_info.json)")
    gpus = gpu_lines()
    lines.append("GPUs:      " + ("none" if not gpus else gpus[0]))
    lines += [f"           {g}" for g in gpus[1:]]
    return lines, ok
