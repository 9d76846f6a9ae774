"""The model behind ncclGroupSimulateEnd's estimate (native/algorithms/cost_model.h), asked through
tests/selector_driver.cc, against nccl-tests measurements of this library in perf/: ranks sharing one H100
or one H200, every binary, eager and in graphs, 8 B-256 MB. The model must stay within a factor of 2.5
of every measured size and within 2 of nearly all, without leaning either way on the whole."""

from __future__ import annotations

import csv
import itertools
import math
from pathlib import Path

import pytest
from host_build import REPO, build_driver
from stock_nccl import require_cuda_include
from test_selection import LAYOUTS, SHIPPED, ask_driver
from test_selector import SOURCES

from mscclpp_nccl.bench.collectives import COLLECTIVES

MEASURED = [
    "perf/nccl-tests-2-4-8-2026-12-07.csv",  # H100, 2/4/8 ranks, 8 B-32 MB
    "perf/nccl-tests-large-2026-12-06.csv",  # H100, 1-256 MB
    "perf/nccl-tests-2026-12-06-h200.csv",  # H200, 4 ranks
    "perf/nccl-tests-sendrecv-2026-12-06.csv",  # H100, sendrecv pulled from mapped buffers
]
GPU_NAMES = {"H100": "NVIDIA H100 80GB HBM3", "H200": "NVIDIA H200"}
# nccl-tests' size is the whole buffer of these; the call's bytes are one rank's range of it.
RANGED = ("all_gather", "reduce_scatter", "alltoall", "gather", "scatter")
PATHS = {0: "packet", 1: "chunked", 2: "mapped"}


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cost_model") / "selector_driver"
    return build_driver(out, SOURCES, [GPU_NAMES["H200"], *map(str, LAYOUTS[1])], 0, [require_cuda_include()])


def layout_of(nranks: int, ranks_per_gpu: int) -> tuple[int, ...]:
    return next(lay for lay in LAYOUTS if lay[0] == nranks and lay[1] == ranks_per_gpu)


def modeled(driver: Path, gpu: str, layout: tuple[int, ...], calls: list[tuple[str, int]]) -> list[float]:
    """Microseconds the model gives each (collective, call bytes) of bf16, with the shipped table."""
    rows = ask_driver(driver, gpu, layout, str(SHIPPED), [f"model {c} 2 {b}" for c, b in calls])
    assert all(r[0] == "model" and int(r[2]) in PATHS for r in rows), rows
    return [float(r[1]) for r in rows]


def measured_rows() -> list[dict[str, str]]:
    rows = []
    for name in MEASURED:
        with open(REPO / name, newline="") as f:
            rows += [r for r in csv.DictReader(f) if r["mode"] in ("eager", "graph")]
    return rows


def test_the_model_follows_nccl_tests_measurements(driver: Path) -> None:
    rows = measured_rows()
    assert len(rows) > 700
    groups: dict[tuple[str, int], list[dict[str, str]]] = {}
    for r in rows:
        gpu = next(name for key, name in GPU_NAMES.items() if key in r["gpu"])
        groups.setdefault((gpu, int(r["ranks"])), []).append(r)
    ratios = []
    for (gpu, nranks), group in groups.items():
        calls = []
        for r in group:
            size = int(r["bytes"])
            calls.append((r["collective"], size // nranks if r["collective"] in RANGED else size))
        for r, us in zip(group, modeled(driver, gpu, layout_of(nranks, nranks), calls), strict=True):
            ratios.append(
                (us / float(r["ours_us"]), r["collective"], nranks, r["mode"], r["bytes"], r["gpu"])
            )
    far = [r for r in ratios if not 1 / 2.5 <= r[0] <= 2.5]
    assert not far, far
    outside_two = [r for r in ratios if not 0.5 <= r[0] <= 2]
    assert len(outside_two) <= 0.03 * len(ratios), outside_two
    geomean = math.exp(sum(math.log(r[0]) for r in ratios) / len(ratios))
    assert 0.8 <= geomean <= 1.25, geomean


@pytest.mark.parametrize("layout", LAYOUTS, ids=lambda lay: f"{lay[0]}ranks_{lay[1]}per_gpu")
@pytest.mark.parametrize("gpu", sorted(GPU_NAMES.values()))
def test_the_model_grows_with_the_bytes(driver: Path, gpu: str, layout: tuple[int, ...]) -> None:
    sizes = [1 << k for k in range(3, 31)]
    for collective in COLLECTIVES:
        times = modeled(driver, gpu, layout, [(collective, s) for s in sizes])
        assert times[0] > 0, collective
        # A path change may cost a little more fixed time for far more bandwidth, never a jump down.
        assert all(later >= 0.8 * earlier for earlier, later in itertools.pairwise(times)), (
            collective,
            times,
        )
        assert times[-1] > 20 * times[0], (collective, times)  # 1 GiB costs far more than 8 bytes


def test_ranks_on_separate_gpus_are_modelled_on_nvlink(driver: Path) -> None:
    """8 ranks, a GPU each: a 1 GiB all-reduce's bus bytes (2 x 7/8 GiB) at about 370 GB/s."""
    (us,) = modeled(driver, GPU_NAMES["H100"], layout_of(8, 1), [("all_reduce", 1 << 30)])
    bus_bytes = 2 * 7 / 8 * (1 << 30)
    assert us == pytest.approx(bus_bytes / 370e3, rel=0.01)
