"""The device-side tools that only the GPU machine runs (perf/*.cu, tests/gpu/*.cu) build here, with the
command each one's header documents, against the current sources and library. A change to a kernel's
launcher or to nccl.h then fails CI instead of a device run. CPU only: nvcc, no GPU."""

from __future__ import annotations

import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TOOLS = [
    "perf/nccl_timer.cu",
    "perf/launch_cost_bench.cu",
    "perf/reduce_loop_bench.cu",
    "perf/packet_kernel_bench.cu",
    "tests/gpu/stream_order_check.cu",
]


def documented_build(source: Path) -> list[str]:
    """The nvcc command in `source`'s header comment: the first comment line naming nvcc, with the
    lines its trailing backslashes continue it onto."""
    words: list[str] = []
    continued = False
    for line in source.read_text().splitlines():
        if not line.startswith("//"):
            break
        text = line[2:].strip()
        if not continued and "nvcc " not in text:
            continue
        if not continued:
            text = text[text.index("nvcc ") :]
        continued = text.endswith("\\")
        words += shlex.split(text.rstrip("\\"))
        if not continued:
            return words
    raise AssertionError(f"{source} documents no nvcc command in its header")


def test_documented_build_reads_continuations(tmp_path: Path) -> None:
    source = tmp_path / "tool.cu"
    header = ["// Tool.", "// Build:  nvcc -O2 -o build/tool \\", "//   tool.cu -lfoo", "// Run: build/tool"]
    source.write_text("\n".join(header) + "\n")
    assert documented_build(source) == ["nvcc", "-O2", "-o", "build/tool", "tool.cu", "-lfoo"]


@pytest.mark.parametrize("tool", TOOLS)
def test_device_tool_builds(tool: str, tmp_path: Path, nccl_lib: Path) -> None:
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc is not installed")
    command = documented_build(ROOT / tool)
    # Built into the test's folder, and linked against the library under test.
    out = command.index("-o") + 1
    command[out] = str(tmp_path / Path(command[out]).name)
    command = [str(nccl_lib.parent) if word == "mscclpp_nccl/lib" else word for word in command]
    built = subprocess.run([nvcc, *command[1:]], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert built.returncode == 0, f"{' '.join(command)}\n{built.stdout[-3000:]}{built.stderr[-3000:]}"
    assert (tmp_path / Path(command[out]).name).is_file()
