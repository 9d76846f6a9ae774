"""What a rank process needs to fail cleanly: its error type, where it stands, stderr lines, a hard exit and
the watchdog that ends a phase which outlives its deadline."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn


class BenchError(RuntimeError):
    """A failure the worker reports and exits on."""


log = logging.getLogger("mscclpp_nccl.bench")


class Watchdog:
    """Kills this process when a phase outlives its deadline (a blocking library call cannot be timed
    out otherwise). Before exiting it aborts the communicator, so that this rank's kernels stop."""

    def __init__(self, rank: int) -> None:
        self._rank = rank
        self._lock = threading.Lock()
        self._deadline: float | None = None
        self._what = ""
        self.on_fire: Callable[[], None] | None = None
        threading.Thread(target=self._run, daemon=True, name="bench-watchdog").start()

    @contextlib.contextmanager
    def phase(self, seconds: float, what: str) -> Any:
        with self._lock:
            self._deadline, self._what = time.monotonic() + seconds, what
        try:
            yield
        finally:
            with self._lock:
                self._deadline = None

    def _run(self) -> None:
        while True:
            time.sleep(0.2)
            with self._lock:
                fired = self._deadline is not None and time.monotonic() > self._deadline
                what = self._what
            if fired:
                log.error("rank %d: %s did not finish in time; giving up", self._rank, what)
                if self.on_fire is not None:
                    t = threading.Thread(target=self.on_fire, daemon=True)
                    t.start()
                    t.join(5.0)
                exit_now(124)


def exit_now(code: int) -> NoReturn:
    """Flushes the output and exits at once, skipping the interpreter's teardown (nothing may hang)."""
    with contextlib.suppress(Exception):
        sys.stdout.flush()
        sys.stderr.flush()
    os._exit(code)


@dataclass(frozen=True)
class RankInfo:
    """Where a rank stands: its rank, the number of ranks and rank 0's bookkeeping address."""

    rank: int
    nranks: int
    host: str
    port: int

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> RankInfo:
        """From the launcher's variables (MSCCLPP_NCCL_RANK/WORLD_SIZE, MASTER_ADDR/PORT)."""
        env = dict(os.environ if env is None else env)
        try:
            return cls(
                int(env["MSCCLPP_NCCL_RANK"]),
                int(env["MSCCLPP_NCCL_WORLD_SIZE"]),
                env["MASTER_ADDR"],
                int(env["MASTER_PORT"]),
            )
        except KeyError as e:
            raise BenchError(
                f"no {e} in the environment: start through python -m mscclpp_nccl.bench"
            ) from None
