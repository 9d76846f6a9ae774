"""The tuner's command line, parsed and validated into TuneOptions, and what it asks to tune: the sizes per
collective and the candidates."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from .._cli import DASH_N_REFUSED
from ..bench.collectives import COLLECTIVES, DType, Layout, layout, resolve_types
from ..bench.options import (
    Options,
    Parser,
    UsageError,
    add_rank_options,
    parse_int,
    parse_size,
    require,
    size_series,
)
from ..bench.options import parse_args as parse_bench_args
from .candidates import STOCK, Candidate, default_candidates, parse_candidate_specs


@dataclass
class TuneOptions:
    ranks: int | None
    mps: bool | None
    collectives: list[str]
    explicit_candidates: dict[str, list[Candidate]] | None
    min_bytes: int
    max_bytes: int
    step_factor: int
    dtype: DType
    replays: int
    calls_per_graph: int
    time_per_point: float
    timeout: float
    run_timeout: float
    alloc: str
    out: str
    plot: str | None
    stock_lib: str | None
    raw: str | None
    from_raw: str | None
    worker: bool = False
    stock: bool = False
    results: str | None = None
    ranks_per_gpu: int | None = None

    def sizes(self) -> list[int]:
        return size_series(self.min_bytes, self.max_bytes, self.step_factor, 0)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m mscclpp_nccl.tune",
        description="Tune the library's algorithm choice per collective and size on this machine, and write"
        " the tuning table (JSON) its selector reads.",
        allow_abbrev=False,
    )
    add_rank_options(p, "ranks, one process each (default: the GPUs, or 4 sharing one GPU)")
    p.add_argument("-N", dest="dash_n", default=None, help=argparse.SUPPRESS)
    p.add_argument(
        "--collectives", default=None, help=f"comma-separated, or all (default all): {', '.join(COLLECTIVES)}"
    )
    p.add_argument("-b", "--minbytes", default="8", help="smallest size (K/M/G suffixes; default 8)")
    p.add_argument("-e", "--maxbytes", default="256M", help="largest size (default 256M)")
    p.add_argument("-f", "--stepfactor", type=parse_int, default=2, help="size multiplier (default 2)")
    p.add_argument("-d", "--dtype", default="bfloat16", help="data type (default bfloat16)")
    p.add_argument("--replays", type=parse_int, default=20, help="timed graph replays per point (default 20)")
    p.add_argument(
        "--calls-per-graph", type=parse_int, default=10, help="calls captured in the graph (default 10)"
    )
    p.add_argument(
        "--time-per-point",
        type=float,
        default=0.5,
        help="seconds of timed replays a candidate may take at one size; fewer replays (at least 3) for"
        " long calls (default 0.5)",
    )
    p.add_argument(
        "--candidates",
        nargs="+",
        action="extend",
        default=None,
        metavar="ITEM",
        help="explicit candidates instead of the default grid: [collective=]algorithm[/blocks[/threads"
        "[/chunk_bytes]]] items (0: the default), space- or comma-separated",
    )
    p.add_argument(
        "--out", default="tuning.json", help="the table to write or merge into (default tuning.json)"
    )
    p.add_argument("--plot", default=None, help="also draw the times to this PNG (needs matplotlib)")
    p.add_argument("--stock-lib", default=None, help="also time this stock libnccl.so.2 (for the plot)")
    p.add_argument("--raw", default=None, help="also write every measurement to this JSON file")
    p.add_argument("--from-raw", default=None, help="no run: build the table (and plot) from a --raw file")
    p.add_argument(
        "--alloc",
        choices=("ncclmem", "cuda"),
        default="ncclmem",
        help="buffers from ncclMemAlloc or cudaMalloc",
    )
    p.add_argument("-T", "--timeout", type=float, default=60.0, help="seconds one wait may take (default 60)")
    p.add_argument(
        "--run-timeout", type=float, default=3600.0, help="seconds for the whole run (default 3600)"
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--stock", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--results", default=None, help=argparse.SUPPRESS)
    p.add_argument("--ranks-per-gpu", type=parse_int, default=None, help=argparse.SUPPRESS)
    return p


def parse_collectives(text: str | None) -> list[str]:
    if text is None or text.strip().lower() == "all":
        return list(COLLECTIVES)
    out = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part not in COLLECTIVES:
            raise ValueError(f"unknown collective {part!r}; one of {', '.join(COLLECTIVES)} or all")
        if part not in out:
            out.append(part)
    if not out:
        raise ValueError("no collective given")
    return out


def parse_args(argv: Sequence[str]) -> TuneOptions:
    a = build_parser().parse_args(list(argv))
    try:
        collectives = parse_collectives(a.collectives)
        min_bytes, max_bytes = parse_size(a.minbytes), parse_size(a.maxbytes)
        if a.stepfactor < 2:
            raise ValueError("-f/--stepfactor must be at least 2")
        size_series(min_bytes, max_bytes, a.stepfactor, 0)
        types = resolve_types(a.dtype)
        if len(types) != 1:
            raise ValueError("--dtype takes one data type")
        explicit = None
        if a.candidates:
            explicit = parse_candidate_specs(a.candidates, collectives)
            missing = [c for c in collectives if c not in explicit]
            if a.collectives is None:
                collectives = [c for c in collectives if c in explicit]
            elif missing:
                raise ValueError(f"no candidate serves {', '.join(missing)}")
            if not collectives:
                raise ValueError("the candidates serve none of the collectives")
    except ValueError as e:
        raise UsageError(str(e)) from None
    checks = [
        (a.dash_n is None, DASH_N_REFUSED),
        (a.ranks is None or a.ranks >= 1, "--nranks must be at least 1"),
        (a.replays >= 1, "--replays must be at least 1"),
        (a.calls_per_graph >= 1, "--calls-per-graph must be at least 1"),
        (a.time_per_point > 0, "--time-per-point must be positive"),
        (a.timeout > 0, "-T/--timeout must be positive"),
        (a.run_timeout > 0, "--run-timeout must be positive"),
        (max_bytes >= 1, "-e/--maxbytes must be at least 1"),
        (not (a.stock and not a.stock_lib), "--stock needs --stock-lib"),
    ]
    require(checks)
    same = ("ranks", "mps", "replays", "calls_per_graph", "time_per_point", "timeout", "run_timeout", "alloc")
    same += ("out", "plot", "stock_lib", "raw", "from_raw", "worker", "stock", "results", "ranks_per_gpu")
    return TuneOptions(
        collectives=collectives,
        explicit_candidates=explicit,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        step_factor=a.stepfactor,
        dtype=types[0],
        **{name: getattr(a, name) for name in same},
    )


def tuned_points(collective: str, sizes: Sequence[int], elt: int, nranks: int) -> list[tuple[int, Layout]]:
    """(size, layout) of the sizes worth tuning: a non-empty call, each lookup byte count once."""
    out: list[tuple[int, Layout]] = []
    seen: set[int] = set()
    for size in sizes:
        lay = layout(collective, size, elt, nranks)
        nbytes = lay.count * elt
        if nbytes == 0 or nbytes in seen:
            continue
        seen.add(nbytes)
        out.append((size, lay))
    return out


def candidates_for(cfg: TuneOptions, collective: str, max_blocks: int) -> list[Candidate]:
    if cfg.stock:
        return [Candidate(collective, STOCK)]
    if cfg.explicit_candidates is not None:
        return list(cfg.explicit_candidates.get(collective, []))
    return default_candidates(collective, max_blocks)


def bench_options(cfg: TuneOptions, collective: str) -> Options:
    """The benchmark's options for the worker machinery (buffers, data, the bookkeeping link)."""
    argv = [
        collective,
        "-b",
        str(cfg.min_bytes),
        "-e",
        str(cfg.max_bytes),
        "-f",
        str(cfg.step_factor),
        "-d",
        cfg.dtype.name,
        "-n",
        str(cfg.calls_per_graph),
        "-w",
        "1",
        # Host exchanges wait while other ranks wait on the GPU (up to --timeout) or build references.
        "-T",
        str(3 * cfg.timeout + 120),
        "--alloc",
        cfg.alloc,
    ]
    if cfg.stock and cfg.stock_lib:
        argv += ["--lib", cfg.stock_lib]
    return parse_bench_args(argv)
