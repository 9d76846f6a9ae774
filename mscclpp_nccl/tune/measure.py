"""One candidate at one size: verified against a NumPy reference (an eager call and a graph replay), then
timed over CUDA-graph replays, or cut short when it cannot win."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..bench.calls import make_issuer
from ..bench.collectives import REDUCING, DType, Layout
from ..bench.data import count_wrong, expected_output, gen_input, reduce_ranks
from .comms import CandidateRank, Failed, Live
from .policy import replays_for, should_prune

log = logging.getLogger("mscclpp_nccl.tune")
ROOT = 0  # rooted collectives are tuned with root 0 (the table has no root key)
# The reference of a full-size reduction is computed in chunks of this many elements (bounded memory).
REFERENCE_CHUNK = 1 << 22
# The clock of every timing (tests substitute a virtual one).
_clock = time.perf_counter


def reference(
    collective: str, dt: DType, kind: str, nranks: int, rank: int, root: int, lay: Layout, seed: int
) -> tuple[np.ndarray | None, int]:
    """The bench's expected output of an out-of-place call, with full-size reductions computed in chunks
    (so that a 256 MB all-reduce among 8 ranks does not need gigabytes of host memory per rank)."""
    full_reduction = collective == "all_reduce" or (collective == "reduce" and rank == root)
    if not full_reduction or lay.count <= REFERENCE_CHUNK:
        return expected_output(collective, dt, kind, nranks, rank, root, False, lay, seed)
    out = np.empty(lay.count, dtype=dt.storage)
    tolerance = 0
    for start in range(0, lay.count, REFERENCE_CHUNK):
        n = min(REFERENCE_CHUNK, lay.count - start)
        inputs = [gen_input(dt, kind, nranks, r, seed, start, n) for r in range(nranks)]
        part, tolerance = reduce_ranks(dt, kind, inputs)
        out[start : start + n] = part
    return out, tolerance


def count_mismatches(got: np.ndarray, expected: np.ndarray, dt: DType, tolerance: int) -> int:
    """count_wrong, with a fast path for the usual bit-exact match."""
    if tolerance == 0 and got.shape == expected.shape:
        bits = f"uint{dt.bits}"
        if np.array_equal(got.view(bits), expected.view(bits)):
            return 0
    return count_wrong(got, expected, dt, tolerance)


@dataclass
class Outcome:
    """What measuring a candidate at one size gave."""

    status: str  # ok, pruned, wrong, error
    time_us: float | None = None
    replays: int = 0
    message: str = ""

    def to_doc(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"status": self.status, "time_us": self.time_us, "replays": self.replays}
        if self.message:
            doc["message"] = self.message
        return doc


class MeasuringRank(CandidateRank):
    """A tuning rank that verifies and times its candidates' communicators."""

    def check_result(
        self, lay: Layout, dt: DType, expected: np.ndarray | None, tolerance: int, what: str
    ) -> int:
        if expected is None:
            return 0
        assert self.recv is not None
        got = self.read(self.recv.ptr, lay.recvcount, dt)
        wrong = count_mismatches(got, expected, dt, tolerance)
        if wrong:
            log.warning("rank %d: %s: %d of %d elements wrong", self.rank, what, wrong, got.size)
        return wrong

    # --- one candidate at one size ------------------------------------------------------------------
    def measure(
        self,
        live: Live,
        lay: Layout,
        dt: DType,
        expected: np.ndarray | None,
        tolerance: int,
        best_us: float | None,
        what: str,
    ) -> Outcome:
        self.comm = live.comm
        try:
            with self.watchdog.phase(self.cfg.timeout * 8 + 120, what):
                return self._measure(live, lay, dt, expected, tolerance, best_us, what)
        except Failed as e:
            if e.status == "error":
                self.abort()
                self.drain(what)
            return Outcome(e.status, message=e.message)
        finally:
            live.runs += 1
            self.comm = None

    def _launch_and_wait(self, launch: Callable[[], None], settle: bool = True) -> float:
        """Runs launch() after a barrier and waits for the stream; the slowest rank's seconds. With settle,
        the ranks first agree that every one of them enqueued its work, so that one rank's refusal is seen
        at once rather than after the others' kernels time out waiting for it."""
        self.group.barrier()
        t0 = _clock()
        err = self.attempt(launch)
        if settle:
            self.agree(err)
        if err is None:
            err = self.stream_failure(self.cfg.timeout)
        return float(max(self.agree(err, _clock() - t0)))

    def _run_checked(
        self, launch: Callable[[], None], lay: Layout, dt: DType, expected: Any, tol: int, what: str
    ) -> float:
        """Zero the output, run launch(), check the output on every rank; the slowest rank's seconds."""
        assert self.recv is not None
        self.memset(self.recv.ptr, lay.size)
        self.wait(f"{what}: clearing the output")
        seconds = self._launch_and_wait(launch)
        wrong = self.check_result(lay, dt, expected, tol, what)
        wrongs = self.agree(None, wrong)
        if any(wrongs):
            bad = [f"rank {r}: {n}" for r, n in enumerate(wrongs) if n]
            raise Failed("wrong", f"wrong results ({', '.join(bad)} elements)")
        return seconds

    def _capture(self, issue: Callable[[], Any]) -> Any:
        """A graph of what issue() enqueues, on every rank or (raising Failed) on none."""
        graphs: list[Any] = []
        err = self.attempt(lambda: graphs.append(self.capture(issue, "streamCaptureModeThreadLocal")))
        self.agree(err)
        return graphs[0]

    def _measure(
        self,
        live: Live,
        lay: Layout,
        dt: DType,
        expected: Any,
        tol: int,
        best_us: float | None,
        what: str,
    ) -> Outcome:
        cfg = self.cfg
        calls = cfg.calls_per_graph
        op = "sum" if self.opts.collective in REDUCING else None
        issue = make_issuer(self, lay, dt, op, ROOT, False, calls)

        # 1. Verify: an eager call, then a replayed graph of one call.
        eager = self._run_checked(lambda: issue.single(0), lay, dt, expected, tol, f"{what} (eager)")
        one = self._capture(lambda: issue.single(0))
        replayed = self._run_checked(
            lambda: one.launch(self.stream), lay, dt, expected, tol, f"{what} (graph)"
        )
        # Both single calls far slower than the best: it cannot win (one slow call may be a hiccup of the
        # host; a candidate's first size may include loading its kernels, so it is always timed).
        single = min(eager, replayed)
        if live.runs > 0 and should_prune(single, best_us):
            return Outcome("pruned", single * 1e6, 0)

        # 2. Time: a graph of `calls` back-to-back calls, one warm-up replay, then the timed replays.
        graph = self._capture(lambda: [issue.timed(i) for i in range(calls)])
        warm = self._launch_and_wait(lambda: graph.launch(self.stream))
        if should_prune(warm / calls, best_us):
            return Outcome("pruned", warm / calls * 1e6, 0)
        replays = replays_for(warm, cfg.replays, cfg.time_per_point)

        def replay() -> None:
            for _ in range(replays):
                graph.launch(self.stream)

        # Host wall time around the replays; no exchange between ranks inside it.
        elapsed = self._launch_and_wait(replay, settle=False)
        return Outcome("ok", elapsed / (replays * calls) * 1e6, replays)
