"""CPU tests of which launches may carry the early-launch attribute (native/algorithms/launch_record.cc,
through tests/launch_record_driver.cc). A grid launched early always may; a larger one only right after a
kernel on its stream that does not let its successor start early, or it could start beside that kernel
and the two hold more than the rank's share of SMs while peers wait."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = ["tests/launch_record_driver.cc", "native/algorithms/launch_record.cc"]
STREAMS = 64  # LaunchRecord::kStreams


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(tmp_path_factory.mktemp("launch_record") / "launch_record_driver", SOURCES, [], 0)


def carries(driver: Path, launches: list[tuple[int, int, bool]]) -> list[bool]:
    """Whether each launch (stream, capture, launched early) may carry the attribute, in order."""
    text = "".join(f"{stream} {capture} {int(early)}\n" for stream, capture, early in launches)
    run = subprocess.run(
        [str(driver)], input=text, capture_output=True, text=True, env=driver_env(), check=True
    )
    return [line == "1" for line in run.stdout.split()]


def test_a_large_grid_carries_it_only_after_a_kernel_that_does_not_start_early(driver: Path) -> None:
    small, large = True, False
    launches = [(7, 0, large), (7, 0, large), (7, 0, small), (7, 0, large), (7, 0, small), (7, 0, small)]
    launches += [(7, 0, large), (7, 0, large)]
    # The first large grid follows unknown work; after a small one a large grid waits in full.
    expected = [False, True, True, False, True, True, False, True]
    assert carries(driver, launches) == expected


def test_streams_and_captures_are_recorded_apart(driver: Path) -> None:
    launches = [(7, 0, False), (8, 0, True), (7, 0, False), (8, 0, False)]
    # A capture on stream 7 orders its own kernels: its first large grid follows nothing known, and the
    # stream's eager record is untouched by it.
    launches += [(7, 3, True), (7, 3, False), (7, 3, False), (7, 0, False)]
    expected = [False, True, True, False, True, False, True, True]
    assert carries(driver, launches) == expected


def test_a_stream_dropped_for_newer_ones_is_unknown_again(driver: Path) -> None:
    launches = [(1, 0, False), (1, 0, False)]  # stream 1 now ends in a large grid
    launches += [(100 + k, 0, False) for k in range(STREAMS)]  # every slot taken by newer streams
    launches += [(1, 0, False), (1, 0, False)]
    got = carries(driver, launches)
    assert got[1] is True
    assert got[-2:] == [False, True], "a stream that dropped out must count as unknown"


@pytest.mark.parametrize("early", [True, False])
def test_a_new_stream_allows_only_early_grids(driver: Path, early: bool) -> None:
    assert carries(driver, [(5, 0, early)]) == [early]
