"""`python -m mscclpp_nccl.tune`: measure every candidate algorithm per collective and message size on this
machine, and write the tuning table (JSON) that the C library's selector reads.

How it works. The command starts N ranks through the launcher (sharing GPUs under MPS when there are more
ranks than GPUs), each re-invoking this module with --worker. A worker reuses the benchmark's per-rank
machinery (`bench.rank.Rank`: stream, buffers from ncclMemAlloc, data generation and NumPy references, the
TCP bookkeeping link between ranks, the watchdog). For each collective it creates one communicator per
candidate with ncclCommInitRank (a fresh unique id from rank 0, shared over the bookkeeping link), with
MSCCLPP_NCCL_ALGO set to that candidate's item while the communicator initialises: the library reads the
variable at init, so each communicator is pinned to one algorithm and launch shape.

Per message size, every candidate is
  1. verified: one eager call and one CUDA-graph replay of a call, each compared with a NumPy reference
     on inputs that make the result exact. A candidate that errors (at init, at a call, asynchronously or
     by timing out) or gives a wrong result is reported and excluded from the collective: it is never
     chosen, at that size or any other;
  2. timed: --calls-per-graph back-to-back out-of-place calls captured in one CUDA graph, one warm-up
     replay, then up to --replays replays (fewer for slow sizes, so that a point takes about
     --time-per-point seconds); time per call is host wall time around the replays divided by the calls,
     the slowest rank's time counts. A candidate already more than 3x slower than the best one at this
     size (on calls of 2 ms or more) is not timed further: its time is shown with a "~" and it cannot
     win.
Every decision that changes which library calls a rank makes is agreed among the ranks first (each rank's
status goes over the bookkeeping link), so that one rank's failure never leaves the others waiting in a
kernel: they abort that candidate's communicator together.

Sizes are nccl-tests' (-b, -e, -f: the size column, total bytes for all_gather, reduce_scatter, alltoall,
gather and scatter). The table's byte boundaries are what the C selector looks a call up by: the call's
count argument times the element size (for the collectives above, the bytes per rank).

Rules: the winner at a size is the fastest candidate, except that the previous size's winner keeps the
size when it is within 3% of the fastest (noise between equivalent candidates would otherwise split
rules); consecutive tuned sizes with the same winner merge into one rule whose max_bytes is the largest
of them; a call between two tuned sizes takes the rule of the next larger tuned size; the last rule has
max_bytes null. blocks/threads/chunk_bytes are omitted where the library's default won. The table is
merged into --out when it exists (entries with the same gpu, nranks, ranks_per_gpu, collective and
dtype_bytes are replaced, others kept). Use it with MSCCLPP_NCCL_TUNING_FILE=PATH, or ship it as
mscclpp_nccl/tuning/default.json.

The table building, merging, rule compression, validation, formatting and plot data are plain functions,
usable and testable without a GPU; --from-raw rebuilds the table and plot from a --raw file.

Modules: candidates (algorithms, shapes, the default grid), table (the table's format), results (the raw
measurements), rules (winners and rule compression), report (the tuner's lines), policy (replays,
pruning, the cost model), plot, options (the command line), comms, measure and worker (a tuning rank),
driver (the command). Their public names are here.
"""

from __future__ import annotations

from ..progress import format_duration, remaining_estimate
from .candidates import (
    ALGO_ENV,
    ALGORITHMS,
    BLOCK_GRID,
    EXCHANGE_COLLECTIVES,
    MAX_PACKET_BLOCKS,
    STOCK,
    Candidate,
    algo_env,
    block_cap,
    default_candidates,
    parse_candidate,
    parse_candidate_specs,
    short_name,
)
from .driver import finish, main, run_tuning
from .measure import ROOT, Outcome, count_mismatches, reference
from .options import TuneOptions, bench_options, build_parser, candidates_for, parse_args, tuned_points
from .plot import plot_results, plot_series, stock_series
from .policy import (
    estimate_point_seconds,
    estimate_run_seconds,
    replays_for,
    should_prune,
)
from .report import format_bytes, format_cell, format_point_line, format_rules, format_us
from .results import RAW_FORMAT, RAW_VERSION, load_raw, make_raw, point_times, read_run, run_candidates
from .rules import TIE_TOLERANCE, build_entries, compress_rules, pick_winner, winners
from .table import (
    TABLE_FORMAT,
    TABLE_VERSION,
    WILDCARD,
    TableError,
    entry_key,
    load_table,
    make_entry,
    merge_tables,
    new_table,
    table_text,
    validate_table,
    write_table,
)
from .worker import TuneWorker, worker_main

__all__ = [
    "ALGORITHMS",
    "ALGO_ENV",
    "BLOCK_GRID",
    "EXCHANGE_COLLECTIVES",
    "MAX_PACKET_BLOCKS",
    "RAW_FORMAT",
    "RAW_VERSION",
    "ROOT",
    "STOCK",
    "TABLE_FORMAT",
    "TABLE_VERSION",
    "TIE_TOLERANCE",
    "WILDCARD",
    "Candidate",
    "Outcome",
    "TableError",
    "TuneOptions",
    "TuneWorker",
    "algo_env",
    "bench_options",
    "block_cap",
    "build_entries",
    "build_parser",
    "candidates_for",
    "compress_rules",
    "count_mismatches",
    "default_candidates",
    "entry_key",
    "estimate_point_seconds",
    "estimate_run_seconds",
    "finish",
    "format_bytes",
    "format_cell",
    "format_duration",
    "format_point_line",
    "format_rules",
    "format_us",
    "load_raw",
    "load_table",
    "main",
    "make_entry",
    "make_raw",
    "merge_tables",
    "new_table",
    "parse_args",
    "parse_candidate",
    "parse_candidate_specs",
    "pick_winner",
    "plot_results",
    "plot_series",
    "point_times",
    "read_run",
    "reference",
    "remaining_estimate",
    "replays_for",
    "run_candidates",
    "run_tuning",
    "short_name",
    "should_prune",
    "stock_series",
    "table_text",
    "tuned_points",
    "validate_table",
    "winners",
    "worker_main",
    "write_table",
]
