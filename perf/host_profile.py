"""Sums the stacks that perf/host_profile.cc sampled: where the host time spent inside one module goes.

Usage: python3 perf/host_profile.py DIR [--module PATH] [--within NAME...] [--top N]

Only samples with a frame in the module (default: the library, mscclpp_nccl/lib/libnccl.so.2; matched by
file name, so stacks taken on another machine resolve against the same build here) are counted. Frames
of the module are named with addr2line; others by their module's file name. Prints each function's
share of those samples inclusive (anywhere on the stack) and exclusive (innermost frame of the module,
with what it called outside the module, e.g. the CUDA driver, named after it). --within keeps only the
samples with a frame of one of the functions named (e.g. the API calls being timed, leaving out
initialization and teardown).
"""

from __future__ import annotations

import argparse
import collections
import subprocess
from pathlib import Path

Frame = tuple[str, int]  # module path, offset


def read_stacks(folder: Path) -> list[list[Frame]]:
    stacks = []
    for path in sorted(folder.glob("stacks.*")):
        for line in path.read_text().splitlines():
            frames = []
            for token in line.split():
                module, _, offset = token.rpartition("+")
                frames.append((module, int(offset, 16) if offset.startswith("0x") else 0))
            stacks.append(frames)
    return stacks


def function_names(module: Path, offsets: list[int]) -> dict[int, str]:
    """addr2line's function name of each offset, without its parameter list."""
    result = subprocess.run(
        ["addr2line", "-f", "-C", "-e", str(module), *[hex(o) for o in offsets]],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = result.stdout.splitlines()
    names = {}
    for offset, name in zip(offsets, lines[0::2], strict=False):
        names[offset] = name.split("(")[0] if name != "??" else f"?{offset:#x}"
    return names


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("folder", type=Path)
    parser.add_argument("--module", type=Path, default=Path("mscclpp_nccl/lib/libnccl.so.2"))
    parser.add_argument("--within", nargs="*", default=[])
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    module_name = args.module.name
    stacks = read_stacks(args.folder)
    inside = [s for s in stacks if any(Path(m).name == module_name for m, _ in s)]
    offsets = sorted({o for s in inside for m, o in s if Path(m).name == module_name})
    names = function_names(args.module, offsets) if offsets else {}

    def name(frame: Frame) -> str:
        module, offset = frame
        return names[offset] if Path(module).name == module_name else Path(module).name

    if args.within:
        inside = [s for s in inside if any(name(f) in args.within for f in s)]
    inclusive: collections.Counter[str] = collections.Counter()
    exclusive: collections.Counter[str] = collections.Counter()
    for stack in inside:
        inclusive.update({name(f) for f in stack if Path(f[0]).name == module_name})
        first = next(i for i, f in enumerate(stack) if Path(f[0]).name == module_name)
        leaf = name(stack[first])
        exclusive[leaf if first == 0 else f"{leaf} -> {name(stack[first - 1])}"] += 1
    total = len(inside)
    print(f"{len(stacks)} samples, {total} inside {module_name}")
    for title, counts in (("inclusive", inclusive), ("exclusive (innermost frame of the module)", exclusive)):
        print(f"\n{title}: share of the samples inside, count, function")
        for key, count in counts.most_common(args.top):
            print(f"  {100 * count / max(total, 1):5.1f}% {count:7d}  {key}")


if __name__ == "__main__":
    main()
