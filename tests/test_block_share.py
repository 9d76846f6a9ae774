"""CPU tests of how one process's communicators share the blocks of a GPU (native/transport/block_share.h):
whatever communicators a process holds, the running and parked grids of all of them fit its share of the
GPU, so every kernel that waits for a peer leaves room for the peers' kernels. The driver
(tests/block_share_driver.cc) plays a process's communicators as a PyTorch job with a device mesh creates
them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

sys.path.insert(0, str(Path(__file__).resolve().parent))
from stock_nccl import require_cuda_include

SOURCES = [
    "native/common/env.cc",
    "native/common/parameters.cc",
    "native/common/logging.cc",
    "native/transport/block_share.cc",
    "tests/block_share_driver.cc",
]
SMS = 132  # an H200
EARLY_LAUNCH_MAX_BLOCKS = 32  # kEarlyLaunchMaxBlocks


def held(grid: int) -> int:
    """Blocks a communicator with grids of `grid` blocks holds: a running grid and a parked half."""
    return grid + min(EARLY_LAUNCH_MAX_BLOCKS, grid // 2)


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("block_share") / "block_share_driver"
    return build_driver(out, SOURCES, [], 0, [require_cuda_include()])


def play(driver: Path, commands: list[str]) -> list[list[int]]:
    proc = subprocess.run(
        [str(driver)], input="\n".join(commands) + "\n", capture_output=True, text=True, env=driver_env()
    )
    assert proc.returncode == 0 and "runtime error" not in proc.stderr, proc.stderr
    rows = [[int(w) for w in line.split()[1:]] for line in proc.stdout.splitlines()]
    assert len(rows) == len(commands), proc.stdout
    return rows


def test_one_communicator_takes_the_rank_share(driver: Path) -> None:
    """Alone, a communicator's running and parked grids fill the rank's share: 132 / 8 = 16 blocks hold a
    grid of 11 and a parked grid of 5; 33 at 4 ranks a grid of 22; never a grid above 64."""
    for ranks, grid in ((8, 11), (4, 22), (2, 44), (1, 64)):
        [[_, proposed], [held_now, capacity]] = play(driver, [f"new {SMS} {ranks} 1", "held"])
        assert proposed == grid and held_now == held(grid) <= capacity == SMS // ranks


def test_without_early_launch_one_grid_takes_the_share(driver: Path) -> None:
    """MSCCLPP_NCCL_EARLY_LAUNCH=0: no kernel parks behind a running one, so a communicator's one grid
    takes the whole share (33 blocks at 4 ranks, where early launch leaves a grid of 22)."""
    env = {**driver_env(), "MSCCLPP_NCCL_EARLY_LAUNCH": "0"}
    for ranks, grid in ((8, 16), (4, 33), (2, 64)):
        proc = subprocess.run(
            [str(driver)], input=f"new {SMS} {ranks} 1\nheld\n", capture_output=True, text=True, env=env
        )
        [[_, proposed], [held_now, _]] = [[int(w) for w in ln.split()[1:]] for ln in proc.stdout.splitlines()]
        assert (proposed, held_now) == (grid, grid), (ranks, proc.stdout)


def test_mesh_communicators_fit_the_share(driver: Path) -> None:
    """A rank of an 8-rank job on one GPU with a (4, 2) device mesh: the world, then a data-parallel
    communicator of 4 and a tensor-parallel one of 2 split from it. A communicator sized from its own
    ranks on the GPU (4 and 2) would take 33 and 66 blocks: kernels waiting for peers then fill the GPU
    and the peers' kernels never start (the hang this prevents). Here the three hold at most 16."""
    rows = play(
        driver,
        [
            f"new {SMS} 8 1",  # world
            "settle 0 11",
            "halve 0",  # split: the parent gives half
            f"new {SMS} 4 1",  # data parallel: 4 of its ranks on this GPU
            "settle 1 99",
            "halve 0",
            f"new {SMS} 2 1",  # tensor parallel
            "settle 2 99",
            "held",
        ],
    )
    world, dp, tp = rows[5][1], rows[4][1], rows[7][1]
    assert min(world, dp, tp) >= 1
    [held_now, capacity] = rows[8]
    assert capacity == SMS // 8
    assert held_now == held(world) + held(dp) + held(tp) <= capacity, rows


def test_independent_communicators_take_what_is_free(driver: Path) -> None:
    """Communicators created on their own (PyTorch without device_id creates each at its first call) take
    what is free, one block at least; destroying one frees its blocks for the next."""
    rows = play(
        driver,
        [f"new {SMS} 8 1", "settle 0 11", f"new {SMS} 2 1", "held", "free 0", f"new {SMS} 2 1", "held"],
    )
    assert rows[2][1] == 1  # nothing free: the smallest grid
    assert rows[5][1] == 10  # the world's 16 blocks came back (one block held by the first pair)
    assert rows[6][0] == held(1) + held(10) <= rows[6][1]


def test_ranks_of_one_process_each_get_a_share(driver: Path) -> None:
    """Eight ranks in one process (ncclCommInitAll) on one GPU: each rank's communicator gets a rank's
    share, and together they hold at most the GPU."""
    rows = play(driver, [f"new {SMS} 8 8"] * 8 + ["held"])
    assert [r[1] for r in rows[:8]] == [11] * 8
    assert rows[8][0] == 8 * held(11) <= rows[8][1] == 8 * (SMS // 8)
