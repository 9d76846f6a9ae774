"""ncclCommGetUniqueId and ncclCommGrow on the GPU (tests/gpu/grow_worker.py): half the ranks hold a
communicator, from a split or from a shrink of the world, and grow it back to every rank with the other
half joining; the grown communicator's all-reduce is exact, and the one it grew from still works."""

from __future__ import annotations

from pathlib import Path

import pytest
from multirank import ROOT, run_worker

WORKER = ROOT / "tests" / "gpu" / "grow_worker.py"


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
@pytest.mark.parametrize("scenario", ["split", "shrink"])
def test_grow_to_every_rank(nranks: int, scenario: str, tmp_path: Path) -> None:
    run_worker(nranks, WORKER, scenario, str(tmp_path), scenario)
