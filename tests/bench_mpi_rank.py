"""One process of `mpirun -np N python -m mscclpp_nccl.bench ...` without MPI or a GPU, for
tests/test_bench_mpi.py: the stand-in CuPy and libnccl of tests/test_bench_cpu.py, whose ranks meet
through files (fake_nccl.FileWorld) instead of threads. The test sets MPI's variables; this sets the
stand-ins in place and runs the command's main, as the module would.

    python tests/bench_mpi_rank.py EXCHANGE_DIR -- BENCH ARGS...
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import fake_nccl as fake
import test_bench_cpu as stand_ins

import mscclpp_nccl.binding
from mscclpp_nccl._cli import exit_with
from mscclpp_nccl.bench import cli as bench_cli
from mscclpp_nccl.bench import main
from mscclpp_nccl.mpi_world import mpi_world


def run() -> int:
    directory, sep, *argv = sys.argv[1:]
    assert sep == "--", "usage: bench_mpi_rank.py EXCHANGE_DIR -- BENCH ARGS..."
    world = mpi_world()
    assert world is not None, "no MPI variables"
    lib = stand_ins._FakeLib(fake.FileWorld(directory, world.rank, world.size), world.rank)  # type: ignore[arg-type]
    nccl = stand_ins._FakeNccl(lib)
    mscclpp_nccl.binding.Nccl.load = classmethod(lambda cls, path=None: nccl)  # type: ignore[method-assign,assignment]
    bench_cli.unmet_need = lambda gpus, what: None  # the stand-ins need no GPU
    sys.modules["cupy"] = stand_ins.FAKE_CUPY  # type: ignore[assignment]
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    return main(argv)


if __name__ == "__main__":
    exit_with(run)
