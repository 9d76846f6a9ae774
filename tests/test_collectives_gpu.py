"""Every other collective and send/recv on the GPU, N ranks sharing the GPUs present (under MPS).

The scenarios live in tests/gpu/collectives_worker.py; each rank checks its own result.
"""

from __future__ import annotations

import pytest
from multirank import ROOT, assert_all_passed, run_ranks

WORKER = ROOT / "tests" / "gpu" / "collectives_worker.py"
SCENARIOS = ["matrix", "large", "graph", "p2p", "groups", "threads"]


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_collective_scenarios(nranks: int) -> None:
    assert_all_passed(run_ranks(nranks, WORKER, *SCENARIOS), SCENARIOS, nranks)


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4])
def test_max_ctas_bounds_every_grid(nranks: int) -> None:
    """ncclConfig_t maxCTAs, given to a split and inherited by its own split: every collective still
    matches NumPy, and both communicators of every rank report grids of one block."""
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT"}
    output = run_ranks(nranks, WORKER, "max_ctas", env=env)
    assert_all_passed(output, ["max_ctas"], nranks)
    assert output.count("grids up to 1 blocks") == 2 * nranks, output[-3000:]


@pytest.mark.gpu
def test_coll_config_launch_event_and_selection() -> None:
    output = run_ranks(2, WORKER, "coll_config", env={"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "COLL"})
    assert_all_passed(output, ["coll_config"], 2)
    # Each rank's timed event, passed to two calls, is refused once; the event with timing off never is.
    assert output.count("kernels cannot carry it") == 2, output[-3000:]


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4])
def test_group_simulate_end_models_the_call(nranks: int) -> None:
    assert_all_passed(run_ranks(nranks, WORKER, "simulated_estimate"), ["simulated_estimate"], nranks)


# An algorithm forced for every collective it serves, at every size (see test_allreduce_gpu).
FORCED = {
    "chunked": ("exchange_chunked", [2, 4, 8]),
    "chunked_small_chunks": ("exchange_chunked/3/0/512", [3]),
    # reduce alone: segments of unequal length, and chunks small enough for many rounds and empty ones.
    "reduce_two_shot": ("reduce_two_shot_packet", [2, 3, 4, 8]),
    "reduce_two_shot_small_chunks": ("reduce_two_shot_packet/3/0/64", [3, 5]),
}
FORCED_SCENARIOS = ["matrix", "large", "graph", "groups"]


@pytest.mark.gpu
@pytest.mark.parametrize(
    "variant,nranks", [(variant, n) for variant, (_, counts) in FORCED.items() for n in counts]
)
def test_collectives_forced_algorithm(variant: str, nranks: int) -> None:
    env = {"MSCCLPP_NCCL_ALGO": FORCED[variant][0]}
    output = run_ranks(nranks, WORKER, *FORCED_SCENARIOS, env=env)
    assert_all_passed(output, FORCED_SCENARIOS, nranks)


# Send/recv in chunks at every size (the rules use them above 1 MB): tiny, odd and zero-byte transfers,
# transfers to self beside them, alltoallv groups, repeated peers, graphs.
P2P_CHUNKED_SCENARIOS = ["p2p", "groups", "graph"]


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 3, 8])
def test_p2p_chunked_forced(nranks: int) -> None:
    env = {"MSCCLPP_NCCL_ALGO": "sendrecv=p2p_chunked", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "TUNING"}
    output = run_ranks(nranks, WORKER, *P2P_CHUNKED_SCENARIOS, env=env)
    assert_all_passed(output, P2P_CHUNKED_SCENARIOS, nranks)
    assert ": p2p_chunked (forced)" in output, "no transfer went in chunks"


# More parts than one kernel holds: at 10 ranks an all-to-all group of large transfers has 18 of
# 8 parts each (144 > kMaxP2pParts), so a group runs as several kernels, by peer distance.
@pytest.mark.gpu
def test_p2p_many_peers() -> None:
    assert_all_passed(run_ranks(10, WORKER, "p2p"), ["p2p"], 10)
