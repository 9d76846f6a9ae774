"""CPU test of the registry of allocations for zero-copy without windows (native/transport/
allocation_registry.cc, through tests/allocation_registry_driver.cc): an allocation keeps its index
while it lives, an address freed and allocated again is a new allocation that retires the old one, and
the registry stays bounded by retiring the least recently used."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = ["tests/allocation_registry_driver.cc", "native/transport/allocation_registry.cc"]
MB = 1 << 20


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(tmp_path_factory.mktemp("registry") / "driver", SOURCES, [], 0)


def run(driver: Path, calls: list[tuple[int, ...] | str], capacity: int = 4) -> list[str]:
    """Each call is a use (ID, BASE, BYTES[, HOW]: 0 a call, 1 captured, 2 registered) or a command."""
    text = "".join((call if isinstance(call, str) else " ".join(map(str, call))) + "\n" for call in calls)
    proc = subprocess.run(
        [str(driver), str(capacity)], input=text, capture_output=True, text=True, env=driver_env(), timeout=20
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.splitlines()


def test_a_recurring_allocation_keeps_its_index_and_is_exported_once(driver: Path) -> None:
    lines = run(driver, [(11, 0x1000_0000, MB)] * 3)
    assert lines == ["index 0 gen 0 | export 0 0 11", "index 0 gen 0", "index 0 gen 0", "size 1"]


def test_the_same_address_allocated_again_is_a_new_allocation(driver: Path) -> None:
    # Buffer 11 freed; CUDA hands the same range out as buffer 12: the old mapping must go first.
    lines = run(driver, [(11, 0x1000_0000, MB), (12, 0x1000_0000, MB)])
    assert lines[1] == "index 0 gen 1 | retire 0 0 11 | export 0 1 12"
    assert lines[-1] == "size 1"


def test_a_new_allocation_over_part_of_old_ones_retires_each(driver: Path) -> None:
    base = 0x2000_0000
    calls = [(1, base, MB), (2, base + MB, MB), (3, base + 2 * MB, MB), (4, base + MB // 2, MB)]
    lines = run(driver, calls)
    retired = sorted(int(p.split()[3]) for p in lines[3].split(" | ")[1:] if p.startswith("retire"))
    assert retired == [1, 2], lines  # 4 spans the end of 1 and the start of 2, not 3
    assert lines[-1] == "size 2"


def test_runs_that_share_pieces_live_side_by_side(driver: Path) -> None:
    # Two tensors crossing the same boundary of an expandable segment: runs 100 (pieces at base and base +
    # MB) and 200 (from base + MB) overlap and both stay; a single allocation inside them stays too.
    base = 0x3000_0000
    calls = [
        (100, base, 2 * MB, 0, 2),
        (200, base + MB, 2 * MB, 0, 2),
        (7, base + MB, MB),
        (100, base, 2 * MB, 0, 2),
    ]
    lines = run(driver, calls)
    assert lines == [
        "index 0 gen 0 | export 0 0 100",
        "index 1 gen 0 | export 1 0 200",
        "index 2 gen 0 | export 2 0 7",
        "index 0 gen 0",
        "size 3",
    ], lines
    # A single allocation over a run's range does not retire it either (freed pieces are found by their ids).
    lines = run(driver, [(100, base, 2 * MB, 0, 2), (8, base, 4 * MB), "f 100"])
    assert lines == [
        "index 0 gen 0 | export 0 0 100",
        "index 1 gen 0 | export 1 0 8",
        "done | retire 0 0 100",
        "size 1",
    ]


def test_allocations_apart_do_not_disturb_each_other(driver: Path) -> None:
    lines = run(driver, [(1, 0, MB), (2, MB, MB), (1, 0, MB), (2, MB, MB)])
    assert lines == [
        "index 0 gen 0 | export 0 0 1",
        "index 1 gen 0 | export 1 0 2",
        "index 0 gen 0",
        "index 1 gen 0",
        "size 2",
    ]


def test_at_capacity_the_least_recently_used_is_retired(driver: Path) -> None:
    calls = [(1, 0, MB), (2, MB, MB), (1, 0, MB), (3, 2 * MB, MB)]  # 2 is the oldest when 3 comes
    lines = run(driver, calls, capacity=2)
    assert lines[3] == "index 1 gen 1 | retire 1 0 2 | export 1 1 3"
    assert lines[-1] == "size 2"


def test_pinned_allocations_are_never_retired_for_room(driver: Path) -> None:
    # 1 is pinned (a graph captured it) and the oldest: 2 goes for 3, then 3 for 4.
    calls = [(1, 0, MB, 1), (2, MB, MB), (3, 2 * MB, MB), (4, 3 * MB, MB), (1, 0, MB)]
    lines = run(driver, calls, capacity=2)
    assert lines[2] == "index 1 gen 1 | retire 1 0 2 | export 1 1 3"
    assert lines[3] == "index 1 gen 2 | retire 1 1 3 | export 1 2 4"
    assert lines[4] == "index 0 gen 0"


def test_full_of_pinned_allocations_gives_no_index(driver: Path) -> None:
    calls = [(1, 0, MB, 1), (2, MB, MB, 1), (3, 2 * MB, MB), (1, 0, MB)]
    lines = run(driver, calls, capacity=2)
    assert lines[2] == "full"
    assert lines[3] == "index 0 gen 0"
    assert lines[-1] == "size 2"


def test_a_freed_pinned_allocation_is_still_retired(driver: Path) -> None:
    # Its address came back as a new allocation: the old one is gone, pinned or not.
    lines = run(driver, [(1, 0, MB, 1), (2, 0, MB)], capacity=2)
    assert lines[1] == "index 0 gen 1 | retire 0 0 1 | export 0 1 2"


@pytest.mark.parametrize("capacity", [1, 3, 16])
def test_bounded_whatever_comes(driver: Path, capacity: int) -> None:
    calls = [(i, (i % 7) * MB, MB) for i in range(1, 200)]
    lines = run(driver, calls, capacity=capacity)
    assert int(lines[-1].split()[1]) <= capacity
    assert all(int(line.split()[1]) < capacity for line in lines[:-1]), "an index beyond the capacity"


def test_a_registration_holds_its_allocation_until_unregistered(driver: Path) -> None:
    # 1 is registered: 2 and 3 take turns in the other index; unregistering 1 retires it.
    lines = run(driver, [(1, 0, MB, 2), (2, MB, MB), (3, 2 * MB, MB), "u 1", (4, 3 * MB, MB)], capacity=2)
    assert lines[0] == "index 0 gen 0 | export 0 0 1"
    assert lines[2] == "index 1 gen 1 | retire 1 0 2 | export 1 1 3"
    assert lines[3] == "done | retire 0 0 1"
    assert lines[4] == "index 0 gen 1 | export 0 1 4"


def test_unregistering_keeps_what_a_graph_holds(driver: Path) -> None:
    lines = run(driver, [(1, 0, MB, 2), (1, 0, MB, 1), "u 1", (2, MB, MB), (3, 2 * MB, MB)], capacity=2)
    assert lines[2] == "done"  # a graph captured it: kept
    assert lines[4] == "index 1 gen 1 | retire 1 0 2 | export 1 1 3"  # 1 stays, 2 goes for room


def test_a_freed_allocation_is_forgotten_with_a_retirement(driver: Path) -> None:
    lines = run(driver, [(1, 0, MB), (2, MB, MB), "f 1", "f 1", (3, 5 * MB, MB)], capacity=2)
    assert lines[2] == "done | retire 0 0 1"
    assert lines[3] == "done"  # already gone
    assert lines[4] == "index 0 gen 1 | export 0 1 3"
    assert lines[-1] == "size 2"
