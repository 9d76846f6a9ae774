"""The binding declares the whole NCCL API of include/nccl.h, generated from it (mscclpp_nccl/_cdef.py by
mscclpp_nccl.binding_gen), so that it cannot drift: regenerating gives the same file, every function the
header declares is callable through the binding, and the built library has every one of them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from mscclpp_nccl import binding_gen
from mscclpp_nccl.binding import CDEF, Nccl, ffi

REPO = Path(__file__).resolve().parent.parent
HEADER = REPO / "include" / "nccl.h"


def header_functions() -> set[str]:
    text = HEADER.read_text()
    return set(re.findall(r"^(?:ncclResult_t|const char\*|void)\s+(nccl\w+)\s*\(", text, flags=re.M))


def test_the_declarations_are_generated_from_the_header() -> None:
    generated = binding_gen.generate(HEADER)
    current = (REPO / "mscclpp_nccl" / "_cdef.py").read_text()
    assert generated == current, "run: python -m mscclpp_nccl.binding_gen > mscclpp_nccl/_cdef.py"


def test_every_function_of_the_header_is_declared() -> None:
    declared = set(re.findall(r"\b(nccl\w+)\s*\(", CDEF))
    assert header_functions() - declared == set()
    assert len(header_functions()) >= 70


def test_the_config_structs_are_the_header_s() -> None:
    # Append-only versioned structs: their first fields are size, magic and version.
    for name in ("ncclConfig_t", "ncclCollConfig_t", "ncclSimInfo_t", "ncclEncryptionConfig_t"):
        fields = [f for f, _ in ffi.typeof(name).fields]
        assert fields[:3] == ["size", "magic", "version"], name
    assert int(ffi.cast("ncclRedOp_t", 0x7FFFFFFF)) == 0x7FFFFFFF


def test_the_library_has_every_declared_function(nccl_lib: Path) -> None:
    lib = Nccl.load(nccl_lib).lib
    missing = [name for name in sorted(header_functions()) if not hasattr(lib, name)]
    assert missing == []


@pytest.mark.parametrize("name", ["ncclGather", "ncclScatter", "ncclCommSuspend", "ncclGroupSimulateEnd"])
def test_functions_the_old_binding_lacked(name: str) -> None:
    assert name in CDEF
