"""The built library reaches the CUDA driver only through cudart's entry-point query: it does not link
libcuda, so it loads on a machine without a GPU or driver, and ncclMemAlloc there fails cleanly with a
message about CUDA instead of crashing. CPU only (the last test skips where a GPU is present)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (binutils) is not installed")
    return path


def test_no_libcuda_needed(nccl_lib: Path) -> None:
    out = subprocess.run(
        [_tool("readelf"), "-d", "--wide", str(nccl_lib)], check=True, capture_output=True, text=True
    ).stdout
    needed = re.findall(r"\(NEEDED\).*\[(.*)\]", out)
    assert needed, f"readelf shows no NEEDED entries for {nccl_lib}:\n{out}"
    cuda = [lib for lib in needed if lib.startswith("libcuda.so") or lib.startswith("libcudart.so")]
    assert not cuda, f"{nccl_lib} links {cuda}: the driver must be reached through cudart's entry points"


def test_no_undefined_driver_symbols(nccl_lib: Path) -> None:
    """No driver function (cuXxx) is left for the dynamic linker to find in libcuda."""
    out = subprocess.run(
        [_tool("nm"), "-D", "--undefined-only", str(nccl_lib)], check=True, capture_output=True, text=True
    ).stdout
    names = [line.split()[-1].split("@")[0] for line in out.splitlines() if line.strip()]
    driver = [n for n in names if re.fullmatch(r"cu[A-Z]\w*", n)]
    assert not driver, f"undefined driver symbols in {nccl_lib}: {driver}"


# Runs in a child process, so that a crash fails this test instead of killing pytest.
_PROBE = r"""
import json, sys
from mscclpp_nccl.binding import Nccl, ffi
nccl = Nccl.load(sys.argv[1])
lib = nccl.lib
ptr = ffi.new("void**")
out = {}
out["alloc"] = int(lib.ncclMemAlloc(ptr, 1 << 20))
out["alloc_error"] = nccl.last_error()
out["alloc_ptr_null"] = ptr[0] == ffi.NULL
out["alloc_zero"] = int(lib.ncclMemAlloc(ptr, 0))
out["alloc_zero_ptr_null"] = ptr[0] == ffi.NULL
out["alloc_null_out"] = int(lib.ncclMemAlloc(ffi.NULL, 8))
out["free_null"] = int(lib.ncclMemFree(ffi.NULL))
out["alloc_again"] = int(lib.ncclMemAlloc(ptr, 8))
out["alloc_again_error"] = nccl.last_error()
print(json.dumps(out))
"""


def test_mem_alloc_without_gpu_fails_cleanly(nccl_lib: Path, has_gpu: bool) -> None:
    if has_gpu:
        pytest.skip("a GPU is present: ncclMemAlloc would succeed (tests/test_mem_alloc_gpu.py covers it)")
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE, str(nccl_lib)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, f"the probe died (rc {proc.returncode}):\n{proc.stdout}\n{proc.stderr}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    if out["alloc"] == 0:
        pytest.skip("ncclMemAlloc succeeded: CUDA works here although no GPU was detected")
    # ncclUnhandledCudaError, with a message that says what is missing.
    assert out["alloc"] == 1, out
    assert "CUDA" in out["alloc_error"], out
    assert out["alloc_ptr_null"], out
    # The loader's verdict is remembered, and reported again on every call.
    assert out["alloc_again"] == 1 and "CUDA" in out["alloc_again_error"], out
    # What needs no device still works.
    assert out["alloc_zero"] == 0 and out["alloc_zero_ptr_null"], out
    assert out["alloc_null_out"] == 4, out  # ncclInvalidArgument
    assert out["free_null"] == 0, out
