"""`python -m mscclpp_nccl.bench COLLECTIVE [options]`: an nccl-tests-compatible benchmark.

Starts its ranks through the launcher, one process per rank, each re-invoking this module with --worker:
-t x -g ranks as nccl-tests (one by default), one GPU each, or --nranks N (ours), which shares GPUs
under MPS when N exceeds them. Under mpirun (Open MPI, MPICH, Intel MPI, MVAPICH) each process is one
rank of MPI's world instead, as nccl-tests built with MPI; rank 0's bookkeeping address comes from
MASTER_ADDR/MASTER_PORT, mpi4py, or (every rank on one host) a file (mscclpp_nccl.mpi_world).
Every nccl-tests 2.19 option is taken with its meaning, except -D > 0, -S 1 and -M 1, refused by name.
Every rank drives one communicator of the library under test (ours by default, any libnccl.so.2 with
--lib) through the cffi binding, on one CUDA stream, and rank 0 prints the table in nccl-tests' layout:
the same columns, widths and units, the same size/count conventions, algbw/busbw factors, timing method
and data check semantics.

Timing is nccl-tests': per size, warm-up calls, then host wall time around `iters` back-to-back calls and
a stream synchronisation (with -G, the calls are captured into a CUDA graph which is launched G times),
divided by the number of calls; the time reported combines the ranks' times as -a says. Checking (-c N)
fills every rank's input with data any rank can regenerate, runs one call and compares the output with a
NumPy reference (float64 arithmetic), counting wrong elements. Integer results and float results of
sum, prod, min, max and mulsum must be exact (the data is chosen so that any order of reduction gives
the exact result); float avg may be 2 units in the last place off, as in nccl-tests.

Bookkeeping between ranks (barriers, the unique id, times, error counts) goes over a small TCP hub on the
launcher's MASTER_ADDR/MASTER_PORT, never through the library under test, and every wait (stream
synchronisation, host exchange, communicator set-up and teardown) has a timeout: a library that fails or
hangs gives a clear message and a non-zero exit, never a hang.

Modules: collectives (types, ops, counts, bandwidth), options (the command line), data (codecs, inputs,
references, comparison), report (nccl-tests' output and the JSON file), hostgroup (bookkeeping between
ranks), process (errors, watchdog), rank (a rank's communicator, stream and buffers), calls (a
collective's library calls), worker (the timing loop), cli (the command). Their public names are here.
"""

from __future__ import annotations

from .cli import default_ranks, launch_plan, main
from .collectives import (
    COLLECTIVES,
    OP_CODES,
    OP_COLUMN,
    OPS,
    REDUCING,
    ROOTED,
    SPLIT,
    TYPE_BY_NAME,
    TYPES,
    UNCHECKED_IN_PLACE,
    DType,
    Layout,
    bandwidth,
    bus_factor,
    combine_times,
    layout,
    resolve_ops,
    resolve_types,
)
from .data import (
    count_wrong,
    data_kind,
    decode,
    encode,
    expected_output,
    gen_input,
    input_for,
    premul_scalar,
    reduce_ranks,
    scalar_bits,
    seed_key,
    wrong_mask,
)
from .hostgroup import HostGroup, HostGroupError
from .options import Options, UsageError, build_parser, parse_args, parse_int, parse_size, size_series
from .process import BenchError, RankInfo
from .report import float_str, footer_lines, format_preamble, format_result, header_lines, program_name
from .worker import Worker, worker_main

__all__ = [
    "COLLECTIVES",
    "OPS",
    "OP_CODES",
    "OP_COLUMN",
    "REDUCING",
    "ROOTED",
    "SPLIT",
    "TYPES",
    "TYPE_BY_NAME",
    "UNCHECKED_IN_PLACE",
    "BenchError",
    "DType",
    "HostGroup",
    "HostGroupError",
    "Layout",
    "Options",
    "RankInfo",
    "UsageError",
    "Worker",
    "bandwidth",
    "build_parser",
    "bus_factor",
    "combine_times",
    "count_wrong",
    "data_kind",
    "decode",
    "default_ranks",
    "encode",
    "expected_output",
    "float_str",
    "footer_lines",
    "format_preamble",
    "format_result",
    "gen_input",
    "header_lines",
    "input_for",
    "launch_plan",
    "layout",
    "main",
    "parse_args",
    "parse_int",
    "parse_size",
    "premul_scalar",
    "program_name",
    "reduce_ranks",
    "resolve_ops",
    "resolve_types",
    "scalar_bits",
    "seed_key",
    "size_series",
    "worker_main",
    "wrong_mask",
]
