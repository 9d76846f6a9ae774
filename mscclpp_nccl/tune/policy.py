"""How much the tuner measures: replays per point, when a slow candidate is cut short, and the rough cost
model behind its time estimates."""

from __future__ import annotations

from collections.abc import Sequence

from ..bench.collectives import rough_call_seconds

# Pruning: a candidate whose call takes at least PRUNE_MIN_SECONDS and more than PRUNE_FACTOR times the
# best time so far at this size is not timed further (it cannot win).
PRUNE_FACTOR = 3.0
PRUNE_MIN_SECONDS = 2e-3
MIN_REPLAYS = 3

# A rough model of the time a run takes, for the up-front estimate (the running estimate rescales it by
# what the finished points took).
EST_COMM_INIT_S = 0.5  # one communicator's ncclCommInitRank
EST_POINT_OVERHEAD_S = 0.012  # per candidate and size: captures, host exchanges, copies
EST_HOST_BYTES_PER_S = 3e9  # reading a result back and comparing it
EST_REFERENCE_S_PER_BYTE = 3e-8  # generating inputs and the NumPy reference, once per size


def estimate_point_seconds(
    size: int, ncandidates: int, calls: int, replays: int, time_per_point: float
) -> float:
    """A rough guess of the seconds one size takes with `ncandidates` candidates (see the EST_ constants)."""
    per_call = rough_call_seconds(size)
    warm = calls * per_call
    n = replays if replays < MIN_REPLAYS else min(replays, max(MIN_REPLAYS, int(time_per_point / warm)))
    verify = 2 * per_call + 2 * size / EST_HOST_BYTES_PER_S
    per_candidate = EST_POINT_OVERHEAD_S + verify + warm * (1 + n)
    return ncandidates * per_candidate + size * EST_REFERENCE_S_PER_BYTE


def estimate_run_seconds(
    plan: Sequence[tuple[int, Sequence[int]]], calls: int, replays: int, time_per_point: float
) -> float:
    """plan: (candidates, sizes) per collective."""
    total = 0.0
    for ncand, sizes in plan:
        total += ncand * EST_COMM_INIT_S
        total += sum(estimate_point_seconds(s, ncand, calls, replays, time_per_point) for s in sizes)
    return total


def replays_for(warm_seconds: float, replays: int, time_per_point: float) -> int:
    """Replays to time: --replays, fewer (at least MIN_REPLAYS) when one replay is long."""
    if replays <= MIN_REPLAYS or warm_seconds <= 0:
        return max(1, replays)
    return max(MIN_REPLAYS, min(replays, int(time_per_point / warm_seconds)))


def should_prune(call_seconds: float, best_us: float | None) -> bool:
    """Whether a candidate taking call_seconds per call can stop being timed (it cannot win)."""
    return (
        best_us is not None
        and call_seconds >= PRUNE_MIN_SECONDS
        and call_seconds * 1e6 > PRUNE_FACTOR * best_us
    )
