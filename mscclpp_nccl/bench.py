"""`python -m mscclpp_nccl.bench COLLECTIVE [options]`: an nccl-tests-compatible benchmark.

Starts N ranks through the launcher (one process per rank, one GPU each, shared under MPS when there are
more ranks than GPUs), each re-invoking this module with --worker. Every rank drives one communicator of
the library under test (ours by default, any libnccl.so.2 with --lib) through the cffi binding, on one
CUDA stream, and rank 0 prints the table in nccl-tests' layout: the same columns, widths and units, the
same size/count conventions, algbw/busbw factors, timing method and data check semantics.

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
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import math
import os
import re
import socket
import struct
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# --- collectives -------------------------------------------------------------------------------------

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "gather",
    "scatter",
    "sendrecv",
)
# Collectives whose data is reduced (the check needs a reduction reference).
REDUCING = frozenset({"all_reduce", "reduce_scatter", "reduce"})
# Collectives whose redop column shows the op and which -o all sweeps (nccl-tests' sendrecv does too).
OP_COLUMN = REDUCING | {"sendrecv"}
# Collectives that take a root (the root column shows it; -r all sweeps every rank).
ROOTED = frozenset({"broadcast", "reduce", "gather", "scatter"})
# Collectives whose size column is the total over ranks and whose count column is per rank: the
# per-rank count is size / elt / nranks rounded down to 16 bytes (nccl-tests' convention).
SPLIT = frozenset({"all_gather", "reduce_scatter", "alltoall", "gather", "scatter"})
# In place, these are timed but not checked: NCCL does not support in-place alltoall, and in-place
# sendrecv races (nccl-tests prints N/A for both).
UNCHECKED_IN_PLACE = frozenset({"alltoall", "sendrecv"})


# --- data types ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DType:
    """An NCCL data type as the benchmark sees it."""

    name: str  # nccl-tests' name, printed in the type column
    nccl: int  # ncclDataType_t
    size: int  # bytes per element
    kind: str  # "i" signed integer, "u" unsigned integer, "f" floating point
    storage: str  # NumPy dtype of the bits on the host (bfloat16 and fp8 travel as unsigned ints)
    exact: int  # floats: every integer in [-exact, exact] is representable; ints: the largest value
    prod_twos: int  # at most this many factors of 2 keep a product exact and in range
    min_version: int = 0  # first NCCL version code with this type

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def bits(self) -> int:
        return 8 * self.size


TYPES = (
    DType("int8", 0, 1, "i", "int8", 127, 6),
    DType("uint8", 1, 1, "u", "uint8", 255, 7),
    DType("int32", 2, 4, "i", "int32", 2**31 - 1, 30),
    DType("uint32", 3, 4, "u", "uint32", 2**32 - 1, 31),
    DType("int64", 4, 8, "i", "int64", 2**63 - 1, 62),
    DType("uint64", 5, 8, "u", "uint64", 2**64 - 1, 63),
    DType("half", 6, 2, "f", "float16", 2**11, 15),
    DType("float", 7, 4, "f", "float32", 2**24, 127),
    DType("double", 8, 8, "f", "float64", 2**53, 1023),
    DType("bfloat16", 9, 2, "f", "uint16", 2**8, 127, 21000),
    DType("f8e4m3", 10, 1, "f", "uint8", 2**4, 8, 22400),
    DType("f8e5m2", 11, 1, "f", "uint8", 2**3, 15, 22400),
)
TYPE_BY_NAME = {t.name: t for t in TYPES}
_TYPE_ALIASES = {
    "char": "int8",
    "int": "int32",
    "float16": "half",
    "fp16": "half",
    "float32": "float",
    "fp32": "float",
    "float64": "double",
    "fp64": "double",
    "bf16": "bfloat16",
    "fp8_e4m3": "f8e4m3",
    "float8_e4m3": "f8e4m3",
    "float8_e4m3fn": "f8e4m3",
    "e4m3": "f8e4m3",
    "fp8_e5m2": "f8e5m2",
    "float8_e5m2": "f8e5m2",
    "e5m2": "f8e5m2",
}

# nccl-tests' op names; mulsum is ncclRedOpCreatePreMulSum with a per-rank host scalar.
OPS = ("sum", "prod", "max", "min", "avg", "mulsum")
OP_CODES = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
_OP_MIN_VERSION = {"avg": 21000, "mulsum": 21100}
_OP_ALIASES = {"premulsum": "mulsum", "premul": "mulsum"}


def resolve_types(spec: str) -> list[DType]:
    """-d: one type name (nccl-tests' or an alias), a comma-separated list, or all."""
    out: list[DType] = []
    for part in (p.strip().lower() for p in spec.split(",")):
        if not part:
            continue
        if part == "all":
            out.extend(TYPES)
            continue
        name = _TYPE_ALIASES.get(part, part)
        if name not in TYPE_BY_NAME:
            names = ", ".join(t.name for t in TYPES)
            raise ValueError(f"unknown data type {part!r}; one of {names} or all")
        out.append(TYPE_BY_NAME[name])
    if not out:
        raise ValueError("no data type given")
    return list(dict.fromkeys(out))


def resolve_ops(spec: str) -> list[str]:
    """-o: sum, prod, max, min, avg, mulsum (premulsum), a comma-separated list, or all."""
    out: list[str] = []
    for part in (p.strip().lower() for p in spec.split(",")):
        if not part:
            continue
        if part == "all":
            out.extend(OPS)
            continue
        name = _OP_ALIASES.get(part, part)
        if name not in OPS:
            raise ValueError(f"unknown reduction op {part!r}; one of {', '.join(OPS)}, premulsum or all")
        out.append(name)
    if not out:
        raise ValueError("no reduction op given")
    return list(dict.fromkeys(out))


# --- option parsing ---------------------------------------------------------------------------------

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


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> Any:  # exit 2 with usage, as argparse does, but testable
        raise UsageError(message)


class UsageError(ValueError):
    """A command-line mistake."""


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
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
        min_bytes = parse_size(a.minbytes)
        max_bytes = parse_size(a.maxbytes)
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
    for ok, message in checks:
        if not ok:
            raise UsageError(message)
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


# --- sizes, counts and bandwidth -------------------------------------------------------------------------


@dataclass(frozen=True)
class Layout:
    """How one size of one collective maps to counts and buffers (nccl-tests' getCollByteCount)."""

    count: int  # the count argument of the call: the count column
    sendcount: int  # elements each rank sends
    recvcount: int  # elements each rank receives (and the check reads)
    send_inplace: int  # in place, sendbuff = recvbuff + send_inplace * rank elements
    recv_inplace: int  # in place, recvbuff = recvbuff + recv_inplace * rank elements
    elt: int  # bytes per element

    @property
    def sendbytes(self) -> int:
        return self.sendcount * self.elt

    @property
    def recvbytes(self) -> int:
        return self.recvcount * self.elt

    @property
    def size(self) -> int:
        """The size column: the larger of the send and receive sizes in bytes."""
        return max(self.sendbytes, self.recvbytes)


def layout(collective: str, nbytes: int, elt: int, nranks: int) -> Layout:
    count = nbytes // elt
    if collective not in SPLIT:
        return Layout(count, count, count, 0, 0, elt)
    # Per rank: size / elt / nranks, rounded down to a multiple of 16 bytes.
    base = (count // nranks) & ~(16 // elt - 1)
    if collective in ("all_gather", "gather"):
        return Layout(base, base, base * nranks, base, 0, elt)
    if collective in ("reduce_scatter", "scatter"):
        return Layout(base, base * nranks, base, 0, base, elt)
    return Layout(base, base * nranks, base * nranks, 0, 0, elt)  # alltoall


def bus_factor(collective: str, nranks: int, algo: str | None = None) -> float:
    """busbw / algbw, as nccl-tests computes it."""
    if collective == "all_reduce":
        if algo in ("NVLS", "NVLSTREE"):
            return (nranks - 1) / (nranks + 1)
        return 2 * (nranks - 1) / nranks
    if collective in SPLIT:
        return (nranks - 1) / nranks
    return 1.0  # broadcast, reduce, sendrecv


def bandwidth(
    collective: str, count: int, elt: int, seconds: float, nranks: int, algo: str | None = None
) -> tuple[float, float]:
    """(algbw, busbw) in GB/s for `count` (the count column) taking `seconds` per call."""
    nbytes = count * elt * (nranks if collective in SPLIT else 1)
    alg = nbytes / 1.0e9 / seconds if seconds > 0 else math.inf
    return alg, alg * bus_factor(collective, nranks, algo)


# --- output formatting (nccl-tests' widths and units) -------------------------------------------------


def float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: 2 decimals, fewer as the integer part grows, then exponent notation."""
    if not math.isfinite(value):
        return f"{value:{width}.2f}"
    power = 0
    v = 1
    while value >= v:
        power += 1
        v *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    if width >= 7:
        return f"{value:{width}.1e}"
    return f"{value:{width}.0e}"


def header_lines(report_cputime: bool = False) -> list[str]:
    """The three header lines of the results table."""
    t = "cputime" if report_cputime else "time"
    lead = f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}"
    names = f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
    units = f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}"
    per_place = f"  {t:>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}"
    per_place_units = f"  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}"
    return [
        lead + "           out-of-place                       in-place          ",
        names + per_place * 2 + " ",
        units + per_place_units * 2 + " ",
    ]


def format_preamble(size: int, count: int, type_name: str, op_name: str, root: int) -> str:
    return f"{size:12d}  {count:12d}  {type_name:>8}  {op_name:>6}  {root:6d}"


def format_result(time_us: float, algbw: float, busbw: float, wrong: int | None) -> str:
    """One placement's columns; wrong None prints N/A (not checked)."""
    cols = f"  {float_str(time_us, 7):>7}  {float_str(algbw, 6):>6}  {float_str(busbw, 6):>6}"
    return cols + ("    N/A" if wrong is None else f"  {float(wrong):6g}")


def footer_lines(errors: int, avg_busbw: float, min_bw: float | None, program: str) -> list[str]:
    bw_status = "" if min_bw is None else ("FAILED" if avg_busbw < 0.9 * min_bw else "OK")
    return [
        f"# {'Out of bounds values':<20} : {errors} {'FAILED' if errors else 'OK'}",
        f"# {'Avg bus bandwidth':<20} : {avg_busbw:g} {bw_status}",
        "#",
        f"# Collective test concluded: {program}",
        "#",
    ]


def program_name(collective: str) -> str:
    return f"{collective}_perf"


# --- data: codecs for the host ------------------------------------------------------------------------


def _fp8_values(exp_bits: int, man_bits: int, finite_nan: bool) -> np.ndarray:
    """float64 value of each of the 256 codes of an fp8 format (e4m3fn when finite_nan, else e5m2)."""
    code = np.arange(256)
    sign = np.where(code >> 7, -1.0, 1.0)
    e = (code >> man_bits) & ((1 << exp_bits) - 1)
    m = code & ((1 << man_bits) - 1)
    bias = (1 << (exp_bits - 1)) - 1
    frac = m / float(1 << man_bits)
    val = np.where(e == 0, frac * 2.0 ** (1 - bias), (1.0 + frac) * np.exp2(e - bias))
    top = (1 << exp_bits) - 1
    if finite_nan:  # e4m3fn: no infinities, S.1111.111 is NaN
        val = np.where((e == top) & (m == (1 << man_bits) - 1), np.nan, val)
    else:  # IEEE-like: all-ones exponent is inf (m == 0) or NaN
        val = np.where(e == top, np.where(m == 0, np.inf, np.nan), val)
    return sign * val


_FP8 = {"f8e4m3": _fp8_values(4, 3, True), "f8e5m2": _fp8_values(5, 2, False)}
_FP8_MAX_CODE = {"f8e4m3": 0x7E, "f8e5m2": 0x7B}  # the largest finite positive code


def decode(bits: np.ndarray, dt: DType) -> np.ndarray:
    """float64 values of float data held as bits (or as NumPy floats for half, float and double)."""
    with np.errstate(invalid="ignore"):  # signalling NaN bit patterns convert quietly
        if dt.name == "bfloat16":
            return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)
        if dt.name in _FP8:
            return _FP8[dt.name][bits.astype(np.intp)]
        return bits.astype(np.float64)


def _encode_fp8(x: np.ndarray, name: str) -> np.ndarray:
    table = _FP8[name]
    top = _FP8_MAX_CODE[name]
    positive = table[: top + 1]  # increasing with the code
    mag = np.abs(x)
    hi = np.clip(np.searchsorted(positive, mag), 0, top)
    lo = np.clip(hi - 1, 0, top)
    d_hi = np.abs(positive[hi] - mag)
    d_lo = np.abs(mag - positive[lo])
    even_lo = (lo & 1) == 0
    code = np.where((d_lo < d_hi) | ((d_lo == d_hi) & even_lo), lo, hi)  # nearest, ties to even
    code = np.where(mag >= positive[top], top, code)  # saturate, as the satfinite conversions do
    return (code | np.where(np.signbit(x), 0x80, 0)).astype(np.uint8)


def encode(values: np.ndarray, dt: DType) -> np.ndarray:
    """Bits of float64 values rounded to nearest (ties to even) in a float type."""
    values = np.asarray(values, dtype=np.float64)
    if dt.name == "bfloat16":
        u = values.astype(np.float32).view(np.uint32).astype(np.uint64)
        return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    if dt.name in _FP8:
        return _encode_fp8(values, dt.name)
    return values.astype(dt.storage)


# --- data: generation, references and comparison ------------------------------------------------------

_MASK64 = (1 << 64) - 1


def _mix_int(x: int) -> int:
    """splitmix64's finaliser on a Python int."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def _key(*parts: int) -> int:
    h = 0x243F6A8885A308D3
    for p in parts:
        h = _mix_int(h ^ (p & _MASK64))
    return h


def _hash(key: int, start: int, count: int) -> np.ndarray:
    """count pseudo-random uint64 for element indices start.. under key (a function of the index alone)."""
    x = np.arange(start, start + count, dtype=np.uint64) ^ np.uint64(key)
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def _int_range(h: np.ndarray, low: int, high: int) -> np.ndarray:
    """int64 values in [low, high] from hashes."""
    return (h % np.uint64(high - low + 1)).astype(np.int64) + low


def premul_scalar(rank: int) -> int:
    """Rank's PreMulSum scalar (1 or 2: exact in every type)."""
    return 1 + (rank & 1)


def _sum_bound(dt: DType, kind: str, nranks: int) -> int:
    """Largest |value| for float sum/mulsum data whose every partial sum is exact."""
    scale = 2 if kind == "mulsum" else 1
    return max(1, dt.exact // (nranks * scale))


def gen_input(dt: DType, kind: str, nranks: int, rank: int, seed: int, start: int, count: int) -> np.ndarray:
    """Elements start..start+count of rank's input (bits in dt.storage) for data kind `kind`.

    kind is "copy" for collectives that only move data, else the reduction op. Any rank can regenerate
    any rank's input, and a slice of a rank's input is the input of the slice's indices.
    """
    key = _key(seed, rank, dt.nccl, OPS.index(kind) + 1 if kind in OPS else 0)
    h = _hash(key, start, count)
    if not dt.is_float:
        if kind == "prod":
            return _small_product_factors(dt, nranks, rank, h).astype(dt.storage)
        if kind == "avg":
            # Non-negative values whose sum cannot overflow: the average is sum // nranks.
            top = min(dt.exact // nranks, 1 << 62)
            return _int_range(h, 0, max(top, 1)).astype(np.uint64).astype(dt.storage)
        # Integer sum, product, min and max wrap identically in any order: any bits will do.
        return (h >> np.uint64(64 - dt.bits)).astype(f"uint{dt.bits}").view(dt.storage)
    if kind == "prod":
        return encode(_small_product_factors(dt, nranks, rank, h).astype(np.float64), dt)
    if kind in ("sum", "mulsum"):
        bound = _sum_bound(dt, kind, nranks)
        values = _int_range(h, -bound, bound).astype(np.float64)
        scale = 2 if kind == "mulsum" else 1
        if nranks * scale > dt.exact:
            # Too many ranks for every one to contribute (fp8 at 5+ ranks): a window of ranks as wide as
            # the type allows contributes to each element, the others give 0.
            width = max(1, dt.exact // scale)
            first = _hash(_key(seed, dt.nccl, 0x5A), start, count) % np.uint64(nranks)
            values = np.where((rank - first.astype(np.int64)) % nranks < width, values, 0.0)
        return encode(values, dt)
    if kind == "avg":
        # As nccl-tests: at most two ranks contribute to each element (others give 0), so that the
        # pre-divided terms differ from the exact average by at most 2 units in the last place.
        pick = _hash(_key(seed, dt.nccl, 0xA5), start, count)
        first = (pick % np.uint64(nranks)).astype(np.int64)
        second = first
        if nranks > 1:
            second = (first + 1 + ((pick >> np.uint64(32)) % np.uint64(nranks - 1)).astype(np.int64)) % nranks
        values = _int_range(h, 0, max(1, dt.exact // 2)).astype(np.float64)
        values = np.where((first == rank) | (second == rank), values, 0.0)
        return encode(values, dt)
    # copy, min, max: any representable integer value.
    return encode(_int_range(h, -dt.exact, dt.exact).astype(np.float64), dt)


def _small_product_factors(dt: DType, nranks: int, rank: int, h: np.ndarray) -> np.ndarray:
    """Factors 1 or 2 (and -1/-2 for signed types) whose product over ranks is exact and in range."""
    twos = rank < min(nranks, dt.prod_twos)
    value = np.where(((h & np.uint64(1)) == 1) & twos, 2, 1).astype(np.int64)
    if dt.kind != "u":
        value = np.where((h & np.uint64(2)) == 2, -value, value)
    return value


def reduce_ranks(dt: DType, kind: str, inputs: Sequence[np.ndarray]) -> tuple[np.ndarray, int]:
    """(expected bits, tolerance in units in the last place) of reducing the ranks' inputs with `kind`."""
    nranks = len(inputs)
    if not dt.is_float:
        storage = np.dtype(dt.storage)
        acc = inputs[0].copy()
        with np.errstate(over="ignore"):
            for r, x in enumerate(inputs):
                if kind == "mulsum":
                    term = x * storage.type(premul_scalar(r))
                    acc = term if r == 0 else acc + term
                elif r == 0:
                    continue
                elif kind in ("sum", "avg"):
                    acc = acc + x
                elif kind == "prod":
                    acc = acc * x
                elif kind == "max":
                    acc = np.maximum(acc, x)
                elif kind == "min":
                    acc = np.minimum(acc, x)
                else:
                    raise ValueError(f"unknown reduction {kind!r}")
        if kind == "avg":
            acc = acc // storage.type(nranks)  # non-negative data: truncation is floor
        return acc.astype(storage), 0
    values = [decode(x, dt) for x in inputs]
    if kind == "sum":
        out = np.sum(values, axis=0)
    elif kind == "mulsum":
        out = np.sum([v * premul_scalar(r) for r, v in enumerate(values)], axis=0)
    elif kind == "prod":
        out = np.prod(values, axis=0)
    elif kind == "max":
        out = np.max(values, axis=0)
    elif kind == "min":
        out = np.min(values, axis=0)
    elif kind == "avg":
        out = np.sum(values, axis=0) / nranks
    else:
        raise ValueError(f"unknown reduction {kind!r}")
    tolerance = 2 if kind == "avg" else 0  # avg's terms are pre-divided in the type (as nccl-tests allows)
    return encode(out, dt), tolerance


def data_kind(collective: str, op: str | None) -> str:
    return op if collective in REDUCING and op is not None else "copy"


def input_for(
    collective: str, dt: DType, kind: str, nranks: int, rank: int, root: int, lay: Layout, seed: int
) -> np.ndarray | None:
    """This rank's input (sendcount elements), or None when it sends nothing (non-root broadcast/scatter)."""
    if collective in ("broadcast", "scatter") and rank != root:
        return None
    return gen_input(dt, kind, nranks, rank, seed, 0, lay.sendcount)


@functools.lru_cache(maxsize=2)
def _reduced(
    collective: str, dt: DType, kind: str, nranks: int, start: int, count: int, seed: int
) -> tuple[np.ndarray, int]:
    inputs = [gen_input(dt, kind, nranks, r, seed, start, count) for r in range(nranks)]
    return reduce_ranks(dt, kind, inputs)


def expected_output(
    collective: str,
    dt: DType,
    kind: str,
    nranks: int,
    rank: int,
    root: int,
    in_place: bool,
    lay: Layout,
    seed: int,
) -> tuple[np.ndarray | None, int]:
    """(the bits this rank's receive region must hold after the call, tolerance in ULP).

    The receive region is recvcount elements at recvbuff (+ recv_inplace * rank in place); before the
    call it holds zeros, except for this rank's input where that lies inside it (in place). None for
    placements that are not checked.
    """
    if in_place and collective in UNCHECKED_IN_PLACE:
        return None, 0

    def gen(r: int, start: int, count: int) -> np.ndarray:
        return gen_input(dt, kind, nranks, r, seed, start, count)

    c = lay.count
    if collective == "all_reduce":
        return _reduced(collective, dt, kind, nranks, 0, c, seed)
    if collective == "reduce_scatter":
        return _reduced(collective, dt, kind, nranks, rank * c, c, seed)
    if collective == "reduce":
        if rank == root:
            return _reduced(collective, dt, kind, nranks, 0, c, seed)
        # recvbuff is not used off the root: it keeps what it held.
        return (gen(rank, 0, c) if in_place else np.zeros(c, dt.storage)), 0
    if collective == "all_gather":
        return np.concatenate([gen(j, 0, c) for j in range(nranks)]), 0
    if collective == "broadcast":
        return gen(root, 0, c), 0
    if collective == "alltoall":
        return np.concatenate([gen(j, rank * c, c) for j in range(nranks)]), 0
    if collective == "gather":
        if rank == root:
            return np.concatenate([gen(j, 0, c) for j in range(nranks)]), 0
        out = np.zeros(c * nranks, dt.storage)
        if in_place:
            out[rank * c : (rank + 1) * c] = gen(rank, 0, c)
        return out, 0
    if collective == "scatter":
        return gen(root, rank * c, c), 0
    if collective == "sendrecv":
        return gen((rank - 1) % nranks, 0, c), 0
    raise ValueError(f"unknown collective {collective!r}")


def _ordered(bits: np.ndarray, dt: DType) -> np.ndarray:
    """Float bits as int64 that order like the values (sign-magnitude to two's complement; -0 == +0)."""
    w = dt.bits
    u = bits.view(f"uint{w}").astype(np.uint64)
    mag = (u & np.uint64((1 << (w - 1)) - 1)).astype(np.int64)
    return np.where((u >> np.uint64(w - 1)) == 1, -mag, mag)


def wrong_mask(got: np.ndarray, expected: np.ndarray, dt: DType, tolerance: int = 0) -> np.ndarray:
    """True where got differs from expected: bit-exact for integers; more than `tolerance` units in the
    last place for floats (+0 and -0 are equal, NaN is always wrong)."""
    if got.shape != expected.shape:
        raise ValueError(f"shape {got.shape} vs expected {expected.shape}")
    if not dt.is_float:
        unsigned = f"uint{dt.bits}"
        return np.asarray(got.view(unsigned) != expected.view(unsigned))
    g = _ordered(got, dt)
    e = _ordered(expected, dt)
    with np.errstate(over="ignore"):
        same_side = (g >= 0) == (e >= 0)
        near = np.abs(g - e).astype(np.uint64)  # exact where both lie on one side of zero
        far = np.abs(g).astype(np.uint64) + np.abs(e).astype(np.uint64)
    distance = np.where(same_side, near, far)
    return (distance > np.uint64(tolerance)) | np.isnan(decode(got, dt))


def count_wrong(got: np.ndarray, expected: np.ndarray, dt: DType, tolerance: int = 0) -> int:
    """How many elements of got wrong_mask finds wrong."""
    return int(np.count_nonzero(wrong_mask(got, expected, dt, tolerance)))


# --- bookkeeping between ranks ---------------------------------------------------------------------


class HostGroupError(RuntimeError):
    """A rank went away or did not answer in time."""


class HostGroup:
    """Barrier and all-gather of small JSON values among the ranks, over TCP with rank 0 as the hub.

    It never touches the library under test, so a library that fails or hangs cannot hang the
    bookkeeping, and every wait has a timeout. A rank that exits closes its socket, which the others
    see at once.
    """

    def __init__(self, rank: int, size: int, host: str, port: int, timeout: float) -> None:
        self.rank = rank
        self.size = size
        self.timeout = timeout
        self._peers: dict[int, socket.socket] = {}
        self._hub: socket.socket | None = None
        if size == 1:
            return
        deadline = time.monotonic() + timeout
        if rank == 0:
            server = socket.create_server((host, port), backlog=size)
            try:
                while len(self._peers) < size - 1:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        missing = sorted(set(range(1, size)) - set(self._peers))
                        raise HostGroupError(f"ranks {missing} did not connect within {timeout:g} s")
                    server.settimeout(left)
                    try:
                        conn, _ = server.accept()
                    except TimeoutError:
                        continue
                    self._setup(conn)
                    hello = self._recv(conn, "a connecting rank")
                    self._peers[int(hello["rank"])] = conn
            finally:
                server.close()
        else:
            while True:
                try:
                    conn = socket.create_connection(
                        (host, port), timeout=max(0.1, deadline - time.monotonic())
                    )
                    break
                except OSError as e:
                    if time.monotonic() > deadline:
                        raise HostGroupError(f"cannot reach rank 0 at {host}:{port}: {e}") from None
                    time.sleep(0.05)
            self._setup(conn)
            self._hub = conn
            self._send(conn, {"rank": rank})

    def _setup(self, conn: socket.socket) -> None:
        conn.settimeout(self.timeout)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    @staticmethod
    def _send(conn: socket.socket, value: Any) -> None:
        data = json.dumps(value).encode()
        conn.sendall(struct.pack("!Q", len(data)) + data)

    def _recv(self, conn: socket.socket, who: str) -> Any:
        head = self._recv_exact(conn, 8, who)
        (n,) = struct.unpack("!Q", head)
        return json.loads(self._recv_exact(conn, n, who))

    def _recv_exact(self, conn: socket.socket, n: int, who: str) -> bytes:
        chunks = []
        while n:
            try:
                chunk = conn.recv(min(n, 1 << 20))
            except TimeoutError:
                raise HostGroupError(f"no word from {who} within {self.timeout:g} s") from None
            except OSError as e:
                raise HostGroupError(f"lost {who}: {e}") from None
            if not chunk:
                raise HostGroupError(f"{who} closed its connection (it failed or exited)")
            chunks.append(chunk)
            n -= len(chunk)
        return b"".join(chunks)

    def allgather(self, value: Any) -> list[Any]:
        """Every rank's value, in rank order, on every rank."""
        if self.size == 1:
            return [value]
        try:
            if self.rank == 0:
                values = [value] + [self._recv(self._peers[r], f"rank {r}") for r in range(1, self.size)]
                for r in range(1, self.size):
                    self._send(self._peers[r], values)
                return values
            assert self._hub is not None
            self._send(self._hub, value)
            return list(self._recv(self._hub, "rank 0"))
        except OSError as e:
            raise HostGroupError(f"exchange between ranks failed: {e}") from None

    def barrier(self) -> None:
        self.allgather(None)

    def close(self) -> None:
        for conn in [*self._peers.values(), self._hub]:
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.close()
        self._peers.clear()
        self._hub = None


def combine_times(times: Sequence[float], average: int) -> float:
    """One time from every rank's, as -a says: 0 rank 0's, 1 the mean, 2 the minimum, 3 the maximum."""
    if average == 0:
        return float(times[0])
    if average == 1:
        return float(sum(times) / len(times))
    if average == 2:
        return float(min(times))
    return float(max(times))


# --- the per-rank worker (GPU) ---------------------------------------------------------------------------


class BenchError(RuntimeError):
    """A failure the worker reports and exits on."""


class Watchdog:
    """Kills this process when a phase outlives its deadline (a blocking library call cannot be timed
    out otherwise). Before exiting it aborts the communicator, so that this rank's kernels stop."""

    def __init__(self, rank: int) -> None:
        self._rank = rank
        self._lock = threading.Lock()
        self._deadline: float | None = None
        self._what = ""
        self.on_fire: Callable[[], None] | None = None
        threading.Thread(target=self._run, daemon=True, name="bench-watchdog").start()

    @contextlib.contextmanager
    def phase(self, seconds: float, what: str) -> Any:
        with self._lock:
            self._deadline, self._what = time.monotonic() + seconds, what
        try:
            yield
        finally:
            with self._lock:
                self._deadline = None

    def _run(self) -> None:
        while True:
            time.sleep(0.2)
            with self._lock:
                fired = self._deadline is not None and time.monotonic() > self._deadline
                what = self._what
            if fired:
                _say(f"rank {self._rank}: error: {what} did not finish in time; giving up")
                if self.on_fire is not None:
                    t = threading.Thread(target=self.on_fire, daemon=True)
                    t.start()
                    t.join(5.0)
                _exit(124)


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _exit(code: int) -> None:
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


_EXT_CDEF = """
int ncclGather(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root, void* comm,
               void* stream);
int ncclScatter(const void* sendbuff, void* recvbuff, size_t count, int datatype, int root, void* comm,
                void* stream);
"""


def _load_ext(path: str) -> Any:
    """ncclGather/ncclScatter (NCCL 2.28+), which the shared binding does not declare."""
    import cffi

    ext = cffi.FFI()
    ext.cdef(_EXT_CDEF)
    return ext, ext.dlopen(path)


def _symbol(lib: Any, name: str) -> Any:
    try:
        return getattr(lib, name)
    except AttributeError:
        return None


@dataclass(frozen=True)
class Issuer:
    """single(i): call i alone (warm-up, check); timed(i): timed iteration i, which is -m calls in one
    group when -m > 1 (calls i*m .. i*m+m-1). direct, where set, is the timed loop prepared: for each
    iteration, its library calls (function, arguments), to be made bare; check(rc) raises for a failed
    call's result."""

    single: Callable[[int], None]
    timed: Callable[[int], None]
    direct: list[list[tuple[Callable[..., int], tuple[Any, ...]]]] | None
    check: Callable[[int], None]


@dataclass
class DeviceBuffer:
    ptr: int
    size: int
    release: Callable[[], Any]
    owner: Any = None  # what keeps the memory alive (CuPy's allocations)


@dataclass(frozen=True)
class RankInfo:
    """Where a rank stands: its rank, the number of ranks and rank 0's bookkeeping address."""

    rank: int
    nranks: int
    host: str
    port: int

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> RankInfo:
        """From the launcher's variables (MSCCLPP_NCCL_RANK/WORLD_SIZE, MASTER_ADDR/PORT)."""
        env = dict(os.environ if env is None else env)
        try:
            return cls(
                int(env["MSCCLPP_NCCL_RANK"]),
                int(env["MSCCLPP_NCCL_WORLD_SIZE"]),
                env["MASTER_ADDR"],
                int(env["MASTER_PORT"]),
            )
        except KeyError as e:
            raise BenchError(
                f"no {e} in the environment: start through python -m mscclpp_nccl.bench"
            ) from None


class Worker:
    """One rank: its communicator, stream and buffers, and the benchmark loop.

    cupy and nccl (a binding.Nccl) are looked up when not given; tests pass stand-ins.
    """

    def __init__(self, opts: Options, where: RankInfo, cupy: Any = None, nccl: Any = None) -> None:
        from .binding import Nccl, ffi

        if cupy is None:
            import cupy
        cp = cupy
        self.cp = cp
        self.ffi = ffi
        self.opts = opts
        self.rank = where.rank
        self.nranks = where.nranks
        self.watchdog = Watchdog(self.rank)
        self.comm: Any = None
        self.watchdog.on_fire = self._abort
        self.group = HostGroup(self.rank, self.nranks, where.host, where.port, opts.timeout)
        if nccl is None:
            nccl = Nccl.load(opts.lib) if opts.lib else Nccl.load()
        self.nccl = nccl
        self.lib = nccl.lib
        self.version = nccl.version()
        # ncclGather/ncclScatter, which the shared binding does not declare (a stand-in may bring its own).
        self.ext_ffi, self.ext = getattr(nccl, "ext", None) or (None, None)
        if self.ext is None:
            with contextlib.suppress(OSError):
                self.ext_ffi, self.ext = _load_ext(nccl.path)
        ndev = cp.cuda.runtime.getDeviceCount()
        self.device = self.rank % ndev if ndev > 1 else 0
        cp.cuda.Device(self.device).use()
        # Every copy, fill, collective and capture of this rank is ordered on this one stream.
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.stream.use()
        self.stream_ptr = ffi.cast("void*", self.stream.ptr)
        self.results: list[dict[str, Any]] = []
        self.local_errors = 0  # (size, placement) results wrong on this rank
        self.bw_sum = 0.0
        self.bw_count = 0
        self.algo = os.environ.get("NCCL_ALGO")
        self.send: DeviceBuffer | None = None
        self.recv: DeviceBuffer | None = None

    # --- set-up and teardown ---------------------------------------------------------------------------
    def init_comm(self) -> None:
        from .binding import new_config, unique_id_to_hex

        uid = unique_id_to_hex(self.nccl.get_unique_id()) if self.rank == 0 else None
        uid = self.group.allgather(uid)[0]
        fields: dict[str, int] = {}
        if self.version >= 22800:
            fields["nvlinkCentricSched"] = 1  # as nccl-tests built against 2.28+ headers
        if self.version >= 23000 and self.opts.collective == "sendrecv":
            fields["maxP2pPeers"] = 2
        config = new_config(**fields) if fields else None
        with self.watchdog.phase(self.opts.timeout, "ncclCommInitRank"):
            self.comm = self.nccl.comm_init_rank(self.nranks, uid, self.rank, config)

    def alloc(self) -> None:
        size = max(self.opts.max_bytes, 64)
        self.send = self._alloc(size)
        self.recv = self._alloc(size)

    def _alloc(self, size: int) -> DeviceBuffer:
        if self.opts.alloc == "ncclmem":
            p = self.ffi.new("void**")
            rc = self.lib.ncclMemAlloc(p, size)
            if rc == 0:
                ptr = int(self.ffi.cast("uintptr_t", p[0]))
                return DeviceBuffer(ptr, size, lambda: self.lib.ncclMemFree(self.ffi.cast("void*", ptr)))
            raise BenchError(
                f"ncclMemAlloc({size}) failed: {self.nccl.last_error() or self.nccl.error_string(rc)}"
                " (--alloc cuda uses cudaMalloc instead)"
            )
        mem = self.cp.cuda.alloc(size)
        return DeviceBuffer(int(mem.ptr), size, lambda: None, owner=mem)

    def device_line(self) -> dict[str, Any]:
        props = self.cp.cuda.runtime.getDeviceProperties(self.device)
        name = props.get("name", b"?")
        name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
        if "major" in props:
            cc = int(props["major"]) * 10 + int(props.get("minor", 0))
        else:
            cc = int(self.cp.cuda.Device(self.device).compute_capability)
        pci = (int(props.get(k, 0)) for k in ("pciDomainID", "pciBusID", "pciDeviceID"))
        return {
            "rank": self.rank,
            "group": 0,
            "pid": os.getpid(),
            "hostname": socket.gethostname().split(".")[0],
            "device": self.device,
            "device_hex": "{:04x}:{:02x}:{:02x}".format(*pci),
            "device_info": name,
            "cc": cc,
            "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
        }

    def _abort(self) -> None:
        comm, self.comm = self.comm, None
        if comm is not None:
            with contextlib.suppress(Exception):
                self.lib.ncclCommAbort(comm)

    def teardown(self) -> None:
        with self.watchdog.phase(min(self.opts.timeout, 120.0), "ncclCommFinalize/ncclCommDestroy"):
            self.wait("the last work before teardown")
            comm, self.comm = self.comm, None
            if comm is not None:
                self.nccl.check(self.lib.ncclCommFinalize(comm), comm)
                self.nccl.check(self.lib.ncclCommDestroy(comm))
            for buf in (self.send, self.recv):  # after the communicator, as nccl-tests frees them
                if buf is not None:
                    buf.release()
            self.send = self.recv = None
        self.group.close()

    # --- stream helpers ---------------------------------------------------------------------------------
    def wait(self, what: str) -> None:
        """Synchronise the stream, polling (as nccl-tests), with the -T timeout and async-error checks."""
        start = time.monotonic()
        err = self.ffi.new("ncclResult_t*")
        poll_errors = self.comm is not None
        stream = self.stream
        while not stream.done:
            if poll_errors:
                if self.lib.ncclCommGetAsyncError(self.comm, err) != 0:
                    poll_errors = False  # the query itself is not supported: stop asking
                elif err[0] not in (0, 7):
                    code = int(err[0])
                    self._abort()
                    raise BenchError(f"{what}: asynchronous error {code}: {self.nccl.error_string(code)}")
            if time.monotonic() - start > self.opts.timeout:
                self._abort()
                raise BenchError(
                    f"{what}: not done after {self.opts.timeout:g} s (-T); aborted the communicator"
                )
            os.sched_yield()

    def memset(self, ptr: int, nbytes: int) -> None:
        if nbytes:
            self.cp.cuda.runtime.memsetAsync(ptr, 0, nbytes, self.stream.ptr)

    def write(self, ptr: int, host: np.ndarray) -> None:
        if host.nbytes:
            host = np.ascontiguousarray(host)
            kind = self.cp.cuda.runtime.memcpyDefault
            self.cp.cuda.runtime.memcpyAsync(ptr, host.ctypes.data, host.nbytes, kind, self.stream.ptr)
            self.wait("copying input to the GPU")  # the host array must outlive the copy

    def read(self, ptr: int, count: int, dt: DType) -> np.ndarray:
        out = np.empty(count, dtype=dt.storage)
        if out.nbytes:
            kind = self.cp.cuda.runtime.memcpyDefault
            self.cp.cuda.runtime.memcpyAsync(out.ctypes.data, ptr, out.nbytes, kind, self.stream.ptr)
            self.wait("copying the output to the host")
        return out

    def capture(self, issue: Callable[[], None], mode_name: str) -> Any:
        """A CUDA graph of what issue() enqueues on the stream."""
        rt = self.cp.cuda.runtime
        mode = getattr(rt, mode_name, 1 if mode_name == "streamCaptureModeThreadLocal" else 0)
        try:
            self.stream.begin_capture(mode=mode)
        except TypeError:  # an older CuPy without the argument
            self.stream.begin_capture()
        try:
            issue()
        except BaseException:
            with contextlib.suppress(Exception):
                self.stream.end_capture()
            raise
        return self.stream.end_capture()

    # --- calls -----------------------------------------------------------------------------------------
    def make_issuer(
        self, lay: Layout, dt: DType, op: str | None, root: int, in_place: bool, calls: int
    ) -> Issuer:
        """Enqueues the collective of call i, with the buffers shifted per call as nccl-tests does (so that
        successive calls touch different memory). Raises NcclError when a call fails."""
        assert self.send is not None and self.recv is not None
        ffi, lib, nccl, comm = self.ffi, self.lib, self.nccl, self.comm
        elt = dt.size
        total = lay.size
        steps = max(1, self.opts.max_bytes // total) if total else 1
        pointers = []
        for k in range(min(steps, max(calls, 1))):
            shift = total * k
            send, recv = self.send.ptr + shift, self.recv.ptr + shift
            if in_place:
                send = recv + lay.send_inplace * elt * self.rank
                recv = recv + lay.recv_inplace * elt * self.rank
            pointers.append((send, recv))
        npointers = len(pointers)

        def check(rc: int) -> None:
            if rc != 0:
                nccl.check(rc, comm)

        mulsum = op == "mulsum" and self.opts.collective in REDUCING
        scalar = ffi.new("uint64_t*", _scalar_bits(dt, premul_scalar(self.rank))) if mulsum else None
        op_code = OP_CODES.get(op or "sum", 0)
        sequences = [self._sequence(lay.count, dt, op_code, root, s, r) for s, r in pointers]
        agg = self.opts.agg_iters
        blocking = self.opts.blocking

        def run(seq: Sequence[tuple[Callable[..., int], tuple[Any, ...]]]) -> None:
            for fn, args in seq:
                check(fn(*args))

        def one(i: int) -> None:
            k = i % steps % npointers
            if not mulsum:
                run(sequences[k])
                return
            handle = ffi.new("ncclRedOp_t*")
            check(lib.ncclRedOpCreatePreMulSum(handle, scalar, dt.nccl, 1, comm))
            try:
                run(self._sequence(lay.count, dt, int(handle[0]), root, *pointers[k]))
            finally:
                lib.ncclRedOpDestroy(handle[0], comm)  # right after the call, as nccl-tests does

        def after() -> None:
            if blocking:
                self.wait("a blocking call (-z)")
                if blocking == 1:
                    self.group.barrier()

        def single(i: int) -> None:
            one(i)
            after()

        def timed(i: int) -> None:
            if agg > 1:
                check(lib.ncclGroupStart())
                try:
                    for a in range(agg):
                        one(i * agg + a)
                finally:
                    check(lib.ncclGroupEnd())
            else:
                one(i)
            after()

        direct = None
        if not mulsum and agg == 1 and not blocking:
            # The timed loop is host wall time, so keep Python out of it: prepared calls, called bare.
            direct = [sequences[i % steps % npointers] for i in range(self.opts.iters)]
        return Issuer(single, timed, direct, check)

    def _sequence(
        self, count: int, dt: DType, op: int, root: int, send: int, recv: int
    ) -> list[tuple[Callable[..., int], tuple[Any, ...]]]:
        """The library calls (function, arguments) of one collective from send to recv."""
        ffi, lib, comm, st = self.ffi, self.lib, self.comm, self.stream_ptr
        coll, code, rank, nranks = self.opts.collective, dt.nccl, self.rank, self.nranks
        s, r = ffi.cast("void*", send), ffi.cast("void*", recv)
        if coll == "all_reduce":
            return [(lib.ncclAllReduce, (s, r, count, code, op, comm, st))]
        if coll == "all_gather":
            return [(lib.ncclAllGather, (s, r, count, code, comm, st))]
        if coll == "reduce_scatter":
            return [(lib.ncclReduceScatter, (s, r, count, code, op, comm, st))]
        if coll == "broadcast":
            return [(lib.ncclBroadcast, (s, r, count, code, root, comm, st))]
        if coll == "reduce":
            return [(lib.ncclReduce, (s, r, count, code, op, root, comm, st))]
        chunk = count * dt.size
        group: list[tuple[Callable[..., int], tuple[Any, ...]]] = []
        if coll == "sendrecv":
            group += [(lib.ncclSend, (s, count, code, (rank + 1) % nranks, comm, st))]
            group += [(lib.ncclRecv, (r, count, code, (rank - 1) % nranks, comm, st))]
        elif coll == "alltoall":
            native = _symbol(lib, "ncclAlltoAll") if self.version >= 22800 else None
            if native is not None:
                return [(native, (s, r, count, code, comm, st))]
            for peer in range(nranks):  # before 2.28, as nccl-tests: a send and a receive per peer
                group += [
                    (lib.ncclSend, (ffi.cast("void*", send + peer * chunk), count, code, peer, comm, st))
                ]
                group += [
                    (lib.ncclRecv, (ffi.cast("void*", recv + peer * chunk), count, code, peer, comm, st))
                ]
        elif coll in ("gather", "scatter"):
            if count == 0:
                return []  # nccl-tests skips empty gathers and scatters
            name = "ncclGather" if coll == "gather" else "ncclScatter"
            native = _symbol(self.ext, name) if self.ext is not None and self.version >= 22800 else None
            if native is not None:
                x = self.ext_ffi
                xcomm = x.cast("void*", int(ffi.cast("uintptr_t", comm)))
                args = (x.cast("void*", send), x.cast("void*", recv), count, code, root, xcomm)
                return [(native, (*args, x.cast("void*", self.stream.ptr)))]
            if coll == "gather":  # before 2.28, as nccl-tests: everyone sends to the root
                group += [(lib.ncclSend, (s, count, code, root, comm, st))]
                if rank == root:
                    for peer in range(nranks):
                        p = ffi.cast("void*", recv + peer * chunk)
                        group += [(lib.ncclRecv, (p, count, code, peer, comm, st))]
            else:
                if rank == root:
                    for peer in range(nranks):
                        p = ffi.cast("void*", send + peer * chunk)
                        group += [(lib.ncclSend, (p, count, code, peer, comm, st))]
                group += [(lib.ncclRecv, (r, count, code, root, comm, st))]
        else:
            raise BenchError(f"unknown collective {coll}")
        return [(lib.ncclGroupStart, ()), *group, (lib.ncclGroupEnd, ())]

    # --- data ------------------------------------------------------------------------------------------
    def init_data(self, lay: Layout, dt: DType, kind: str, root: int, in_place: bool, seed: int) -> None:
        """Zero the receive side, then write this rank's input where the call reads it (iteration 0)."""
        assert self.send is not None and self.recv is not None
        self.memset(self.recv.ptr, lay.size)
        data = input_for(self.opts.collective, dt, kind, self.nranks, self.rank, root, lay, seed)
        if data is not None:
            dst = self.recv.ptr + lay.send_inplace * dt.size * self.rank if in_place else self.send.ptr
            self.write(dst, data)
        self.wait("initialising the buffers")

    # --- the benchmark ----------------------------------------------------------------------------------
    def bench_time(
        self, lay: Layout, dt: DType, op: str | None, root: int, in_place: bool, size_index: int
    ) -> dict[str, Any]:
        """Time and check one size in one placement; every rank returns the same numbers."""
        from .binding import NcclError

        place = "in-place" if in_place else "out-of-place"
        what = f"{self.opts.collective} {lay.size} B {dt.name} {op or 'none'} root {root} {place}"
        try:
            return self._bench_time(lay, dt, op, root, in_place, size_index, what)
        except NcclError as e:
            raise BenchError(f"{what}: {e}") from None

    def _bench_time(
        self, lay: Layout, dt: DType, op: str | None, root: int, in_place: bool, size_index: int, what: str
    ) -> dict[str, Any]:
        o = self.opts
        coll = o.collective
        kind = data_kind(coll, op)
        calls = o.iters * o.agg_iters
        issue = self.make_issuer(lay, dt, op, root, in_place, max(calls, o.warmup_iters, 1))

        with self.watchdog.phase(o.timeout, f"{what}: warm-up"):
            if o.check:
                self.init_data(lay, dt, kind, root, in_place, _key(99, size_index))
            for i in range(max(o.warmup_iters, 1)):
                issue.single(i)
            self.wait(f"{what}: warm-up")
        self.group.barrier()

        # Enqueueing blocks once the launch queue is full, so the timed phase may take as long as the GPU
        # work: allow -T per thousand calls.
        launches = calls * max(o.graph_launches, 1)
        with self.watchdog.phase(o.timeout * (1 + launches // 1000), f"{what}: timing"):
            graph = None
            if o.graph_launches:
                graph = self.capture(
                    lambda: [issue.timed(i) for i in range(o.iters)], "streamCaptureModeThreadLocal"
                )
                self.group.barrier()
                t0 = time.perf_counter()
                for _ in range(o.graph_launches):
                    graph.launch(self.stream)
            elif issue.direct is not None:
                prepared, fail = issue.direct, issue.check
                t0 = time.perf_counter()
                for seq in prepared:
                    for fn, args in seq:
                        rc = fn(*args)
                        if rc:
                            fail(rc)
            else:
                t0 = time.perf_counter()
                for i in range(o.iters):
                    issue.timed(i)
            cpu = (time.perf_counter() - t0) / calls
            self.wait(f"{what}: timed iterations")
            elapsed = (time.perf_counter() - t0) / calls
            if o.graph_launches:
                elapsed /= o.graph_launches
            del graph
        times = self.group.allgather([elapsed, cpu])
        seconds = combine_times([t[1] if o.report_cputime else t[0] for t in times], o.average)

        report = bool(o.check) and not (in_place and coll in UNCHECKED_IN_PLACE)
        wrong_total: int | None = None
        if report:
            wrong_total = 0
            for c in range(o.check):
                seed = _key(1000 + c, size_index, root)
                with self.watchdog.phase(o.timeout, f"{what}: check"):
                    self.init_data(lay, dt, kind, root, in_place, seed)
                    if o.graph_launches:
                        g = self.capture(lambda: issue.single(0), "streamCaptureModeGlobal")
                        g.launch(self.stream)
                        self.wait(f"{what}: checked call")
                        del g
                    else:
                        issue.single(0)
                        self.wait(f"{what}: checked call")
                    assert self.recv is not None
                    region = self.recv.ptr + (lay.recv_inplace * dt.size * self.rank if in_place else 0)
                    got = self.read(region, lay.recvcount, dt)
                expected, tolerance = expected_output(
                    coll, dt, kind, self.nranks, self.rank, root, in_place, lay, seed
                )
                wrong = 0
                if expected is not None:
                    mask = wrong_mask(got, expected, dt, tolerance)
                    wrong = int(np.count_nonzero(mask))
                    if wrong:
                        self.local_errors += 1
                        i = int(np.argmax(mask))
                        _say(
                            f"rank {self.rank}: {what}: {wrong} of {got.size} elements wrong; first at {i}:"
                            f" got {_show(got[i], dt)}, expected {_show(expected[i], dt)}"
                        )
                wrong_total = int(sum(self.group.allgather(wrong)))
                if wrong_total:
                    break
        algbw, busbw = bandwidth(coll, lay.count, dt.size, seconds, self.nranks, self.algo)
        self.bw_sum += busbw
        self.bw_count += 1
        return {"time": seconds * 1e6, "alg_bw": algbw, "bus_bw": busbw, "nwrong": wrong_total}

    def time_test(self, dt: DType, op: str | None, root: int, sizes: list[int]) -> None:
        coll = self.opts.collective
        op_name = op if op is not None else "none"
        for index, nbytes in enumerate(sizes):
            lay = layout(coll, nbytes, dt.size, self.nranks)
            out = self.bench_time(lay, dt, op, root, False, index)
            inp = self.bench_time(lay, dt, op, root, True, index)
            row = {
                "size": lay.size,
                "count": lay.count,
                "type": dt.name,
                "redop": op_name,
                "root": root,
                "out_of_place": out,
                "in_place": inp,
            }
            self.results.append(row)
            if self.rank == 0:
                line = format_preamble(lay.size, lay.count, dt.name, op_name, root)
                for res in (out, inp):
                    line += format_result(res["time"], res["alg_bw"], res["bus_bw"], res["nwrong"])
                print(line, flush=True)


def _scalar_bits(dt: DType, value: int) -> int:
    """The bits of `value` in type dt, as an integer (the PreMulSum host scalar)."""
    if dt.is_float:
        bits = encode(np.array([float(value)]), dt)
    else:
        bits = np.array([value]).astype(dt.storage)
    return int(bits.view(f"uint{dt.bits}")[0])


def _show(bits: Any, dt: DType) -> str:
    one = np.asarray(bits).reshape(1)
    return repr(float(decode(one, dt)[0])) if dt.is_float else repr(int(one[0]))


def _run_types(opts: Options, version: int, cc: int) -> list[DType]:
    """-d all keeps the types this library and GPU support, as nccl-tests does (fp8 needs sm_90)."""
    if opts.type_spec.strip().lower() != "all":
        return opts.types
    return [t for t in opts.types if version >= t.min_version and not (t.name.startswith("f8") and cc < 90)]


def _run_ops(opts: Options, version: int) -> list[str | None]:
    if opts.collective not in OP_COLUMN:
        return [None]
    if opts.op_spec.strip().lower() != "all":
        return list(opts.ops)
    return [op for op in opts.ops if version >= _OP_MIN_VERSION.get(op, 0)]


def _env_summary() -> dict[str, str]:
    keep = ("NCCL_", "MSCCLPP_", "CUDA_VISIBLE_DEVICES", "CUDA_MPS_", "NVIDIA_")
    return {
        k: v for k, v in sorted(os.environ.items()) if k.startswith(keep) and k != "MSCCLPP_NCCL_UNIQUE_ID"
    }


def worker_main(
    opts: Options, argv: Sequence[str], where: RankInfo | None = None, cupy: Any = None, nccl: Any = None
) -> int:
    """One rank. Exit codes: 0 all good, 1 wrong results or bandwidth under NCCL_TESTS_MIN_BW, 3 an error."""
    start_time = time.strftime("%Y-%m-%d %H:%M:%S")
    w: Worker | None = None
    rank = where.rank if where is not None else int(os.environ.get("MSCCLPP_NCCL_RANK", "0"))
    doc: dict[str, Any] = {}
    try:
        w = Worker(opts, where or RankInfo.from_env(), cupy, nccl)
        rank = w.rank
        w.init_comm()
        devices = w.group.allgather(w.device_line())
        min_cc = min(d["cc"] for d in devices)
        types = _run_types(opts, w.version, min_cc)
        ops = _run_ops(opts, w.version)
        roots = [-1]
        if opts.collective in ROOTED:
            if opts.root >= w.nranks:
                raise BenchError(f"root {opts.root} is not a rank of {w.nranks}")
            roots = list(range(w.nranks)) if opts.root == -1 else [opts.root]
        for op in ops:
            if op == "mulsum" and opts.collective in REDUCING and w.version < 21100:
                raise BenchError("mulsum needs NCCL 2.11 or later")
        sizes = opts.sizes()
        program = program_name(opts.collective)
        doc = {
            "version": 2,
            "benchmark": "mscclpp_nccl.bench",
            "collective": opts.collective,
            "start_time": start_time,
            "args": list(argv),
            "nccl_version": w.version,
            "library": w.nccl.path,
            "config": _config_doc(opts, w.nranks),
            "environment": {
                "hostname": socket.gethostname(),
                "python": sys.version.split()[0],
                "numpy": np.__version__,
                "cupy": getattr(w.cp, "__version__", "?"),
                "ranks": w.nranks,
                "mps": bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),
                "env": _env_summary(),
            },
            "devices": devices,
            "results": w.results,
        }
        if rank == 0:
            _print_header(opts, w, devices, program)
        w.alloc()
        for dt in types:
            for op in ops:
                for root in roots:
                    w.time_test(dt, op, root, sizes)
        errors = int(sum(w.group.allgather(w.local_errors)))
        avg_bw = w.bw_sum / w.bw_count if w.bw_count else 0.0
        min_bw_env = os.environ.get("NCCL_TESTS_MIN_BW")
        min_bw = float(min_bw_env) if min_bw_env else None
        w.teardown()
        if rank == 0:
            print("\n".join(footer_lines(errors, avg_bw, min_bw, program)), flush=True)
            print("", flush=True)
            doc["out_of_bounds"] = {"count": errors, "okay": errors == 0}
            doc["average_bus_bandwidth"] = {
                "bandwidth": avg_bw,
                "okay": "unchecked" if min_bw is None else avg_bw >= 0.9 * min_bw,
            }
            doc["errors"] = []
            _write_json(opts.json_path, doc)
        bad_bw = min_bw is not None and avg_bw < 0.9 * min_bw
        return 1 if errors or bad_bw else 0
    except Exception as e:  # every failure: say what, abort the communicator, exit non-zero
        message = f"{type(e).__name__}: {e}" if not isinstance(e, BenchError) else str(e)
        _say(f"rank {rank}: error: {message}")
        if rank == 0:
            print(f"# error: {message}", flush=True)
            if doc:
                doc["errors"] = [message]
                with contextlib.suppress(Exception):
                    _write_json(opts.json_path, doc)
        if w is not None:
            w._abort()
            w.group.close()
        return 3


def _config_doc(opts: Options, nranks: int) -> dict[str, Any]:
    return {
        "nranks": nranks,
        "minimum_bytes": opts.min_bytes,
        "maximum_bytes": opts.max_bytes,
        **({"step_factor": opts.step_factor} if opts.step_factor > 1 else {"step_bytes": opts.step_bytes}),
        "warmup_iters": opts.warmup_iters,
        "iterations": opts.iters,
        "aggregated_iterations": opts.agg_iters,
        "validation": opts.check,
        "graph": opts.graph_launches,
        "blocking_collectives": opts.blocking,
        "average": opts.average,
        "datatype": opts.type_spec,
        "op": opts.op_spec,
        "root": opts.root,
        "alloc": opts.alloc,
        "report_cputime": opts.report_cputime,
    }


def _print_header(opts: Options, w: Worker, devices: list[dict[str, Any]], program: str) -> None:
    from .binding import version_tuple

    major, minor, patch = version_tuple(w.version)
    step = (opts.step_factor, "factor") if opts.step_factor > 1 else (opts.step_bytes, "bytes")
    lines = [
        f"# mscclpp_nccl.bench (nccl-tests format) nccl-library={w.version}"
        f" ({major}.{minor}.{patch}) {w.nccl.path}",
        f"# Collective test starting: {program}",
        f"# nThread 1 nGpus 1 minBytes {opts.min_bytes} maxBytes {opts.max_bytes} step: {step[0]}({step[1]})"
        f" warmup iters: {opts.warmup_iters} iters: {opts.iters} agg iters: {opts.agg_iters}"
        f" validation: {opts.check} graph: {opts.graph_launches} unalign: 0",
    ]
    if opts.blocking == 1:
        lines.append("# Blocking Enabled: wait for completion and barrier after each collective ")
    elif opts.blocking == 2:
        lines.append("# Blocking Enabled: wait for completion after each collective (no barrier) ")
    mps = "under MPS" if os.environ.get("CUDA_MPS_PIPE_DIRECTORY") else "no MPS"
    how = {
        0: "rank 0's",
        1: "the mean over ranks of",
        2: "the minimum over ranks of",
        3: "the maximum over ranks of",
    }
    lines += [
        f"# {w.nranks} ranks, one process each, {mps}; buffers from"
        f" {'ncclMemAlloc' if opts.alloc == 'ncclmem' else 'cudaMalloc'};"
        f" time: {how[opts.average]} host wall time per call",
        "#",
        "# Using devices",
    ]
    for d in devices:
        lines.append(
            f"#  Rank {d['rank']:2d} Group {d['group']:2d} Pid {d['pid']:6d} on {d['hostname']:>10}"
            f" device {d['device']:2d} [{d['device_hex']}] {d['device_info']}"
        )
    lines.append("#")
    lines += header_lines(opts.report_cputime)
    print("\n".join(lines), flush=True)


def _write_json(path: str | None, doc: dict[str, Any]) -> None:
    if not path:
        return
    doc = dict(doc)
    doc["end_time"] = time.strftime("%Y-%m-%d %H:%M:%S")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)
    print(f"# Wrote JSON results to {path}", flush=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


# --- the command -----------------------------------------------------------------------------------------


def default_ranks(ngpus: int) -> int:
    """The number of GPUs, or 4 ranks sharing the GPU when there is only one."""
    return ngpus if ngpus > 1 else 4


def launch_plan(
    opts: Options, ngpus: int, env: dict[str, str]
) -> tuple[int, bool, dict[str, str], list[str]]:
    """(ranks, use MPS, environment additions, notes) for a run on ngpus GPUs."""
    nranks = opts.ranks if opts.ranks is not None else default_ranks(ngpus)
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


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        opts = parse_args(argv)
    except UsageError as e:
        build_parser().print_usage(sys.stderr)
        print(f"python -m mscclpp_nccl.bench: error: {e}", file=sys.stderr)
        return 2
    if opts.worker:
        code = worker_main(opts, argv)
        _exit(code)  # skip interpreter teardown: nothing may hang after the last line
        return code

    import importlib.util

    from .run import launch, visible_gpus

    gpus = visible_gpus()
    if not gpus:
        print("python -m mscclpp_nccl.bench: no NVIDIA GPU visible; nothing to benchmark", file=sys.stderr)
        return 2
    if importlib.util.find_spec("cupy") is None:
        print(
            "python -m mscclpp_nccl.bench: CuPy is not installed (pip install cupy-cuda13x)", file=sys.stderr
        )
        return 2
    if opts.lib and not os.path.isfile(opts.lib):
        print(f"python -m mscclpp_nccl.bench: --lib {opts.lib}: no such file", file=sys.stderr)
        return 2
    nranks, mps, extra, notes = launch_plan(opts, len(gpus), dict(os.environ))
    if opts.root >= nranks and opts.collective in ROOTED:
        print(f"python -m mscclpp_nccl.bench: root {opts.root} is not a rank of {nranks}", file=sys.stderr)
        return 2
    for note in notes:
        print(f"# note: {note}", file=sys.stderr, flush=True)
    cmd = [sys.executable, "-m", "mscclpp_nccl.bench", *argv, "--worker"]
    if opts.lib:
        cmd += ["--lib", os.path.abspath(opts.lib)]
    env = {**os.environ, **extra}
    try:
        return launch(nranks, cmd, mps=mps, timeout=opts.run_timeout, prefix=False, unique_id=False, env=env)
    except KeyboardInterrupt:
        return 130
    except (RuntimeError, ValueError) as e:
        print(f"python -m mscclpp_nccl.bench: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
