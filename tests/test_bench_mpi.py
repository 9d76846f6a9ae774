"""The benchmark as nccl-tests built with MPI runs: `mpirun -np N python -m mscclpp_nccl.bench ...`, one rank
per process, the world from MPI's variables, rank 0 printing the one table. CPU only: the processes get
Open MPI's (or Hydra's) variables from the test, and the stand-in CuPy and libnccl of test_bench_cpu.py
(tests/bench_mpi_rank.py), whose ranks exchange data through files."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

import pytest
from fake_mpirun import LauncherEnv, clean_env, hydra_env, open_mpi_env
from fake_mpirun import mpirun as start_ranks

from mscclpp_nccl.mpi_world import MpiWorld, mpi_world

ROOT = Path(__file__).resolve().parent.parent
RUNNER = ROOT / "tests" / "bench_mpi_rank.py"


def mpirun(
    nranks: int, args: list[str], tmp_path: Path, launcher_env: LauncherEnv = open_mpi_env
) -> list[subprocess.CompletedProcess[str]]:
    """The bench's ranks as mpirun would start them, on the stand-ins (tests/bench_mpi_rank.py)."""
    exchange = tmp_path / "exchange" / uuid.uuid4().hex
    exchange.mkdir(parents=True)
    cmd = [sys.executable, str(RUNNER), str(exchange), "--", *args, "-T", "60"]
    return start_ranks(
        nranks, cmd, tmp_path, launcher_env, env=clean_env(), job=tmp_path.name + uuid.uuid4().hex
    )


def table(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines() if line.strip() and not line.startswith("#")]


@pytest.mark.parametrize("launcher_env", [open_mpi_env, hydra_env], ids=["open-mpi", "hydra"])
def test_one_rank_per_process_under_mpirun(tmp_path: Path, launcher_env: object) -> None:
    done = mpirun(
        3, ["all_reduce", "-b", "8", "-e", "1K", "-f", "4", "-w", "1", "-n", "2"], tmp_path, launcher_env
    )
    for rank, r in enumerate(done):
        assert r.returncode == 0, f"rank {rank}:\n{r.stdout}\n{r.stderr}"
    # Rank 0 prints the one table, with every rank's device; the others print nothing.
    out = done[0].stdout
    assert [r.stdout for r in done[1:]] == ["", ""]
    assert sum(line.startswith("#  Rank ") for line in out.splitlines()) == 3
    rows = table(out)
    assert [int(r[0]) for r in rows] == [8, 32, 128, 512]
    assert all(r[8] == "0" and r[12] == "0" for r in rows), out  # checked, and right
    assert "# Out of bounds values : 0 OK" in out
    # Rank 0 removed the file through which the others learnt its address.
    assert not [p for p in Path(tempfile.gettempdir()).glob("mscclpp-nccl-*.addr") if tmp_path.name in p.name]


def test_under_mpirun_the_rank_count_is_mpis(tmp_path: Path) -> None:
    done = mpirun(2, ["all_reduce", "-e", "1K", "--nranks", "4"], tmp_path)
    assert all(r.returncode == 2 and "mpirun -np says how many (2)" in r.stderr for r in done)
    done = mpirun(2, ["all_reduce", "-e", "1K", "-g", "2"], tmp_path / "g")
    assert all(r.returncode == 2 and "-g/-t under mpirun" in r.stderr for r in done)


def test_mpi_world_from_each_launcher() -> None:
    env = open_mpi_env(2, 4, "7")
    world = mpi_world(env)
    assert world is not None and (world.rank, world.size, world.local_rank, world.local_size) == (2, 4, 2, 4)
    assert world.job == f"7-{os.getppid()}" and world.one_host
    world = mpi_world({"PMI_RANK": "1", "PMI_SIZE": "2"})
    assert world == MpiWorld(1, 2, None, None, f"ppid-{os.getppid()}") and not world.one_host
    assert mpi_world({"MV2_COMM_WORLD_RANK": "0", "MV2_COMM_WORLD_SIZE": "1"}) is not None
    assert mpi_world({}) is None
    assert mpi_world({"SLURM_PROCID": "0", "SLURM_NTASKS": "8"}) is None  # an allocation's shell
    assert mpi_world({"OMPI_COMM_WORLD_RANK": "5", "OMPI_COMM_WORLD_SIZE": "4"}) is None  # not a rank of it


def test_under_mpirun_without_a_gpu_every_rank_says_so(tmp_path: Path) -> None:
    """No rank waits for a rank 0 that could not start: each stops before the rendezvous, exit 2."""
    cmd = [sys.executable, "-m", "mscclpp_nccl.bench", "all_reduce", "-e", "1K"]
    done = start_ranks(3, cmd, tmp_path, env={**clean_env(), "CUDA_VISIBLE_DEVICES": ""}, timeout=60)
    for rank, r in enumerate(done):
        assert r.returncode == 2, f"rank {rank}:\n{r.stdout}\n{r.stderr}"
        assert "no NVIDIA GPU visible" in r.stderr and "Traceback" not in r.stderr, r.stderr
