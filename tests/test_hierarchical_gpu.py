"""Communicators over several hosts (native/fallback/DESIGN.md), on one GPU cut into fake hosts by the
launcher's --fake-hosts (MSCCLPP_NCCL_HOST_ID per rank): intra-host steps on our kernels, the rails and the
rest on a private stock NCCL. The collective suites run unchanged on them (tests/gpu/collectives_worker.py and
allreduce_worker.py check every collective, type and op, in and out of place, in groups and graphs, against
NumPy); tests/gpu/hierarchy_worker.py adds what only these communicators have.

Needs a stock NCCL that accepts ranks sharing a GPU (2.30 or newer): MSCCLPP_NCCL_FALLBACK_LIB names it
(on the GPU machine, the 2.30.7 build from ../shared/stock-nccl). Skips without it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from multirank import ROOT, assert_all_passed, run_ranks, wait_for_device

COLLECTIVES = ROOT / "tests" / "gpu" / "collectives_worker.py"
ALLREDUCE = ROOT / "tests" / "gpu" / "allreduce_worker.py"
HIERARCHY = ROOT / "tests" / "gpu" / "hierarchy_worker.py"

STOCK = os.environ.get("MSCCLPP_NCCL_FALLBACK_LIB", "")
needs_stock = pytest.mark.skipif(
    not STOCK, reason="MSCCLPP_NCCL_FALLBACK_LIB names no stock NCCL (2.30+ takes ranks sharing a GPU)"
)

# name -> (ranks, --fake-hosts, the path every rank must log)
LAYOUTS = {
    "2x2": (4, "2", "hierarchical"),
    "2x4": (8, "2", "hierarchical"),
    "4x2": (8, "4", "hierarchical"),
    # Hosts numbered apart: all_reduce stays hierarchical, all_gather and reduce_scatter go to stock.
    "interleaved": (4, "a,b,a,b", "hierarchical"),
    # Unequal hosts cannot line up their slices: all through stock.
    "uneven": (4, "a,a,a,b", "all-stock"),
}
COLLECTIVE_SCENARIOS = ["matrix", "large", "graph", "p2p", "groups"]
ALLREDUCE_SCENARIOS = ["matrix", "large", "graph", "two_comms", "split", "abort"]
HIERARCHY_SCENARIOS = ["nonblocking", "per_host", "mixed_group", "shrink", "window_pointers"]
# A stock kernel that waits forever is stopped by nothing but the launcher: bound each launch.
LAUNCH_S = 180


def info_env() -> dict[str, str]:
    # Every size through the hierarchy, not only those above its default threshold.
    return {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT", "MSCCLPP_NCCL_HIERARCHY_MIN_BYTES": "0"}


def assert_path(output: str, nranks: int, path: str) -> None:
    lines = [ln for ln in output.splitlines() if f"{path} path" in ln]
    assert len(lines) >= nranks, f"{len(lines)} of {nranks} ranks logged the {path} path\n{output[-4000:]}"


@pytest.mark.gpu
@needs_stock
@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_collectives_over_fake_hosts(layout: str) -> None:
    nranks, hosts, path = LAYOUTS[layout]
    wait_for_device()  # a failed or aborting run before may still hold MPS for a moment
    fake = ["--fake-hosts", hosts]
    output = run_ranks(
        nranks, COLLECTIVES, *COLLECTIVE_SCENARIOS, env=info_env(), launcher_args=fake, timeout=LAUNCH_S
    )
    assert_all_passed(output, COLLECTIVE_SCENARIOS, nranks)
    assert_path(output, nranks, path)
    # Fake hosts are hosts to stock as well (NCCL_HOSTID): its channels between them use its network
    # transport, as between real hosts, never its shared-memory ones.
    assert "via NET" in output, f"stock joined the fake hosts without its network transport\n{output[-4000:]}"
    env = {"MSCCLPP_NCCL_HIERARCHY_MIN_BYTES": "0"}
    output = run_ranks(nranks, ALLREDUCE, *ALLREDUCE_SCENARIOS, env=env, launcher_args=fake, timeout=LAUNCH_S)
    assert_all_passed(output, ALLREDUCE_SCENARIOS, nranks)


@pytest.mark.gpu
@needs_stock
@pytest.mark.parametrize("layout", ["2x2", "4x2"])
def test_what_only_hierarchical_communicators_have(layout: str) -> None:
    nranks, hosts, path = LAYOUTS[layout]
    wait_for_device()
    output = run_ranks(
        nranks,
        HIERARCHY,
        *HIERARCHY_SCENARIOS,
        env=info_env(),
        launcher_args=["--fake-hosts", hosts],
        timeout=LAUNCH_S,
    )
    assert_all_passed(output, HIERARCHY_SCENARIOS, nranks)
    assert_path(output, nranks, path)


@pytest.mark.gpu
@needs_stock
def test_everything_through_stock() -> None:
    """MSCCLPP_NCCL_FALLBACK=all on one host: the same suites through stock alone."""
    env = {**info_env(), "MSCCLPP_NCCL_FALLBACK": "all"}
    output = run_ranks(4, COLLECTIVES, *COLLECTIVE_SCENARIOS, env=env, timeout=LAUNCH_S)
    assert_all_passed(output, COLLECTIVE_SCENARIOS, 4)
    assert_path(output, 4, "all-stock")
    output = run_ranks(4, ALLREDUCE, "matrix", "graph", env=env, timeout=LAUNCH_S)
    assert_all_passed(output, ["matrix", "graph"], 4)


@pytest.mark.gpu
def test_fallback_off_refuses_several_hosts() -> None:
    env = {"MSCCLPP_NCCL_FALLBACK": "0", "MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT": "20"}
    output = run_ranks(4, HIERARCHY, "refused", env=env, launcher_args=["--fake-hosts", "2"], timeout=60)
    assert_all_passed(output, ["refused"], 4)


FAILURES = ROOT / "tests" / "gpu" / "failure_worker.py"


@pytest.mark.gpu
@needs_stock
@pytest.mark.parametrize(
    "ending,route",
    [("abort", "default"), ("destroy", "default"), ("abort", "hierarchy"), ("abort", "all-stock")],
)
def test_rank_killed_mid_collective_over_fake_hosts(ending: str, route: str, tmp_path: Path) -> None:
    """The last rank dies with all-reduces queued (64 KB: on the all-rank stock communicator by default,
    through our intra-host and stock's rail communicators with MIN_BYTES 0, stock alone with
    MSCCLPP_NCCL_FALLBACK=all for comparison): the survivors see ncclRemoteError from our bootstrap, and
    abort or destroy ends stock's waiting kernels and ours.

    Over stock's network transport, stock's own ncclCommAbort takes about 5.5 s on two of the three
    survivors (4 ranks as 2 fake hosts of 2 on one H200, all-stock and default alike), so the limits
    allow stock that; and only 32 calls are queued, because stock's enqueue waits for a free
    slot of its proxy's bounded queue, which the dead peer never frees."""
    wait_for_device()
    env = {"MSCCLPP_NCCL_WAIT_TIMEOUT": "0", "FAILURE_EXTRA_S": "8", "FAILURE_QUEUED_CALLS": "32"}
    if route == "hierarchy":
        env["MSCCLPP_NCCL_HIERARCHY_MIN_BYTES"] = "0"
    elif route == "all-stock":
        env["MSCCLPP_NCCL_FALLBACK"] = "all"
    output = run_ranks(
        4,
        FAILURES,
        str(tmp_path),
        f"collective:{ending}",
        env=env,
        launcher_args=["--fake-hosts", "2"],
        timeout=60,
    )
    assert "victim: killed as planned" in output, output[-6000:]
    assert output.count(f"PASS collective:{ending}") == 3, output[-6000:]


@pytest.mark.gpu
@needs_stock
@pytest.mark.parametrize("call", ["split", "shrink"])
def test_abort_while_blocked_over_fake_hosts(call: str, tmp_path: Path) -> None:
    wait_for_device()
    env = {"MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT": "60", "FAILURE_EXTRA_S": "1"}
    output = run_ranks(
        4,
        FAILURES,
        str(tmp_path),
        f"blocked:{call}",
        env=env,
        launcher_args=["--fake-hosts", "2"],
        timeout=45,
    )
    assert output.count(f"PASS blocked:{call}") == 4, output[-6000:]
