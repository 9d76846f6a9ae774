"""ncclCommQueryProperties' struct against stock NCCL 2.32.3's ncclCommProperties_t: the same offset and
size for every field, so that a caller built against stock's header reads our answers where it looks.
CPU only: a host compiler and the headers, no GPU."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import stock_nccl

FIELDS = (
    "size magic version rank nRanks cudaDev nvmlDev deviceApiSupport multimemSupport ginType nLsaTeams"
    " hostRmaSupport railedGinType commHash ginMinStride ginConnectionType ginSupport"
    " devCommRuntimeVersionSize cftSupport cftMulticastSupport cftCountedSupport"
).split()


def layout(tmp_path: Path, name: str, includes: str, type_name: str, flags: list[str]) -> list[str]:
    cxx = stock_nccl.compiler("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    lines = [f'  printf("{f} %zu %zu\\n", offsetof(T, {f}), sizeof(((T*)0)->{f}));' for f in FIELDS]
    source = tmp_path / f"{name}.cc"
    source.write_text(
        f"#include <cstddef>\n#include <cstdio>\n{includes}\nusing T = {type_name};\nint main() {{\n"
        + "\n".join(lines)
        + '\n  printf("sizeof %zu\\n", sizeof(T));\n  return 0;\n}\n'
    )
    binary = tmp_path / name
    subprocess.run([cxx, "-std=c++17", *flags, str(source), "-o", str(binary)], check=True)
    return subprocess.run([str(binary)], check=True, capture_output=True, text=True).stdout.splitlines()


def test_properties_layout_matches_stock(tmp_path: Path) -> None:
    stock_include, why = stock_nccl.stock_include_dir()
    if stock_include is None:
        pytest.skip(why)
    cuda = stock_nccl.require_cuda_include()
    ours = layout(
        tmp_path,
        "ours",
        '#include "shim/comm_properties.h"',
        "CommProperties",
        [f"-I{stock_nccl.repo_root()}"],
    )
    stock = layout(
        tmp_path,
        "stock",
        "#include <nccl.h>\n#include <nccl_device/host.h>",
        "ncclCommProperties_t",
        [f"-I{stock_include}", cuda],
    )
    assert len(ours) == len(FIELDS) + 1
    assert ours == stock
