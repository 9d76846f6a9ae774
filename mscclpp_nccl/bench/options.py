"""The benchmark's command line: nccl-tests' options and size syntax, parsed and validated into Options."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .collectives import COLLECTIVES, DType, resolve_ops, resolve_types
from .process import exit_now

_SIZE_RE = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]?)")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def parse_size(text: str) -> int:
    """Bytes from nccl-tests' size syntax: a number with an optional K, M or G (binary) suffix.

    As nccl-tests reads it: anything after the unit letter is ignored ("64MB" is 64M), fractions are
    allowed ("1.5K" is 1536) and the result is truncated to whole bytes.
    """
    m = _SIZE_RE.match(text)
    if not m:
        raise ValueError(f"invalid size {text!r}")
    unit = m.group(2).lower()
    if unit not in _UNITS:
        raise ValueError(f"invalid size {text!r}: the unit must be K, M or G")
    return int(float(m.group(1)) * _UNITS[unit])


def parse_int(text: str) -> int:
    """An integer as strtol(text, NULL, 0) reads one: decimal, 0x hex or 0 octal."""
    text = text.strip()
    try:
        return int(text, 0)
    except ValueError:
        # int(x, 0) refuses leading zeros ("08"); strtol reads those as octal, and so would fail too.
        try:
            return int(text, 10)
        except ValueError:
            raise ValueError(f"invalid integer {text!r}") from None


def size_series(min_bytes: int, max_bytes: int, step_factor: int, step_bytes: int) -> list[int]:
    """The sizes nccl-tests sweeps: min, then *factor (factor > 1) or +step, while <= max."""
    if min_bytes < 0 or max_bytes < 0:
        raise ValueError("sizes must not be negative")
    if min_bytes > max_bytes:
        raise ValueError(f"invalid sizes for 'minbytes' and 'maxbytes': {min_bytes} > {max_bytes}")
    if step_factor <= 1 and step_bytes <= 0 and min_bytes < max_bytes:
        raise ValueError("the step must grow: give -f > 1 or -i > 0")
    out = []
    size = min_bytes
    while size <= max_bytes:
        out.append(size)
        if step_factor > 1:
            size = size * step_factor if size > 0 else 1  # nccl-tests would loop forever on 0
        elif step_bytes > 0:
            size += step_bytes
        else:
            break
    return out


@dataclass
class Options:
    """Everything the command line says, validated."""

    collective: str
    ranks: int | None
    mps: bool | None
    lib: str | None
    min_bytes: int
    max_bytes: int
    step_bytes: int
    step_factor: int
    iters: int
    agg_iters: int
    warmup_iters: int
    check: int
    graph_launches: int
    types: list[DType]
    type_spec: str
    ops: list[str]
    op_spec: str
    root: int  # -1: every rank in turn (-r all)
    average: int
    blocking: int
    report_cputime: bool
    timeout: float
    run_timeout: float
    json_path: str | None
    alloc: str
    worker: bool

    def sizes(self) -> list[int]:
        return size_series(self.min_bytes, self.max_bytes, self.step_factor, self.step_bytes)


class UsageError(ValueError):
    """A command-line mistake."""


class Parser(argparse.ArgumentParser):
    """An argument parser whose mistakes raise UsageError (the command prints its usage and exits 2)."""

    def error(self, message: str) -> Any:
        raise UsageError(message)


class _Command(Protocol):
    worker: bool


_O = TypeVar("_O", bound=_Command)


def run_command(
    prog: str,
    argv: Sequence[str] | None,
    parse: Callable[[Sequence[str]], _O],
    parser: Callable[[], argparse.ArgumentParser],
    worker: Callable[[_O, list[str]], int],
    command: Callable[[_O, list[str]], int],
) -> int:
    """A command's main: parses argv (sys.argv[1:] when None), printing the usage and the mistake as argparse
    does (exit code 2); with --worker, runs one rank and exits at once, skipping the interpreter's teardown
    (nothing may hang after the last line); else runs the command."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        opts = parse(args)
    except UsageError as e:
        parser().print_usage(sys.stderr)
        print(f"{prog}: error: {e}", file=sys.stderr)
        return 2
    if opts.worker:
        exit_now(worker(opts, args))
    return command(opts, args)


