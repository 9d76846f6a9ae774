"""What mpirun does for the tests, without MPI: N processes of a command with one launcher's variables
(Open MPI, Hydra, MVAPICH), started together under one parent, and their results. Plain module: the tests
put tests/ on sys.path. As a script it stands in for `mpirun -np N CMD...` (Open MPI's variables; the
output of rank 0, then of the others; the first failing rank's exit code):

    python tests/fake_mpirun.py -np N CMD...
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LauncherEnv = Callable[[int, int, str], dict[str, str]]
# Variables a launch must not inherit from the test's own environment.
_FOREIGN = ("OMPI_", "PMI", "MPI_", "MV2_", "MSCCLPP_NCCL_", "MASTER_", "NCCL_")


def _launcher(prefix: str, rank: str, size: str, local_rank: str, local_size: str) -> LauncherEnv:
    """The variables one launcher sets for each rank (rank, size, local rank, local size)."""

    def env(r: int, n: int, job: str) -> dict[str, str]:
        names = (rank, size, local_rank, local_size)
        return {prefix + name: str(value) for name, value in zip(names, (r, n, r, n), strict=True)}

    return env


_open_mpi = _launcher("OMPI_COMM_WORLD_", "RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE")
hydra_env = _launcher("", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS")  # MPICH, Intel MPI
mvapich_env = _launcher("MV2_COMM_WORLD_", "RANK", "SIZE", "LOCAL_RANK", "LOCAL_SIZE")


def open_mpi_env(rank: int, size: int, job: str) -> dict[str, str]:
    """Open MPI's, with the job id that names the launch."""
    return {**_open_mpi(rank, size, job), "OMPI_MCA_ess_base_jobid": job}


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """env (default: this process's) without any launcher's or the library's variables, with the
    repository on PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    return {k: v for k, v in env.items() if not k.startswith(_FOREIGN)} | {"PYTHONPATH": str(ROOT)}


def mpirun(
    nranks: int,
    cmd: Sequence[str],
    cwd: Path,
    launcher_env: LauncherEnv = open_mpi_env,
    env: dict[str, str] | None = None,
    rank_env: Callable[[int], dict[str, str]] | None = None,
    timeout: float = 120,
    job: str | None = None,
) -> list[subprocess.CompletedProcess[str]]:
    """Starts the ranks as mpirun would (one parent, the launcher's variables over `env`, default
    clean_env(); `job` names the launch, default a fresh one) and waits for all of them; AssertionError
    naming the rank that hangs."""
    base = clean_env() if env is None else env
    job = job or uuid.uuid4().hex
    procs = [
        subprocess.Popen(
            list(cmd),
            env={**base, **launcher_env(rank, nranks, job), **(rank_env(rank) if rank_env else {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=cwd,
        )
        for rank in range(nranks)
    ]
    done = []
    for rank, p in enumerate(procs):
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            raise AssertionError(f"rank {rank} hung") from None
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def main(argv: list[str]) -> int:
    if len(argv) < 3 or argv[0] != "-np" or not argv[1].isdigit():
        print("usage: fake_mpirun.py -np N CMD...", file=sys.stderr)
        return 2
    done = mpirun(int(argv[1]), argv[2:], Path.cwd(), env=dict(os.environ))
    for r in done:
        sys.stdout.write(r.stdout)
        sys.stderr.write(r.stderr)
    return next((r.returncode for r in done if r.returncode != 0), 0)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
