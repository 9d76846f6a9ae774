"""mscclpp_nccl.world_from_env under mpirun without mpi4py: rank and size from the launcher's variables
(Open MPI, Hydra, MVAPICH: mscclpp_nccl.mpi_world, as the bench reads them), and rank 0's unique id
handed to every rank over TCP. CPU only: the processes get MPI's variables from the test, and rank 0's id
comes from a stand-in library."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from fake_mpirun import LauncherEnv, hydra_env, mpirun, mvapich_env, open_mpi_env

from mscclpp_nccl.communicator import world_from_env

# One rank: mpi4py hidden (as where it is not installed), a library whose ncclGetUniqueId only rank 0
# may call; prints what world_from_env returns.
RANK = """
import os, sys
sys.modules["mpi4py"] = None
from mscclpp_nccl import communicator
from mscclpp_nccl.binding import ffi

class Nccl:
    def get_unique_id(self):
        assert os.environ.get("RANK_ZERO") == "1", "only rank 0 makes the id"
        uid = ffi.new("ncclUniqueId*")
        ffi.memmove(uid, os.urandom(128), 128)
        return uid[0]

communicator.Nccl.load = classmethod(lambda cls, path=None: Nccl())
rank, size, uid = communicator.world_from_env(timeout=60)
print(rank, size, uid)
"""


def rank_zero(rank: int) -> dict[str, str]:
    return {"RANK_ZERO": str(int(rank == 0))}


@pytest.mark.parametrize(
    "launcher_env", [open_mpi_env, hydra_env, mvapich_env], ids=["open-mpi", "hydra", "mvapich"]
)
def test_world_and_unique_id_from_mpirun_without_mpi4py(launcher_env: LauncherEnv, tmp_path: Path) -> None:
    done = mpirun(3, [sys.executable, "-c", RANK], tmp_path, launcher_env, rank_env=rank_zero)
    for rank, r in enumerate(done):
        assert r.returncode == 0, f"rank {rank}:\n{r.stdout}\n{r.stderr}"
    seen = [r.stdout.split() for r in done]
    uid = seen[0][2]
    assert len(uid) == 256
    assert seen == [[str(rank), "3", uid] for rank in range(3)]


def test_no_rank_information(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("OMPI_", "PMI", "MV2_", "MSCCLPP_NCCL_")):
            monkeypatch.delenv(name)
    with pytest.raises(RuntimeError, match="no rank information"):
        world_from_env()
