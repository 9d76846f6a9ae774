"""The C++ tree reads in layers, and every #include points down them: common, then device code (memory
orderings, waits, reductions), the protocols' primitives (packets and chunks: their scratch layouts and
verbs), the bootstrap, transports, algorithms, the stock-NCCL fallback, the communicator (native/*.cc),
and the shim on top. A header that reached up would tie a lower layer to everything above it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# Lowest first. "native" is the communicator layer: the files directly in native/.
LAYERS = [
    "common",
    "device",
    "primitives",
    "bootstrap",
    "transport",
    "algorithms",
    "fallback",
    "native",
    "shim",
]
INCLUDE = re.compile(r'^\s*#\s*include\s+"((?:native|shim)/[^"]+)"', re.MULTILINE)


def layer_of(relative: str) -> str:
    parts = relative.split("/")
    if parts[0] == "shim":
        return "shim"
    return "native" if len(parts) == 2 else parts[1]


def sources() -> list[Path]:
    found = [*ROOT.glob("native/**/*"), *ROOT.glob("shim/*")]
    return sorted(p for p in found if p.suffix in {".h", ".cc", ".cu", ".cuh"})


def test_every_source_is_in_a_layer() -> None:
    unknown = {
        str(p.relative_to(ROOT)) for p in sources() if layer_of(str(p.relative_to(ROOT))) not in LAYERS
    }
    assert not unknown, f"sources outside the layers {LAYERS}: {sorted(unknown)}"


def test_includes_point_down() -> None:
    upward = []
    for path in sources():
        relative = str(path.relative_to(ROOT))
        mine = LAYERS.index(layer_of(relative))
        for included in INCLUDE.findall(path.read_text()):
            if LAYERS.index(layer_of(included)) > mine:
                upward.append(f"{relative} includes {included}")
    assert not upward, "\n".join(upward)


def test_the_check_sees_an_upward_include() -> None:
    """The rule would catch a transport header that reached for an algorithm."""
    text = '#include "native/algorithms/zero_copy.h"\n'
    assert INCLUDE.findall(text) == ["native/algorithms/zero_copy.h"]
    assert LAYERS.index(layer_of("native/algorithms/zero_copy.h")) > LAYERS.index(
        layer_of("native/transport/x.h")
    )
