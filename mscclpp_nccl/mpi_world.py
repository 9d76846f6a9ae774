"""A process started by mpirun (or srun): its rank and world from the launcher's environment, and where
rank 0 listens for the others (without MPI calls where possible, so that mpi4py is optional)."""

from __future__ import annotations

import contextlib
import os
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# (rank, size, local rank, local size) as each launcher names them: Open MPI, MPICH and Intel MPI
# (Hydra), MVAPICH. The local ones may be missing. Not Slurm's: an allocation's shell has them too.
_LAUNCHERS = (
    (
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("MV2_COMM_WORLD_RANK", "MV2_COMM_WORLD_SIZE", "MV2_COMM_WORLD_LOCAL_RANK", "MV2_COMM_WORLD_LOCAL_SIZE"),
)
# What names one launch (the same for every rank of it): Open MPI's job id or PMIx namespace.
_JOB_KEYS = ("OMPI_MCA_ess_base_jobid", "OMPI_MCA_orte_ess_jobid", "PMIX_NAMESPACE", "PMI_KVSNAME")


@dataclass(frozen=True)
class MpiWorld:
    """This process's place in an MPI job. local_size is None when the launcher does not say it."""

    rank: int
    size: int
    local_rank: int | None
    local_size: int | None
    job: str

    @property
    def one_host(self) -> bool:
        return self.local_size == self.size


def _int(env: dict[str, str] | os._Environ[str], name: str) -> int | None:
    text = env.get(name, "").strip()
    return int(text) if text.isdigit() else None


def mpi_world(env: dict[str, str] | None = None) -> MpiWorld | None:
    """This process's MPI rank and world from its launcher's variables; None when not under one."""
    e = os.environ if env is None else env
    for rank_key, size_key, local_key, local_size_key in _LAUNCHERS:
        rank, size = _int(e, rank_key), _int(e, size_key)
        if rank is None or size is None or not 0 <= rank < size:
            continue
        job = next((e[k] for k in _JOB_KEYS if e.get(k)), "")
        # The local ranks of one launch share their parent (Open MPI's daemon, Hydra's proxy).
        job = f"{job}-{os.getppid()}" if job else f"ppid-{os.getppid()}"
        return MpiWorld(rank, size, _int(e, local_key), _int(e, local_size_key), job)
    return None


class RendezvousError(RuntimeError):
    """The ranks could not learn rank 0's address."""


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _rendezvous_file(world: MpiWorld) -> Path:
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in world.job)
    return Path(tempfile.gettempdir()) / f"mscclpp-nccl-{os.getuid()}-{safe}.addr"


def mpi4py_comm() -> Any:
    """mpi4py's COMM_WORLD (importing it initialises MPI), or None when mpi4py is not installed."""
    try:
        from mpi4py import MPI  # type: ignore[import-not-found]
    except ImportError:
        return None
    return MPI.COMM_WORLD


def rank0_address(world: MpiWorld, timeout: float, env: dict[str, str] | None = None) -> tuple[str, int]:
    """(host, port) where rank 0 will listen, the same on every rank, found the first way that works:
    MASTER_ADDR and MASTER_PORT when set; mpi4py's broadcast when it is installed; else, when every rank
    is on this host, a file that rank 0 writes under the temporary directory. RendezvousError otherwise."""
    e = os.environ if env is None else env
    if e.get("MASTER_ADDR") and (_int(e, "MASTER_PORT") or 0) > 0:
        return e["MASTER_ADDR"], int(e["MASTER_PORT"])
    comm = mpi4py_comm()
    if comm is not None:
        address = None
        if comm.Get_rank() == 0:
            host = socket.gethostbyname(socket.gethostname())
            address = (host, _free_port(host))
        host, port = comm.bcast(address, root=0)
        return str(host), int(port)
    if not world.one_host:
        raise RendezvousError(
            "ranks on several hosts: install mpi4py (pip install 'mscclpp-nccl[mpi]') or set MASTER_ADDR and"
            " MASTER_PORT (rank 0's host and a free port) for every rank"
        )
    path = _rendezvous_file(world)
    if world.rank == 0:
        port = _free_port("127.0.0.1")
        tmp = path.with_name(f"{path.name}.{os.getpid()}")
        tmp.write_text(f"127.0.0.1 {port}\n")
        os.replace(tmp, path)
        return "127.0.0.1", port
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError, ValueError):
            host, port_text = path.read_text().split()
            return host, int(port_text)
        if time.monotonic() > deadline:
            raise RendezvousError(f"rank 0 did not publish its address in {path} within {timeout:g} s")
        time.sleep(0.01)


def forget_address(world: MpiWorld) -> None:
    """Rank 0 removes the rendezvous file once every rank has connected (nothing else to do elsewhere)."""
    if world.rank == 0:
        with contextlib.suppress(OSError):
            _rendezvous_file(world).unlink()


def broadcast_from_rank0(world: MpiWorld, make: Callable[[], str], timeout: float) -> str:
    """The text that make() returns on rank 0 (the others do not call it), on every rank: through mpi4py's
    broadcast when it is installed, else over TCP at rank0_address (the bench's bookkeeping link, so it
    needs no MPI calls). RendezvousError, or the link's HostGroupError, when the ranks cannot meet."""
    comm = mpi4py_comm()
    if comm is not None:
        return str(comm.bcast(make() if world.rank == 0 else None, root=0))
    from .bench.hostgroup import HostGroup

    host, port = rank0_address(world, timeout)
    try:
        group = HostGroup(world.rank, world.size, host, port, timeout)
    finally:
        # Every rank has connected (or never will): a later rendezvous of this job must not find the file.
        forget_address(world)
    try:
        return str(group.allgather(make() if world.rank == 0 else None)[0])
    finally:
        group.close()
