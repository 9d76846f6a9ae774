"""Locating the reference NCCL (the `nvidia-nccl-cu13==2.32.3` wheel), CUDA headers, host compilers and
our built library, for the ABI and export tests. Plain module: the tests put tests/ on sys.path."""

from __future__ import annotations

import ctypes
import importlib.util
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

STOCK_VERSION = "2.32.3"
STOCK_VERSION_CODE = 23203


def repo_root() -> Path:
    return Path(__file__).resolve().parent.parent


def _nvidia_dirs() -> list[Path]:
    """The directories of the `nvidia` namespace package, where NVIDIA's wheels unpack."""
    spec = importlib.util.find_spec("nvidia")
    if spec is None or spec.submodule_search_locations is None:
        return []
    return [Path(p) for p in spec.submodule_search_locations]


def _header_version_code(header: Path) -> int | None:
    match = re.search(r"^#define\s+NCCL_VERSION_CODE\s+(\d+)", header.read_text(), re.M)
    return int(match.group(1)) if match else None


def stock_include_dir() -> tuple[Path | None, str]:
    """Stock's include dir (holding nccl.h), or None and why not."""
    override = os.environ.get("MSCCLPP_NCCL_STOCK_INCLUDE")
    candidates = [Path(override)] if override else [d / "nccl" / "include" for d in _nvidia_dirs()]
    for inc in candidates:
        header = inc / "nccl.h"
        if not header.is_file():
            continue
        code = _header_version_code(header)
        if code != STOCK_VERSION_CODE:
            return None, f"{header} is NCCL version code {code}, the tests need {STOCK_VERSION_CODE}"
        return inc, ""
    if override:
        return None, f"MSCCLPP_NCCL_STOCK_INCLUDE={override} holds no nccl.h"
    return None, f"stock NCCL headers not found (pip install nvidia-nccl-cu13=={STOCK_VERSION})"


def library_version_code(path: Path) -> int | None:
    """What ncclGetVersion of the library at `path` reports (None: it does not load or answer)."""
    try:
        lib = ctypes.CDLL(str(path), mode=os.RTLD_LOCAL)
        code = ctypes.c_int(0)
        return code.value if lib.ncclGetVersion(ctypes.byref(code)) == 0 else None
    except OSError:
        return None


def stock_lib() -> tuple[Path | None, str]:
    """Stock's libnccl.so.2 (MSCCLPP_NCCL_STOCK_LIB: any version; else the 2.32.3 wheel), or None and why
    not. Older wheels (PyTorch's 2.28) refuse several ranks on one GPU, so they do not count."""
    override = os.environ.get("MSCCLPP_NCCL_STOCK_LIB")
    if override:
        path = Path(override)
        return (path, "") if path.is_file() else (None, f"MSCCLPP_NCCL_STOCK_LIB={override} does not exist")
    for d in _nvidia_dirs():
        path = d / "nccl" / "lib" / "libnccl.so.2"
        if path.is_file():
            code = library_version_code(path)
            if code != STOCK_VERSION_CODE:
                return None, f"{path} is NCCL version code {code}, the tests need {STOCK_VERSION_CODE}"
            return path, ""
    return None, f"stock libnccl.so.2 not found (pip install nvidia-nccl-cu13=={STOCK_VERSION})"


def our_lib() -> tuple[Path | None, str]:
    path = Path(os.environ.get("MSCCLPP_NCCL_LIB", repo_root() / "mscclpp_nccl" / "lib" / "libnccl.so.2"))
    if not path.is_file():
        return None, f"{path} is not built (set MSCCLPP_NCCL_LIB or build the package)"
    return path, ""


def require_cuda_include() -> str:
    """`-I` for a directory holding cuda_runtime.h; skips the calling test where there is none."""
    include, why = cuda_include_dir()
    if include is None:
        pytest.skip(why)
    return f"-I{include}"


def cuda_include_dir() -> tuple[Path | None, str]:
    """A directory holding cuda_runtime.h (nccl.h includes it), or None and why not."""
    candidates: list[Path] = []
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(Path(os.environ[var]) / "include")
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(Path(nvcc).resolve().parent.parent / "include")
    candidates.append(Path("/usr/local/cuda/include"))
    # CUDA 13 runtime wheels carry the headers too.
    for d in _nvidia_dirs():
        candidates += [d / "cu13" / "include", d / "cuda_runtime" / "include"]
    for inc in candidates:
        if (inc / "cuda_runtime.h").is_file():
            return inc, ""
    return None, "no CUDA headers (cuda_runtime.h) found: set CUDA_HOME or put nvcc on PATH"


def compiler(kind: str) -> str | None:
    """The host C ("c") or C++ ("c++") compiler."""
    env, names = ("CC", ["cc", "gcc", "clang"]) if kind == "c" else ("CXX", ["c++", "g++", "clang++"])
    if os.environ.get(env):
        return os.environ[env]
    for name in names:
        path = shutil.which(name)
        if path:
            return path
    return None


@dataclass(frozen=True)
class DynSymbol:
    name: str  # as readelf prints it: a versioned symbol keeps its "@VERSION" suffix
    kind: str  # FUNC, OBJECT, ...
    bind: str  # GLOBAL, WEAK
    value: int


def defined_dynamic_symbols(lib: Path) -> dict[str, DynSymbol]:
    """The symbols that `lib` defines in its dynamic symbol table, by name (version suffix stripped)."""
    out = subprocess.run(
        ["readelf", "--dyn-syms", "--wide", str(lib)], check=True, capture_output=True, text=True
    ).stdout
    symbols: dict[str, DynSymbol] = {}
    for line in out.splitlines():
        # Num: Value Size Type Bind Vis Ndx Name
        fields = line.split()
        if len(fields) < 8 or not fields[0].rstrip(":").isdigit():
            continue
        ndx, name = fields[6], fields[7]
        if ndx == "UND" or not name:
            continue
        sym = DynSymbol(name=name, kind=fields[3], bind=fields[4], value=int(fields[1], 16))
        symbols[name.split("@")[0]] = sym
    return symbols


def soname(lib: Path) -> str | None:
    out = subprocess.run(
        ["readelf", "-d", "--wide", str(lib)], check=True, capture_output=True, text=True
    ).stdout
    match = re.search(r"\(SONAME\).*\[(.*)\]", out)
    return match.group(1) if match else None
