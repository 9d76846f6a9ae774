"""CPU test of setup.py's incremental build: an object is rebuilt when its source or a header it
included (as nvcc's -MD listed them) is newer, and only then; objects without a listing fall back to
the newest header of the tree."""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest


def write(path: Path, text: str, mtime: float) -> Path:
    path.write_text(text)
    os.utime(path, (mtime, mtime))
    return path


@pytest.fixture
def tree(tmp_path: Path) -> dict[str, Path]:
    """A source including two headers, its object built at t=100 with their listing, and an unrelated
    header."""
    src = write(tmp_path / "kernel.cu", '#include "a.h"\n', 50)
    a = write(tmp_path / "a.h", "", 50)
    b = write(tmp_path / "b.cuh", "", 50)
    other = write(tmp_path / "other.h", "", 50)
    obj = write(tmp_path / "kernel.cu.o", "", 100)
    write(tmp_path / "kernel.cu.d", f"{obj}.tmp : {src} \\\n    {a} \\\n    {b}\n", 100)
    return {"src": src, "a": a, "b": b, "other": other, "obj": obj}


def test_listing_is_parsed(setup_py: ModuleType, tree: dict[str, Path]) -> None:
    deps = setup_py._dependencies(tree["obj"].with_suffix(".d"))
    assert deps == [tree["src"], tree["a"], tree["b"]]
    assert setup_py._dependencies(tree["obj"].with_suffix(".missing")) is None


def test_up_to_date_when_nothing_listed_changed(setup_py: ModuleType, tree: dict[str, Path]) -> None:
    os.utime(tree["other"], (200, 200))  # newer, but not included
    assert not setup_py._stale(tree["src"], tree["obj"], newest_header=200)


@pytest.mark.parametrize("changed", ["src", "a", "b"])
def test_stale_when_a_listed_file_is_newer(setup_py: ModuleType, tree: dict[str, Path], changed: str) -> None:
    os.utime(tree[changed], (200, 200))
    assert setup_py._stale(tree["src"], tree["obj"], newest_header=0)


def test_stale_when_a_listed_header_is_gone(setup_py: ModuleType, tree: dict[str, Path]) -> None:
    tree["b"].unlink()
    assert setup_py._stale(tree["src"], tree["obj"], newest_header=0)


def test_stale_without_object(setup_py: ModuleType, tree: dict[str, Path]) -> None:
    tree["obj"].unlink()
    assert setup_py._stale(tree["src"], tree["obj"], newest_header=0)


def test_unlisted_object_falls_back_to_newest_header(setup_py: ModuleType, tree: dict[str, Path]) -> None:
    tree["obj"].with_suffix(".d").unlink()
    assert not setup_py._stale(tree["src"], tree["obj"], newest_header=90)
    assert setup_py._stale(tree["src"], tree["obj"], newest_header=200)
