"""Shared fixtures: GPU tests skip where no GPU is visible, or where the Python packages they drive the
GPU with are missing; library tests skip where it is not built."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from mscclpp_nccl._library import library_path
from mscclpp_nccl.gpus import nvidia_smi_lines as _nvidia_smi_lines

_HAS_GPU = bool(_nvidia_smi_lines())
# What a GPU test needs when it names nothing with @pytest.mark.requires: its ranks use CuPy.
_DEFAULT_REQUIRES = ("cupy",)
_INSTALL = {
    "cupy": "CuPy is not installed (pip install '.[cuda13]', or '.[cuda12]' with a CUDA 12 driver)",
    "torch": "PyTorch is not installed (pip install torch)",
}


def _missing(module: str) -> bool:
    return importlib.util.find_spec(module) is None


def gpu_skip_reason(item: pytest.Item, has_gpu: bool, missing: dict[str, bool]) -> str | None:
    """Why a GPU test cannot run here, or None. `missing` caches find_spec per module."""
    if not has_gpu:
        return "no NVIDIA GPU visible"
    required = [m for mark in item.iter_markers("requires") for m in mark.args] or list(_DEFAULT_REQUIRES)
    for module in required:
        if missing.setdefault(module, _missing(module)):
            return _INSTALL.get(module, f"{module} is not installed")
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing: dict[str, bool] = {}
    for item in items:
        if "gpu" in item.keywords:
            reason = gpu_skip_reason(item, _HAS_GPU, missing)
            if reason:
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.fixture(scope="session")
def has_gpu() -> bool:
    return _HAS_GPU


@pytest.fixture(scope="session")
def nccl_lib() -> Path:
    """Path of the libnccl.so.2 under test ($MSCCLPP_NCCL_LIB or the package's own)."""
    path = library_path()
    if not path.is_file():
        pytest.skip(f"library not built at {path} (run `pip install -e .` or `python setup.py build_native`)")
    return path


@pytest.fixture(scope="session")
def setup_py() -> ModuleType:
    """The repository's setup.py as a module, for tests of its helpers (setup() does not run)."""
    path = Path(__file__).resolve().parent.parent / "setup.py"
    spec = importlib.util.spec_from_file_location("mscclpp_nccl_setup", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # not __main__: setup() does not run
    return module
