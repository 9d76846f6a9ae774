"""selfcheck's host side without a GPU: its bfloat16 codec (ml_dtypes) is round-to-nearest-even from
float32, the sizes it sweeps, and its reference and comparison."""

from __future__ import annotations

import numpy as np

from mscclpp_nccl import selfcheck as sc


def test_bfloat16_codec_rounds_to_nearest_even() -> None:
    x = np.random.default_rng(1).standard_normal(50000).astype(np.float32)
    x = np.concatenate([x, np.float32([0.0, -0.0, 1.0, 1.00390625, 1.01171875, 3.4e38])])
    u = x.view(np.uint32).astype(np.uint64)
    rne = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    assert np.array_equal(sc.to_bf16_bits(x), rne)
    assert np.array_equal(sc.from_bf16_bits(rne), (rne.astype(np.uint32) << 16).view(np.float32))


def test_sizes_end_at_the_maximum() -> None:
    assert sc.sizes(8, 64) == [8, 32, 64]
    assert sc.sizes(4, 4) == [4]


def test_reference_and_compare() -> None:
    for dtype in ("float32", "bfloat16"):
        ref, mag = sc.reference(3, 64, dtype)
        assert sc.compare(sc.rank_input(0, 64, dtype), ref, mag, dtype, 3) is not None  # one rank's input
        exact = sc.to_bf16_bits(ref.astype(np.float32)) if dtype == "bfloat16" else ref.astype(np.float32)
        assert sc.compare(exact, ref, mag, dtype, 3) is None
