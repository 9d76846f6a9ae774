"""The benchmark's command line: nccl-tests' options and size syntax, parsed and validated into Options."""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .._cli import configure_logging
from .collectives import COLLECTIVES, DType, resolve_ops, resolve_types
from .process import exit_now

_SIZE_RE = re.compile(r"^\s*((?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)\s*([A-Za-z]?)")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
NO_TIMEOUT = 1e7  # -T 0: seconds that no run reaches (a number, for socket timeouts and deadlines)


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


def add_rank_options(parser: Any, nranks_help: str) -> None:
    """The options of ours that the bench and the tuner share: the rank count (a flag no nccl-tests
    option uses) and whether MPS runs the ranks."""
    parser.add_argument(
        "--nranks", "--ranks", dest="ranks", metavar="NRANKS", type=parse_int, default=None, help=nranks_help
    )
    parser.add_argument(
        "--mps", dest="mps", action="store_true", default=None, help="MPS (default: when ranks share a GPU)"
    )
    parser.add_argument("--no-mps", dest="mps", action="store_false", help="never start MPS")


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
    # nccl-tests' options beyond the loop's (defaults as nccl-tests)
    ngpus: int = 1
    nthreads: int = 1
    run_cycles: int = 1
    parallel_init: int = 0
    stream_null: bool = False
    local_register: int = 0
    cta_policy: int = -1  # -1: not set

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
    configure_logging()
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
    g = p.add_argument_group("ranks and library (options of ours: no nccl-tests option has these names)")
    add_rank_options(
        g,
        "ranks, one process each (default: -g x -t, as nccl-tests: 1). More ranks than GPUs share them,"
        " under MPS unless --no-mps. Not under mpirun, where -np says.",
    )
    g.add_argument(
        "--lib", default=None, help="benchmark this libnccl.so.2 instead of ours (e.g. stock NCCL)"
    )
    g.add_argument(
        "--alloc",
        choices=("ncclmem", "cuda"),
        default="ncclmem",
        help="buffers from ncclMemAlloc (as nccl-tests) or plain cudaMalloc through CuPy",
    )
    g = p.add_argument_group(
        "nccl-tests options",
        "nccl-tests 2.19's options, with its meanings; the few this benchmark cannot honour are refused by"
        " name",
    )
    # nccl-tests' integer options (strtol syntax): short, long, default, help.
    integer_options = [
        ("-t", "--nthreads", 1, "threads per process: -t x -g ranks (default 1)"),
        ("-g", "--ngpus", 1, "GPUs per thread: -t x -g ranks (default 1)"),
        ("-f", "--stepfactor", None, "size multiplier (default 2; 1 with -i)"),
        ("-n", "--iters", 20, "timed iterations (default 20)"),
        ("-m", "--agg_iters", 1, "calls aggregated in one group (default 1)"),
        ("-w", "--warmup_iters", 5, "warm-up iterations (default 5)"),
        ("-N", "--run_cycles", 1, "sweeps of the sizes, each printed (default 1; 0: forever)"),
        ("-p", "--parallel_init", 0, "0/1 (every rank is its own process: always parallel)"),
        ("-c", "--check", 1, "check iterations per size (default 1; 0: none)"),
        ("-G", "--cudagraph", 0, "capture the iterations, launch the graph N times"),
        ("-a", "--average", 1, "time over ranks: 0 rank 0, 1 avg, 2 min, 3 max"),
        ("-z", "--blocking", 0, "1: sync+barrier after each call, 2: sync"),
        ("-y", "--stream_null", 0, "1: call on the NULL stream"),
        ("-C", "--report_cputime", 0, "1: report the launch (CPU) time"),
        ("-S", "--report_timestamps", 0, "0 (1 is refused: not implemented)"),
        ("-R", "--local_register", 0, "1: ncclCommRegister the buffers, 2: ncclCommWindowRegister them"),
        ("-x", "--cta_policy", -1, "ncclConfig_t.CTAPolicy (default: not set)"),
        ("-D", "--device_implementation", 0, "0 (above 0, NCCL's device API, is refused)"),
        ("-V", "--device_cta_count", 16, "CTAs of -D's kernels (unused with -D 0)"),
        ("-M", "--memory_report", 0, "0 (1 is refused: not implemented)"),
    ]
    for short, long, default, text in integer_options:
        g.add_argument(short, long, type=parse_int, default=default, help=text)
    g.add_argument("-b", "--minbytes", default="8", help="smallest size (K/M/G suffixes; default 8)")
    g.add_argument("-e", "--maxbytes", default="64M", help="largest size (default 64M)")
    g.add_argument(
        "-i", "--stepbytes", default=None, help="size increment when the step factor is 1 (default 1M)"
    )
    g.add_argument("-d", "--datatype", default="float", help="type name(s) or all (default float)")
    g.add_argument("-o", "--op", default="sum", help="sum, prod, max, min, avg, mulsum (premulsum) or all")
    g.add_argument("-r", "--root", default="0", help="root rank, or all (default 0)")
    g.add_argument(
        "-T",
        "--timeout",
        type=float,
        default=300.0,
        help="seconds any single wait may take (default 300; 0: no limit, as nccl-tests' default)",
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
        raise UsageError("--nranks must be at least 1")
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
        (math.isfinite(a.timeout) and a.timeout >= 0, "-T/--timeout is seconds, 0 or more (0: no limit)"),
        (a.nthreads >= 1, "-t/--nthreads must be at least 1"),
        (a.ngpus >= 1, "-g/--ngpus must be at least 1"),
        (a.run_cycles >= 0, "-N/--run_cycles must not be negative (0: forever)"),
        (a.parallel_init in (0, 1), "-p/--parallel_init is 0 or 1"),
        (a.stream_null in (0, 1), "-y/--stream_null is 0 or 1"),
        (not (a.stream_null and a.cudagraph), "-y 1 (the NULL stream) cannot be captured for -G"),
        (a.local_register in (0, 1, 2), "-R/--local_register is 0, 1 (register) or 2 (symmetric windows)"),
        (a.cta_policy >= -1, "-x/--cta_policy is 0, 1 or 2"),
        (
            a.device_implementation == 0,
            "-D/--device_implementation above 0 (NCCL's device API) is not supported by this benchmark",
        ),
        (a.report_timestamps == 0, "-S/--report_timestamps 1 is not supported by this benchmark"),
        (a.memory_report == 0, "-M/--memory_report 1 is not supported by this benchmark"),
        (
            a.ranks is None or (a.ngpus == 1 and a.nthreads == 1),
            "--nranks counts every rank: give it or -g/-t, not both",
        ),
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
        timeout=a.timeout if a.timeout > 0 else NO_TIMEOUT,
        run_timeout=a.run_timeout,
        json_path=a.json,
        alloc=a.alloc,
        worker=a.worker,
        ngpus=a.ngpus,
        nthreads=a.nthreads,
        run_cycles=a.run_cycles,
        parallel_init=a.parallel_init,
        stream_null=bool(a.stream_null),
        local_register=a.local_register,
        cta_policy=a.cta_policy,
    )
