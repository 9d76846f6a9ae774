"""The installed package holds what a wheel ships: one copy of the library (libnccl.so.2), what it was
built for, the tuning table and the tools. CPU only. CI runs this file, with the CLI's and the binding's
tests, against the wheel installed in a fresh virtual environment, from a copy of tests/ outside the
source tree; here, against whatever `import mscclpp_nccl` finds."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import mscclpp_nccl
from mscclpp_nccl._library import LIB_DIR, PACKAGE_DIR, build_info

DIST = "mscclpp-nccl"
# Set by CI where the package must come from an installed wheel, not from the source tree.
EXPECT_WHEEL_ENV = "MSCCLPP_NCCL_EXPECT_WHEEL"


def installed_files() -> list[str] | None:
    """The package's files as the RECORD of a wheel install lists them; None for an editable install,
    a source tree's egg-info or no install at all."""
    try:
        record = importlib.metadata.distribution(DIST).read_text("RECORD")
    except importlib.metadata.PackageNotFoundError:
        return None
    names = [line.split(",", 1)[0] for line in (record or "").splitlines()]
    return names if "mscclpp_nccl/__init__.py" in names else None


def test_one_copy_of_the_library(nccl_lib: Path) -> None:
    libs = sorted(p.name for p in LIB_DIR.iterdir() if p.name.startswith("libnccl"))
    # A source tree keeps libnccl.so as a link for linkers; a wheel has no second name.
    assert libs in (["libnccl.so.2"], ["libnccl.so", "libnccl.so.2"]), libs
    if len(libs) == 2:
        assert (LIB_DIR / "libnccl.so").is_symlink()
        assert os.readlink(LIB_DIR / "libnccl.so") == "libnccl.so.2"
    files = installed_files()
    if files is not None:
        assert [f for f in files if "libnccl" in f] == ["mscclpp_nccl/lib/libnccl.so.2"]


def test_build_info_and_tuning_table_are_shipped(nccl_lib: Path) -> None:
    info = build_info()
    assert info.get("archs"), info
    assert info.get("nvcc", "").startswith("Cuda compilation tools")
    table = json.loads((PACKAGE_DIR / "tuning" / "default.json").read_text())
    assert isinstance(table, dict) and table


def test_wheel_is_for_every_python3_on_manylinux() -> None:
    if installed_files() is None:
        pytest.skip(f"{DIST} was not installed from a wheel here")
    wheel = importlib.metadata.distribution(DIST).read_text("WHEEL") or ""
    tags = [line.split(":", 1)[1].strip() for line in wheel.splitlines() if line.startswith("Tag:")]
    assert len(tags) == 1 and tags[0].startswith("py3-none-manylinux_2_"), tags
    assert "Root-Is-Purelib: false" in wheel


def test_info_loads_the_library_without_a_gpu(nccl_lib: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "mscclpp_nccl", "info"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "CUDA_VISIBLE_DEVICES": ""},
        check=False,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"library:   {nccl_lib}" in r.stdout
    assert "targets:   sm_" in r.stdout


def test_imported_from_the_wheel_where_ci_says_so() -> None:
    if not os.environ.get(EXPECT_WHEEL_ENV):
        pytest.skip(f"{EXPECT_WHEEL_ENV} is not set")
    assert installed_files() is not None, f"{DIST} is not installed from a wheel"
    assert "site-packages" in PACKAGE_DIR.parts, PACKAGE_DIR
    assert PACKAGE_DIR != Path(__file__).resolve().parent.parent / "mscclpp_nccl"
    assert Path(mscclpp_nccl.__file__).resolve().parent == PACKAGE_DIR
