"""The selector on the GPU: a tuning table and MSCCLPP_NCCL_ALGO change the algorithm the library
picks (read from its NCCL_DEBUG_SUBSYS=TUNING log), results stay right, and ranks that disagree fall
back to the built-in rules together."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from multirank import ROOT, assert_all_passed, run_ranks

WORKER = ROOT / "tests" / "gpu" / "tuning_worker.py"
LOG = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING"}


def choices(output: str) -> list[str]:
    """'all_reduce 1024 bytes float32: <algorithm> (<source>)' for each call of each rank."""
    return [line.split("NCCL INFO ", 1)[1] for line in output.splitlines() if "NCCL INFO all_reduce" in line]


@pytest.mark.gpu
def test_table_changes_the_choice(tmp_path: Path) -> None:
    table = {
        "format": "mscclpp-nccl-tuning",
        "version": 1,
        "entries": [
            {
                "gpu": "*",
                "nranks": 2,
                "ranks_per_gpu": "*",
                "collective": "all_reduce",
                "rules": [{"max_bytes": None, "algorithm": "allreduce_two_shot_packet", "blocks": 2}],
            }
        ],
    }
    path = tmp_path / "table.json"
    path.write_text(json.dumps(table))
    default = choices(run_ranks(2, WORKER, env={**LOG, "MSCCLPP_NCCL_TUNING_FILE": "/nonexistent.json"}))
    assert any("1024 bytes float32: allreduce_one_shot_packet (rules)" in c for c in default), default
    tuned_output = run_ranks(2, WORKER, env={**LOG, "MSCCLPP_NCCL_TUNING_FILE": str(path)})
    assert_all_passed(tuned_output, ["tuning"], 2)
    tuned = choices(tuned_output)
    assert tuned and all("allreduce_two_shot_packet (table), 2 blocks" in c for c in tuned), tuned


@pytest.mark.gpu
def test_forced_algorithm_and_disagreement() -> None:
    force = {**LOG, "MSCCLPP_NCCL_ALGO": "all_reduce=allreduce_two_shot_packet/3"}
    forced = choices(run_ranks(2, WORKER, env=force))
    assert forced and all("allreduce_two_shot_packet (forced), 3 blocks" in c for c in forced), forced
    # Only rank 0 forces: the ranks must notice and all use the built-in rules.
    output = run_ranks(2, WORKER, "--force-on-rank0", "allreduce_two_shot_packet", env=LOG)
    assert "all use built-in rules" in output, output[-3000:]
    assert_all_passed(output, ["tuning"], 2)
    assert all("(rules)" in c for c in choices(output)), choices(output)
