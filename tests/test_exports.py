"""Our built libnccl.so.2 exports exactly what stock NCCL 2.32.3's does, with the same bindings: weak
`ncclX` (so that profilers and wrappers can interpose), strong `pncclX` at the same address, the
strong `ncclResetDebugInitInternal`, no symbol versions, and the SONAME libnccl.so.2. CPU only."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import stock_nccl

# The one exported function without a pncclX twin.
UNPAIRED = {"ncclResetDebugInitInternal"}


def _libraries() -> tuple[Path, Path]:
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    ours, why = stock_nccl.our_lib()
    if ours is None:
        pytest.skip(why)
    stock, why = stock_nccl.stock_lib()
    if stock is None:
        pytest.skip(why)
    return ours, stock


@pytest.fixture(scope="module")
def symbols() -> tuple[dict[str, stock_nccl.DynSymbol], dict[str, stock_nccl.DynSymbol]]:
    ours, stock = _libraries()
    return stock_nccl.defined_dynamic_symbols(ours), stock_nccl.defined_dynamic_symbols(stock)


def test_same_exported_names(symbols: tuple[dict, dict]) -> None:
    ours, stock = symbols
    missing = sorted(set(stock) - set(ours))
    extra = sorted(set(ours) - set(stock))
    assert not missing, f"exported by stock but not by ours ({len(missing)}): {missing}"
    assert not extra, f"exported by ours but not by stock ({len(extra)}): {extra}"


def test_same_bindings(symbols: tuple[dict, dict]) -> None:
    ours, stock = symbols
    wrong = [
        f"{name}: ours {ours[name].kind}/{ours[name].bind}, stock {stock[name].kind}/{stock[name].bind}"
        for name in sorted(set(ours) & set(stock))
        if (ours[name].kind, ours[name].bind) != (stock[name].kind, stock[name].bind)
    ]
    assert not wrong, "binding or type differs:\n" + "\n".join(wrong)


def test_expected_binding_pattern(symbols: tuple[dict, dict]) -> None:
    """Independent of stock: weak ncclX, strong pncclX aliasing it, strong unpaired internals."""
    ours, _ = symbols
    problems: list[str] = []
    for name, sym in sorted(ours.items()):
        if "@" in sym.name:
            problems.append(f"{sym.name}: carries a symbol version (stock's are unversioned)")
        if sym.kind != "FUNC":
            problems.append(f"{name}: is {sym.kind}, not FUNC")
        if name in UNPAIRED or name.startswith("pnccl"):
            if sym.bind != "GLOBAL":
                problems.append(f"{name}: should be GLOBAL (strong), is {sym.bind}")
        elif name.startswith("nccl"):
            if sym.bind != "WEAK":
                problems.append(f"{name}: should be WEAK, is {sym.bind}")
            twin = ours.get("p" + name)
            if twin is None:
                problems.append(f"{name}: no p{name}")
            elif twin.value != sym.value:
                problems.append(f"{name}: p{name} is not an alias (0x{sym.value:x} vs 0x{twin.value:x})")
        else:
            problems.append(f"{name}: exported but not part of the NCCL API")
    assert not problems, "\n".join(problems)


def test_soname() -> None:
    ours, stock = _libraries()
    assert stock_nccl.soname(stock) == "libnccl.so.2"
    assert stock_nccl.soname(ours) == "libnccl.so.2"


def test_library_is_never_unloaded() -> None:
    """Its own threads (bootstrap receivers, a rendezvous root waiting for late ranks) may outlive a
    dlclose, such as cffi's when its handle is collected at exit: the library must stay mapped
    (DF_1_NODELETE), or they run on in unmapped code (SIGSEGV at exit, seen on the GPU)."""
    if shutil.which("readelf") is None:
        pytest.skip("readelf (binutils) is not installed")
    ours, why = stock_nccl.our_lib()
    if ours is None:
        pytest.skip(why)
    dynamic = subprocess.run(
        ["readelf", "-d", "--wide", str(ours)], check=True, capture_output=True, text=True
    ).stdout
    flags = [line for line in dynamic.splitlines() if "(FLAGS_1)" in line]
    assert flags and "NODELETE" in flags[0], f"no NODELETE in the dynamic section:\n{dynamic}"
