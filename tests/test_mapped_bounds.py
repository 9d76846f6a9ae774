"""CPU test of the checks on what peers post for a mapped zero-copy call (native/algorithms/mapped_bounds.h,
through tests/mapped_bounds_driver.cc), which the kernels make before any rank touches a peer's buffer
(native/algorithms/zero_copy_kernel.cuh): the allocation index must name a slot of the table, the slot
must be mapped, what this rank touches from the posted offset must end inside the allocation (no
wrapping), and every rank must have been called with the same count, collective and root."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stock_nccl import require_cuda_include

SOURCES = ["tests/mapped_bounds_driver.cc"]
MAX_ALLOCATIONS = 256  # kMaxMappedAllocations
MAX_BLOCKS = 64  # kMaxZeroCopyBlocks
MB = 1 << 20
BASE = 0x7F00_0000_0000
U64 = (1 << 64) - 1
ALL_REDUCE, ALL_GATHER, BROADCAST = 0, 1, 4  # Collective


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mapped_bounds") / "driver"
    return build_driver(out, SOURCES, [], 0, [require_cuda_include()])


def run(driver: Path, commands: list[str]) -> list[str]:
    text = "".join(c + "\n" for c in commands)
    proc = subprocess.run(
        [str(driver)], input=text, capture_output=True, text=True, env=driver_env(), timeout=20
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def check_range(driver: Path, index: int, base: int, size: int, offset: int, reach: int) -> str:
    return run(driver, [f"range {index} {base} {size} {offset} {reach}"])[0]


@pytest.mark.parametrize(
    ("index", "offset", "reach", "expected"),
    [
        (0, 0, MB, f"ok {BASE:#x}"),  # the whole allocation
        (7, 4096, MB - 4096, f"ok {BASE:#x}"),  # exact fit at an offset
        (MAX_ALLOCATIONS - 1, 0, 16, f"ok {BASE:#x}"),  # the last slot
        (3, MB, 0, f"ok {BASE:#x}"),  # touches nothing, offset at the end
        (7, 4096, MB - 4095, "out"),  # one byte past the end
        (7, MB + 1, 0, "out"),  # offset past the end, nothing touched
        (7, 0, MB + 1, "out"),  # more than the allocation from its start
        (7, U64 - 15, 32, "out"),  # offset + reach wraps to 16, inside a naive check
        (7, 16, U64 - 7, "out"),  # likewise with the reach that wraps
        (7, U64, U64, "out"),
        (MAX_ALLOCATIONS, 0, 16, "index"),  # one past the table: never read
        (0xFFFF_FFFF, 0, 16, "index"),
    ],
)
def test_mapped_bounds_range(driver: Path, index: int, offset: int, reach: int, expected: str) -> None:
    assert check_range(driver, index, BASE, MB, offset, reach) == expected


def test_mapped_bounds_an_empty_slot_is_not_mapped(driver: Path) -> None:
    assert check_range(driver, 5, 0, MB, 0, 16) == "unmapped"
    assert check_range(driver, 5, 0, 0, 0, 0) == "unmapped"  # before the size is looked at


def test_mapped_bounds_an_allocation_of_no_bytes_holds_nothing(driver: Path) -> None:
    assert check_range(driver, 2, BASE, 0, 0, 0) == f"ok {BASE:#x}"
    assert check_range(driver, 2, BASE, 0, 0, 1) == "out"
    assert check_range(driver, 2, BASE, 0, 1, 0) == "out"


@pytest.mark.parametrize(
    ("mine", "theirs", "expected"),
    [
        ((32 * MB, ALL_REDUCE, 0), (32 * MB, ALL_REDUCE, 0), "ok"),
        ((32 * MB, ALL_REDUCE, 0), (32 * MB + 4, ALL_REDUCE, 0), "counts"),  # one float more
        ((32 * MB, ALL_REDUCE, 0), (16 * MB, ALL_REDUCE, 0), "counts"),
        ((1 << 40, ALL_GATHER, 0), (0, ALL_GATHER, 0), "counts"),
        ((8 * MB, ALL_REDUCE, 0), (8 * MB, ALL_GATHER, 0), "calls"),  # another collective
        ((8 * MB, BROADCAST, 1), (8 * MB, BROADCAST, 2), "calls"),  # another root
        ((8 * MB, BROADCAST, 1), (4 * MB, BROADCAST, 2), "counts"),  # the count is named first
    ],
)
def test_mapped_bounds_calls_must_match(
    driver: Path, mine: tuple[int, int, int], theirs: tuple[int, int, int], expected: str
) -> None:
    assert run(driver, [f"calls {' '.join(map(str, (*mine, *theirs)))}"]) == [expected]


def test_mapped_bounds_every_rank_sees_a_difference(driver: Path) -> None:
    """The kernels compare each post with their own: where any two ranks' counts differ, every rank finds
    one that differs from its own, so all fail the call alike (none runs a divergent path)."""
    for counts in ([8, 8, 8, 9], [9, 8, 8, 8], [8, 9, 10, 8], [1, 2]):
        commands = [f"calls {mine} 0 0 {theirs} 0 0" for mine in counts for theirs in counts]
        answers = run(driver, commands)
        n = len(counts)
        for rank in range(n):
            assert "counts" in answers[rank * n : (rank + 1) * n], (counts, rank)


def test_mapped_bounds_posts_are_whole_words_and_fit_the_flags(driver: Path) -> None:
    size, flag_bytes = map(int, run(driver, ["sizes 8"])[0].split())
    assert size % 8 == 0 and size >= 48, size  # two buffers (16 bytes each) + bytes + collective + root
    slots = MAX_BLOCKS * 8
    assert flag_bytes == 2 * slots * 8 + slots * size
