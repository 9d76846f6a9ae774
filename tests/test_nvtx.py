"""CPU test of the NVTX ranges (shim/nvtx_range.h): a minimal NVTX tool (tests/nvtx/recording_tool.c,
loaded through NVTX_INJECTION64_PATH as Nsight Systems loads its own) records what our library opens.
Every API call is a range in the "NCCL" domain named after its function, as in stock NCCL, and
collectives and point-to-point calls carry the communicator, bytes, datatype, op and root or peer."""

from __future__ import annotations

import shutil
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import stock_nccl

ROOT = Path(__file__).resolve().parents[1]
CALLS = """
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
version = ctypes.c_int()
assert lib.ncclGetVersion(ctypes.byref(version)) == 0
# Invalid communicators: the calls fail, and their ranges are open all the same.
assert lib.ncclAllReduce(None, None, ctypes.c_size_t(1000), 7, 0, None, None) != 0  # float32, sum
assert lib.ncclSend(None, ctypes.c_size_t(10), 8, 3, None, None) != 0  # float64 to peer 3
assert lib.ncclBroadcast(None, None, ctypes.c_size_t(6), 9, 2, None, None) != 0  # bfloat16 from root 2
"""


def payload(line: str) -> tuple[int, int, int, int, int]:
    raw = bytes(int(b, 16) for b in line.split(" payload ")[1].split())
    return struct.unpack("<QQiii", raw[:28])


def test_api_calls_open_named_ranges_with_payloads(tmp_path: Path) -> None:
    compiler = shutil.which("gcc") or shutil.which("cc")
    if compiler is None:
        pytest.skip("no C compiler")
    ours, why = stock_nccl.our_lib()
    if ours is None:
        pytest.skip(why)
    tool = tmp_path / "recording_tool.so"
    include, why = stock_nccl.cuda_include_dir()
    if include is None or not (include / "nvtx3" / "nvToolsExt.h").exists():
        pytest.skip(why or "CUDA's nvtx3 headers are not installed")
    subprocess.run(
        [
            compiler,
            "-shared",
            "-fPIC",
            "-O1",
            f"-I{include}",
            "-o",
            str(tool),
            str(ROOT / "tests/nvtx/recording_tool.c"),
        ],
        check=True,
    )
    record = tmp_path / "ranges.txt"
    env = {"NVTX_INJECTION64_PATH": str(tool), "NVTX_RECORD_FILE": str(record), "PATH": "/usr/bin:/bin"}
    subprocess.run([sys.executable, "-c", CALLS, str(ours)], check=True, env=env, timeout=60)
    lines = record.read_text().splitlines()
    assert "domain NCCL" in lines, lines
    pushes = [ln for ln in lines if ln.startswith("push ")]
    assert pushes[0] == "push NCCL ncclGetVersion", pushes
    by_name = {ln.split()[2]: ln for ln in pushes}
    assert payload(by_name["ncclAllReduce"]) == (0, 4000, 7, 0, -1)
    assert payload(by_name["ncclSend"]) == (0, 80, 8, -1, 3)
    assert payload(by_name["ncclBroadcast"]) == (0, 12, 9, -1, 2)
    # Every range is closed, and nothing else is pushed.
    assert [ln.split()[2] for ln in pushes] == [
        "ncclGetVersion",
        "ncclAllReduce",
        "ncclSend",
        "ncclBroadcast",
    ]
    assert lines.count("pop NCCL") == len(pushes)
