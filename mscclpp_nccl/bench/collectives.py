"""What the benchmark knows of collectives, data types and reduction ops: names, counts per size and
bandwidth factors (nccl-tests' conventions)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

_T = TypeVar("_T")

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
OP_MIN_VERSION = {"avg": 21000, "mulsum": 21100}
_OP_ALIASES = {"premulsum": "mulsum", "premul": "mulsum"}


def _resolve(spec: str, choices: dict[str, _T], aliases: dict[str, str], what: str, hint: str) -> list[_T]:
    """Items of a comma-separated list of names (or aliases, or all), in order, without duplicates."""
    out: list[_T] = []
    for part in (p.strip().lower() for p in spec.split(",")):
        if not part:
            continue
        if part == "all":
            out.extend(choices.values())
            continue
        name = aliases.get(part, part)
        if name not in choices:
            raise ValueError(f"unknown {what} {part!r}; one of {hint}")
        out.append(choices[name])
    if not out:
        raise ValueError(f"no {what} given")
    return list(dict.fromkeys(out))


def resolve_types(spec: str) -> list[DType]:
    """-d: one type name (nccl-tests' or an alias), a comma-separated list, or all."""
    names = ", ".join(t.name for t in TYPES)
    return _resolve(spec, TYPE_BY_NAME, _TYPE_ALIASES, "data type", f"{names} or all")


def resolve_ops(spec: str) -> list[str]:
    """-o: sum, prod, max, min, avg, mulsum (premulsum), a comma-separated list, or all."""
    hint = f"{', '.join(OPS)}, premulsum or all"
    return _resolve(spec, {op: op for op in OPS}, _OP_ALIASES, "reduction op", hint)


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


def combine_times(times: Sequence[float], average: int) -> float:
    """One time from every rank's, as -a says: 0 rank 0's, 1 the mean, 2 the minimum, 3 the maximum."""
    if average == 0:
        return float(times[0])
    if average == 1:
        return float(sum(times) / len(times))
    if average == 2:
        return float(min(times))
    return float(max(times))


# A rough model of a call's time, for estimates of how long a run takes (never for results).
EST_CALL_LATENCY_S = 15e-6
EST_CALL_BYTES_PER_S = 40e9


def rough_call_seconds(nbytes: int) -> float:
    """A rough guess of one call's seconds on nbytes (latency plus bytes over a typical bandwidth)."""
    return EST_CALL_LATENCY_S + nbytes / EST_CALL_BYTES_PER_S
