"""`python -m mscclpp_nccl.bench`: parses the command line, plans the ranks (how many, MPS, variables for a
stock library) and starts them through the launcher, each re-invoking the module with --worker."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Sequence

from ..mpi_world import MpiWorld
from ..progress import launch_shown
from .collectives import ROOTED
from .options import Options, build_parser, parse_args, run_command
from .worker import worker_main

PROG = "python -m mscclpp_nccl.bench"
log = logging.getLogger("mscclpp_nccl.bench")


def default_ranks(ngpus: int) -> int:
    """The tuner's default: the number of GPUs, or 4 ranks sharing the GPU when there is only one."""
    return ngpus if ngpus > 1 else 4


def bench_ranks(opts: Options) -> int:
    """The ranks of a run: --nranks, else nccl-tests' -t x -g (1 by default, as nccl-tests)."""
    return opts.ranks if opts.ranks is not None else opts.nthreads * opts.ngpus


def launch_plan(
    opts: Options, ngpus: int, env: dict[str, str]
) -> tuple[int, bool, dict[str, str], list[str]]:
    """(ranks, use MPS, environment additions, notes) for a run on ngpus GPUs."""
    nranks = bench_ranks(opts)
    shared = nranks > ngpus
    mps = opts.mps if opts.mps is not None else shared
    extra: dict[str, str] = {}
    notes: list[str] = []
    if opts.lib and shared and "NCCL_MAX_CTAS" not in env:
        per_gpu = -(-nranks // max(ngpus, 1))
        if per_gpu >= 3:
            # Stock NCCL hangs with 4 ranks on one GPU unless its CTAs fit together (DESIGN.md).
            extra["NCCL_MAX_CTAS"] = str(max(1, 32 // per_gpu))
            notes.append(
                f"{per_gpu} ranks share a GPU: NCCL_MAX_CTAS={extra['NCCL_MAX_CTAS']} so that a stock NCCL's"
                " kernels can all be resident (set NCCL_MAX_CTAS to override)"
            )
    return nranks, mps, extra, notes


def unmet_need(gpus: Sequence[str], what: str) -> str | None:
    """Why no rank can run on this host (no GPU, no CuPy), or None; `what` is the work that cannot be done."""
    import importlib.util

    if not gpus:
        return f"no NVIDIA GPU visible; nothing to {what}"
    if importlib.util.find_spec("cupy") is None:
        return "CuPy is not installed (pip install cupy-cuda13x)"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """The command: `python -m mscclpp_nccl.bench` (a rank of it with --worker); its exit code."""
    return run_command(PROG, argv, parse_args, build_parser, worker_main, run_bench)


def run_bench(opts: Options, argv: list[str]) -> int:
    """Starts the ranks of a benchmark run on this host's GPUs; the first failing rank's exit code. Under
    mpirun (or srun), runs this process's rank instead (run_mpi_rank)."""
    from ..mpi_world import mpi_world
    from ..run import guarded, visible_gpus

    world = mpi_world()
    if world is not None:
        return run_mpi_rank(opts, argv, world)
    if opts.lib and not os.path.isfile(opts.lib):
        log.error("--lib %s: no such file", opts.lib)
        return 2
    if opts.json_path and not os.path.isdir(os.path.dirname(os.path.abspath(opts.json_path))):
        log.error("-J %s: no such directory", opts.json_path)
        return 2
    gpus = visible_gpus()
    reason = unmet_need(gpus, "benchmark")
    if reason:
        log.error("%s", reason)
        return 2
    if opts.ranks is None and bench_ranks(opts) > len(gpus):
        log.error(
            "-t %d -g %d: %d ranks, one GPU each, but %d GPU(s) visible (nccl-tests would fail too);"
            " --nranks %d runs them sharing GPUs",
            opts.nthreads,
            opts.ngpus,
            bench_ranks(opts),
            len(gpus),
            bench_ranks(opts),
        )
        return 2
    nranks, mps, extra, notes = launch_plan(opts, len(gpus), dict(os.environ))
    if opts.root >= nranks and opts.collective in ROOTED:
        log.error("root %d is not a rank of %d", opts.root, nranks)
        return 2
    for note in notes:
        log.info("%s", note)
    cmd = [sys.executable, "-m", "mscclpp_nccl.bench", *argv, "--worker"]
    if opts.lib:
        cmd += ["--lib", os.path.abspath(opts.lib)]
    env = {**os.environ, **extra}
    return guarded(log, lambda: launch_shown(opts.collective, nranks, cmd, mps, env, opts.run_timeout))


def run_mpi_rank(opts: Options, argv: list[str], world: MpiWorld) -> int:
    """One rank of a run that mpirun started, one rank per process as nccl-tests built with MPI: the world
    is MPI's, the bookkeeping goes to rank 0's address (mpi_world.rank0_address); rank 0 prints."""
    from ..mpi_world import RendezvousError, forget_address, rank0_address
    from ..run import visible_gpus
    from .process import RankInfo, exit_now

    # Every rank sees the same reasons, so all of them stop here rather than wait for a rank 0 that
    # stopped.
    reason = unmet_need(visible_gpus(), "benchmark")
    refusals = [
        (opts.ranks is not None, f"--nranks under mpirun: mpirun -np says how many ({world.size})"),
        (opts.ngpus != 1 or opts.nthreads != 1, "-g/-t under mpirun: one rank per process (-g 1 -t 1)"),
        (reason is not None, str(reason)),
    ]
    for refused, message in refusals:
        if refused:
            log.error("%s", message)
            return 2
    try:
        host, port = rank0_address(world, opts.timeout)
    except RendezvousError as e:
        log.error("rank %d: %s", world.rank, e)
        return 2
    try:
        code = worker_main(opts, argv, RankInfo(world.rank, world.size, host, port))
    finally:
        forget_address(world)
    exit_now(code)  # as a launched rank does: nothing may hang after the last line
