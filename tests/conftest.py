"""Shared fixtures: GPU tests skip where no GPU is visible; library tests skip where it is not built."""

from __future__ import annotations

from pathlib import Path

import pytest

from mscclpp_nccl._library import library_path
from mscclpp_nccl.gpus import nvidia_smi_lines as _nvidia_smi_lines

_HAS_GPU = bool(_nvidia_smi_lines())


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _HAS_GPU:
        return
    skip = pytest.mark.skip(reason="no NVIDIA GPU visible")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


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
