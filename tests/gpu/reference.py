"""Host-side references for the GPU workers: inputs every rank can regenerate, NumPy reductions."""

from __future__ import annotations

import numpy as np

try:  # bfloat16 and fp8 on the host
    import ml_dtypes
except ImportError:  # pragma: no cover - only the GPU machine runs these workers
    ml_dtypes = None

TYPES = [
    "int8",
    "uint8",
    "int32",
    "uint32",
    "int64",
    "uint64",
    "float16",
    "float32",
    "float64",
    "bfloat16",
    "float8_e4m3",
    "float8_e5m2",
]
OPS = ["sum", "prod", "max", "min", "avg", "premulsum_host", "premulsum_device"]


def host_dtype(name: str) -> np.dtype:
    """The NumPy dtype holding values of NCCL type `name` on the host."""
    special = {"bfloat16": "bfloat16", "float8_e4m3": "float8_e4m3fn", "float8_e5m2": "float8_e5m2"}
    if name in special:
        return np.dtype(getattr(ml_dtypes, special[name]))
    return np.dtype(name)


def storage_dtype(name: str) -> np.dtype:
    """The dtype of the CuPy array that carries the bits (CuPy has no bfloat16 or fp8)."""
    size = host_dtype(name).itemsize
    if name in ("bfloat16", "float8_e4m3", "float8_e5m2"):
        return np.dtype(f"uint{8 * size}")
    return np.dtype(name)


def is_float(name: str) -> bool:
    return name.startswith("float") or name == "bfloat16"


def epsilon(name: str) -> float:
    """Unit roundoff of a float type (the spacing of values just above 1)."""
    low_precision = {"float16": 2**-10, "bfloat16": 2**-7, "float8_e4m3": 2**-3, "float8_e5m2": 2**-2}
    if name in low_precision:
        return low_precision[name]
    return float(np.finfo(np.dtype(name)).eps)


def exact_fp8_input(rng: np.random.Generator, op: str, count: int, rank: int) -> np.ndarray:
    """fp8 inputs whose sums (or products) are exact in both formats whatever the order: a rank owns the
    elements i with i % 7 in {rank % 7, (rank + 3) % 7}, at most 4 owners an element at up to 10 ranks.
    For sums the owners give +-1 or +-2 and the others 0 (every partial sum an integer of magnitude 8 or
    less); for products the owners give +-2 or +-0.5 and the others +-1 (every partial product +-2^k,
    |k| <= 4). The result is then checked exactly: a rank left out changes the elements it owns."""
    residue = np.arange(count) % 7
    mine = (residue == rank % 7) | (residue == (rank + 3) % 7)
    sign = rng.choice(np.array([-1.0, 1.0]), count)
    if op == "prod":
        return sign * np.where(mine, rng.choice(np.array([0.5, 2.0]), count), 1.0)
    return np.where(mine, sign * rng.choice(np.array([1.0, 2.0]), count), 0.0)


def make_input(name: str, op: str, count: int, rank: int, seed: int) -> np.ndarray:
    """Rank `rank`'s input, in the host dtype. Values keep products and sums in range."""
    rng = np.random.default_rng([seed, rank, count, TYPES.index(name), OPS.index(op)])
    if name.startswith("float8"):
        return exact_fp8_input(rng, op, count, rank).astype(host_dtype(name))
    if is_float(name):
        low, high = (0.5, 1.5) if op == "prod" else (-4.0, 4.0)
        values = rng.uniform(low, high, count)
        return values.astype(host_dtype(name))
    info = np.iinfo(np.dtype(name))
    if op == "prod":
        low, high = (-3, 4) if info.min < 0 else (0, 4)
    else:
        low, high = max(info.min, -(2**40)), min(info.max, 2**40)
    return rng.integers(low, high, count, dtype=np.int64, endpoint=False).astype(np.dtype(name))


def premul_scalar(name: str, rank: int) -> np.ndarray:
    """Rank `rank`'s PreMulSum scalar (one element of the host dtype)."""
    value = 0.5 * (rank + 1) if is_float(name) else rank + 1
    return np.array([value]).astype(host_dtype(name))


def reduce(name: str, op: str, inputs: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """The expected result (float64 for float types, wrapped integer arithmetic for integers) and the
    magnitude that bounds its rounding error: 0 where the result is exact whatever the algorithm (max
    and min pick an operand; fp8 sums and products of make_input's values), else the larger of the
    result and the sum of the operands' absolute values (divided by the ranks for avg, as the result)."""
    nranks = len(inputs)
    if is_float(name):
        xs = [x.astype(np.float64) for x in inputs]
        if op.startswith("premulsum"):
            xs = [(x * premul_scalar(name, r).astype(np.float64)) for r, x in enumerate(xs)]
    else:
        xs = list(inputs)
        if op.startswith("premulsum"):
            xs = [x * premul_scalar(name, r)[0] for r, x in enumerate(xs)]
    out = xs[0].copy()
    with np.errstate(over="ignore"):
        for x in xs[1:]:
            if op in ("sum", "avg") or op.startswith("premulsum"):
                out = out + x
            elif op == "prod":
                out = out * x
            elif op == "max":
                out = np.maximum(out, x)
            else:
                out = np.minimum(out, x)
    if op == "avg":
        if is_float(name):
            out = out / nranks
        elif np.dtype(name).kind == "i":
            out = (np.sign(out) * (np.abs(out.astype(np.int64)) // nranks)).astype(out.dtype)
        else:
            out = out // nranks
    if op in ("max", "min") or (name.startswith("float8") and op in ("sum", "prod")):
        return out, np.zeros(out.shape)
    magnitude = sum(np.abs(x.astype(np.float64)) for x in xs) / (nranks if op == "avg" else 1)
    return out, np.maximum(np.abs(out.astype(np.float64)), magnitude)


def check(
    got: np.ndarray, expected: np.ndarray, magnitude: np.ndarray, name: str, nranks: int, what: str
) -> None:
    """Raises AssertionError with the first mismatches when `got` is not `expected`."""
    if not is_float(name):
        bad = np.nonzero(got != expected)[0]
    else:
        g = got.astype(np.float64)
        eps = epsilon(name)
        # Inputs are exact in the type; the library rounds once per rank at most (PreMulSum), and a
        # magnitude of 0 marks a result that no rounding touches.
        tolerance = (nranks + 2) * eps * magnitude
        bad = np.nonzero(~(np.abs(g - expected) <= tolerance))[0]
    if bad.size:
        first = bad[:5]
        raise AssertionError(
            f"{what}: {bad.size} of {got.size} wrong, e.g. at {first.tolist()}: "
            f"got {got[first].tolist()} expected {expected[first].tolist()}"
        )
