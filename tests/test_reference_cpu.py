"""The GPU workers' host reference (tests/gpu/reference.py) against results a library could give: a result
rounded as the library rounds passes, and a wrong one fails (every output zero, a rank left out), so that
the GPU tests that lean on it can fail."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent / "gpu"))
import reference as ref

FLOATS = [t for t in ref.TYPES if ref.is_float(t)]
COUNT = 1023
SEED = 11


def inputs_of(name: str, op: str, nranks: int) -> list[np.ndarray]:
    return [ref.make_input(name, op, COUNT, k, SEED) for k in range(nranks)]


def rounded_like_the_library(name: str, op: str, inputs: list[np.ndarray]) -> np.ndarray:
    """Each operand (scaled, for PreMulSum) rounded to the type, summed in float64, rounded once."""
    if op.startswith("premulsum"):
        inputs = [
            (x.astype(np.float64) * ref.premul_scalar(name, r).astype(np.float64)).astype(
                ref.host_dtype(name)
            )
            for r, x in enumerate(inputs)
        ]
        op = "sum"
    expected, _ = ref.reduce(name, op, inputs)
    return expected.astype(ref.host_dtype(name))


def fails(got: np.ndarray, expected: np.ndarray, magnitude: np.ndarray, name: str, nranks: int) -> bool:
    try:
        ref.check(got, expected, magnitude, name, nranks, "probe")
    except AssertionError:
        return True
    return False


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("op", ref.OPS)
@pytest.mark.parametrize("nranks", [2, 4, 10])
def test_a_result_rounded_once_passes(name: str, op: str, nranks: int) -> None:
    inputs = inputs_of(name, op, nranks)
    expected, magnitude = ref.reduce(name, op, inputs)
    got = rounded_like_the_library(name, op, inputs)
    assert not fails(got, expected, magnitude, name, nranks)


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("op", ref.OPS)
@pytest.mark.parametrize("nranks", [2, 4, 10])
def test_zeros_fail(name: str, op: str, nranks: int) -> None:
    if name.startswith("float8") and op in ("avg", "premulsum_host", "premulsum_device"):
        pytest.skip(f"{name} {op}: the bound of up to one rounding a rank exceeds the result itself")
    expected, magnitude = ref.reduce(name, op, inputs_of(name, op, nranks))
    assert not np.all(expected == 0)
    assert fails(np.zeros(COUNT, ref.host_dtype(name)), expected, magnitude, name, nranks)


@pytest.mark.parametrize("name", FLOATS)
@pytest.mark.parametrize("op", ["sum", "max", "min", "avg"])
@pytest.mark.parametrize("nranks", [2, 4, 8, 10])
def test_a_rank_left_out_fails(name: str, op: str, nranks: int) -> None:
    """Exact wherever the result is exact (max, min, fp8 sums); elsewhere wherever the tolerance, which
    grows with the ranks, stays well below one rank's share of the result."""
    exact = op in ("max", "min") or (name.startswith("float8") and op in ("sum", "prod"))
    if not exact and (nranks + 2) * ref.epsilon(name) * nranks >= 0.25:
        pytest.skip(f"{name} at {nranks} ranks: the rounding bound exceeds a rank's share")
    inputs = inputs_of(name, op, nranks)
    expected, magnitude = ref.reduce(name, op, inputs)
    partial, _ = ref.reduce(name, op, inputs[1:])
    if op == "avg":
        partial = partial * (nranks - 1) / nranks  # the sum of the others, divided by every rank
    got = partial.astype(ref.host_dtype(name))
    assert fails(got, expected, magnitude, name, nranks)


@pytest.mark.parametrize("op", ["sum", "prod"])
def test_fp8_partial_results_of_the_inputs_are_exact(op: str) -> None:
    """The premise of the exact fp8 check: every partial sum or product is representable in either
    format (in rank order here; the inputs' design makes any order so)."""
    for name in ("float8_e4m3", "float8_e5m2"):
        inputs = [x.astype(np.float64) for x in inputs_of(name, op, 10)]
        running = inputs[0]
        for x in inputs[1:]:
            running = running + x if op == "sum" else running * x
            assert np.array_equal(running.astype(ref.host_dtype(name)).astype(np.float64), running), name
