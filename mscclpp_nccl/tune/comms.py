"""A tuning rank's communicators: one per candidate, each forced to its algorithm at init, and the
agreement among ranks that makes every rank drop a failed candidate together."""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..bench.hostgroup import HostGroupError
from ..bench.process import BenchError, RankInfo
from ..bench.rank import Rank
from .candidates import ALGO_ENV, Candidate
from .options import TuneOptions, bench_options

log = logging.getLogger("mscclpp_nccl.tune")
# The process environment is shared by every thread; set-then-init of a communicator must not interleave.
_ENV_LOCK = threading.Lock()


@dataclass
class Live:
    """A candidate's communicator and what it did so far in one collective."""

    cand: Candidate
    index: int
    comm: Any = None
    last_us: float | None = None
    runs: int = 0


class Failed(Exception):
    """A candidate failed on some rank (every rank raises it together)."""

    def __init__(self, status: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class CandidateRank(Rank):
    """A rank of a tuning run with one communicator per candidate (`lives`); `comm` is the one in use."""

    def __init__(self, cfg: TuneOptions, where: RankInfo, cupy: Any = None, nccl: Any = None) -> None:
        self.cfg = cfg
        self.base_opts = bench_options(cfg, cfg.collectives[0])
        self.lives: list[Live] = []
        super().__init__(self.base_opts, where, cupy, nccl)
        self.watchdog.on_fire = self.abort_all

    def abort(self) -> None:
        for live in self.lives:
            if live.comm is self.comm:
                live.comm = None
        super().abort()

    def abort_all(self) -> None:
        """Aborts every candidate's communicator (the watchdog's last act, or after an error)."""
        self.comm = None
        for live in self.lives:
            comm, live.comm = live.comm, None
            self.abort_comm(comm)

    def agree(self, error: str | None, value: Any = None) -> list[Any]:
        """Every rank's value; raises Failed on every rank when any rank had an error."""
        got = self.group.allgather([error, value])
        for r, (e, _) in enumerate(got):
            if e:
                raise Failed("error", f"rank {r}: {e}")
        return [v for _, v in got]

    def attempt(self, fn: Callable[[], Any]) -> str | None:
        """fn's failure as text (None when it worked); host bookkeeping failures stay fatal."""
        try:
            fn()
        except HostGroupError:
            raise
        except Exception as e:
            return f"{type(e).__name__}: {e}" if not isinstance(e, BenchError) else str(e)
        return None

    def create_comm(self, cand: Candidate) -> tuple[Any, str | None]:
        """A communicator forced to `cand` (ours) or plain (stock); (None, why) when init failed."""
        from ..binding import unique_id_to_hex

        uid = unique_id_to_hex(self.nccl.get_unique_id()) if self.rank == 0 else None
        uid = self.group.allgather(uid)[0]
        comm = None

        def init() -> None:
            nonlocal comm
            with _ENV_LOCK:
                saved = os.environ.get(ALGO_ENV)
                try:
                    if cand.item is None:
                        os.environ.pop(ALGO_ENV, None)
                    else:
                        os.environ[ALGO_ENV] = cand.item
                    comm = self.nccl.comm_init_rank(self.nranks, uid, self.rank, None)
                finally:
                    if saved is None:
                        os.environ.pop(ALGO_ENV, None)
                    else:
                        os.environ[ALGO_ENV] = saved

        with self.watchdog.phase(self.cfg.timeout * 2 + 60, f"ncclCommInitRank for {cand.spec}"):
            err = self.attempt(init)
        try:
            self.agree(err)
        except Failed as e:
            self.abort_comm(comm)
            return None, e.message
        return comm, None

    def destroy(self, live: Live) -> None:
        comm, live.comm = live.comm, None
        if comm is None:
            return
        with self.watchdog.phase(self.cfg.timeout + 60, f"destroying the communicator of {live.cand.spec}"):
            err = self.attempt(lambda: self.nccl.check(self.lib.ncclCommFinalize(comm), comm))
            if err is None:
                err = self.attempt(lambda: self.nccl.check(self.lib.ncclCommDestroy(comm)))
            else:
                self.abort_comm(comm)
        if err:
            log.warning("rank %d: %s: %s", self.rank, live.cand.spec, err)

    def drain(self, what: str) -> None:
        """After an abort: the stream must empty, or nothing else can run on it."""
        start = time.monotonic()
        while not self.stream.done:
            if time.monotonic() - start > self.cfg.timeout:
                raise BenchError(f"{what}: the stream did not drain after aborting the communicator")
            time.sleep(0.001)