def require(checks: Sequence[tuple[bool, str]]) -> None:
    """UsageError with the message of the first check that fails."""
    for ok, message in checks:
        if not ok:
            raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    p = Parser(
        prog="python -m mscclpp_nccl.bench",
        description="nccl-tests-compatible benchmark of a libnccl.so.2 (ours by default) on this host.",
        allow_abbrev=False,
    )
    p.add_argument("collective", choices=COLLECTIVES, help="the collective to benchmark")
    g = p.add_argument_group("ranks and library")
    g.add_argument(
        "-N", "--ranks", type=parse_int, default=None, help="ranks (default: GPUs, or 4 on one GPU)"
    )
    g.add_argument(
        "--mps", dest="mps", action="store_true", default=None, help="MPS (default: when ranks share a GPU)"
    )
    g.add_argument("--no-mps", dest="mps", action="store_false", help="never start MPS")
    g.add_argument(
        "--lib", default=None, help="benchmark this libnccl.so.2 instead of ours (e.g. stock NCCL)"
    )
    g.add_argument(
        "--alloc",
        choices=("ncclmem", "cuda"),
        default="ncclmem",
        help="buffers from ncclMemAlloc (as nccl-tests) or plain cudaMalloc through CuPy",
    )
    g = p.add_argument_group("nccl-tests options")
    g.add_argument("-b", "--minbytes", default="8", help="smallest size (K/M/G suffixes; default 8)")
    g.add_argument("-e", "--maxbytes", default="64M", help="largest size (default 64M)")
    g.add_argument(
        "-i", "--stepbytes", default=None, help="size increment when the step factor is 1 (default 1M)"
    )
    g.add_argument(
        "-f", "--stepfactor", type=parse_int, default=None, help="size multiplier (default 2; 1 with -i)"
    )
    g.add_argument("-n", "--iters", type=parse_int, default=20, help="timed iterations (default 20)")
    g.add_argument(
        "-m", "--agg_iters", type=parse_int, default=1, help="calls aggregated in one group (default 1)"
    )
    g.add_argument("-w", "--warmup_iters", type=parse_int, default=5, help="warm-up iterations (default 5)")
    g.add_argument(
        "-c", "--check", type=parse_int, default=1, help="check iterations per size (default 1; 0: none)"
    )
    g.add_argument(
        "-G", "--cudagraph", type=parse_int, default=0, help="capture the iterations, launch N times"
    )
    g.add_argument("-d", "--datatype", default="float", help="type name(s) or all (default float)")
    g.add_argument("-o", "--op", default="sum", help="sum, prod, max, min, avg, mulsum (premulsum) or all")
    g.add_argument("-r", "--root", default="0", help="root rank, or all (default 0)")
    g.add_argument(
        "-a", "--average", type=parse_int, default=1, help="time over ranks: 0 rank 0, 1 avg, 2 min, 3 max"
    )
    g.add_argument(
        "-z", "--blocking", type=parse_int, default=0, help="1: sync+barrier after each call, 2: sync"
    )
    g.add_argument(
        "-C", "--report_cputime", type=parse_int, default=0, help="1: report the launch (CPU) time"
    )
    g.add_argument(
        "-T", "--timeout", type=float, default=300.0, help="seconds any single wait may take (default 300)"
    )
    g.add_argument(
        "-J", "--output_file", "--json", dest="json", default=None, help="write all results as JSON"
    )
    g.add_argument(
        "--run-timeout", type=float, default=3600.0, help="seconds for the whole run (default 3600)"
    )
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return p


def parse_args(argv: Sequence[str]) -> Options:
    """Options from the command line; UsageError on anything nccl-tests would refuse or we cannot do."""
    a = build_parser().parse_args(list(argv))
    try:
        min_bytes, max_bytes = parse_size(a.minbytes), parse_size(a.maxbytes)
        step_bytes = parse_size(a.stepbytes) if a.stepbytes is not None else 1 << 20
        step_factor = a.stepfactor if a.stepfactor is not None else (1 if a.stepbytes is not None else 2)
        types = resolve_types(a.datatype)
        ops = resolve_ops(a.op)
        root = -1 if a.root.strip().lower() == "all" else parse_int(a.root)
        size_series(min_bytes, max_bytes, step_factor, step_bytes)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if a.ranks is not None and a.ranks < 1:
        raise UsageError("--ranks must be at least 1")
    if root < -1:
        raise UsageError("the root must be a rank or all")
    checks = [
        (a.iters >= 1, "-n/--iters must be at least 1"),
        (a.agg_iters >= 1, "-m/--agg_iters must be at least 1"),
        (a.warmup_iters >= 0, "-w/--warmup_iters must not be negative"),
        (a.check >= 0, "-c/--check must not be negative"),
        (a.cudagraph >= 0, "-G/--cudagraph must not be negative"),
        (a.average in (0, 1, 2, 3), "-a/--average is 0 (rank 0), 1 (avg), 2 (min) or 3 (max)"),
        (a.blocking in (0, 1, 2), "-z/--blocking is 0, 1 or 2"),
        (not (a.blocking and a.cudagraph), "-z (blocking) cannot be combined with -G (CUDA graphs)"),
        (a.timeout > 0, "-T/--timeout must be positive"),
        (a.run_timeout > 0, "--run-timeout must be positive"),
    ]
    require(checks)
    return Options(
        collective=a.collective,
        ranks=a.ranks,
        mps=a.mps,
        lib=a.lib,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        step_bytes=step_bytes,
        step_factor=step_factor,
        iters=a.iters,
        agg_iters=a.agg_iters,
        warmup_iters=a.warmup_iters,
        check=a.check,
        graph_launches=a.cudagraph,
        types=types,
        type_spec=a.datatype,
        ops=ops,
        op_spec=a.op,
        root=root,
        average=a.average,
        blocking=a.blocking,
        report_cputime=bool(a.report_cputime),
        timeout=a.timeout,
        run_timeout=a.run_timeout,
        json_path=a.json,
        alloc=a.alloc,
        worker=a.worker,
    )
