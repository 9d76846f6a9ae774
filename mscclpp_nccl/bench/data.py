"""The benchmark's data on the host: codecs for every NCCL type, inputs that any rank can regenerate,
NumPy references of each collective's output, and the comparison that counts wrong elements."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np

from .collectives import OPS, REDUCING, UNCHECKED_IN_PLACE, DType, Layout

# Host codecs of the types NumPy lacks (bfloat16, fp8): ml_dtypes, which rounds to nearest, ties to even.
_ML_DTYPES = {
    "bfloat16": ml_dtypes.bfloat16,
    "f8e4m3": ml_dtypes.float8_e4m3fn,
    "f8e5m2": ml_dtypes.float8_e5m2,
}
# fp8 conversions on the GPU saturate (satfinite): values beyond the largest finite one become it.
_FP8_MAX = {name: float(ml_dtypes.finfo(_ML_DTYPES[name]).max) for name in ("f8e4m3", "f8e5m2")}


def decode(bits: np.ndarray, dt: DType) -> np.ndarray:
    """float64 values of float data held as bits (or as NumPy floats for half, float and double)."""
    with np.errstate(invalid="ignore"):  # signalling NaN bit patterns convert quietly
        if dt.name in _ML_DTYPES:
            return bits.astype(dt.storage).view(_ML_DTYPES[dt.name]).astype(np.float64)
        return bits.astype(np.float64)


def encode(values: np.ndarray, dt: DType) -> np.ndarray:
    """Bits of float64 values rounded to nearest (ties to even) in a float type."""
    values = np.asarray(values, dtype=np.float64)
    if dt.name == "bfloat16":
        # Through float32, as the kernels' inputs are made: float64 -> float32 -> bfloat16.
        return values.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    if dt.name in _FP8_MAX:
        top = _FP8_MAX[dt.name]
        return np.clip(values, -top, top).astype(_ML_DTYPES[dt.name]).view(np.uint8)
    return values.astype(dt.storage)


def scalar_bits(dt: DType, value: int) -> int:
    """The bits of `value` in type dt, as an integer (the PreMulSum host scalar)."""
    if dt.is_float:
        bits = encode(np.array([float(value)]), dt)
    else:
        bits = np.array([value]).astype(dt.storage)
    return int(bits.view(f"uint{dt.bits}")[0])


def show_value(bits: Any, dt: DType) -> str:
    """One element's value for a message: the number a float's bits stand for, else the integer."""
    one = np.asarray(bits).reshape(1)
    return repr(float(decode(one, dt)[0])) if dt.is_float else repr(int(one[0]))


# --- data: generation, references and comparison ------------------------------------------------------

_MASK64 = (1 << 64) - 1


def _mix_int(x: int) -> int:
    """splitmix64's finaliser on a Python int."""
    x = (x + 0x9E3779B97F4A7C15) & _MASK64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
    return x ^ (x >> 31)


def seed_key(*parts: int) -> int:
    """A 64-bit key mixed from integers (a seed for the data of one size, check or rank)."""
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
    key = seed_key(seed, rank, dt.nccl, OPS.index(kind) + 1 if kind in OPS else 0)
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
            first = _hash(seed_key(seed, dt.nccl, 0x5A), start, count) % np.uint64(nranks)
            values = np.where((rank - first.astype(np.int64)) % nranks < width, values, 0.0)
        return encode(values, dt)
    if kind == "avg":
        # As nccl-tests: at most two ranks contribute to each element (others give 0), so that the
        # pre-divided terms differ from the exact average by at most 2 units in the last place.
        pick = _hash(seed_key(seed, dt.nccl, 0xA5), start, count)
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
