"""Progress of long runs (the tuner, the benchmark): a rich bar with the ETA and the current point when the
output is a terminal and the `progress` extra is installed, plain lines otherwise.

The ranks run under the launcher with their output piped, so the bar belongs to the command that started
them: it sets MSCCLPP_NCCL_PROGRESS=events for the ranks, rank 0 writes its progress as event lines on
its stdout, and the command's output sink moves the bar with them and prints every other line above it.
Work is counted in any unit the run chooses (the tuner's is estimated seconds), so that the ETA weighs a
256 MB point more than an 8 B one.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, TextIO

PROGRESS_ENV = "MSCCLPP_NCCL_PROGRESS"  # "events": report to the command's bar; "plain": never a bar
_EVENT = "@@mscclpp-nccl-progress "  # how an event line on rank 0's stdout starts (the command takes it out)


def format_duration(seconds: float) -> str:
    """4 s, 1 min 15 s, 1 h 02 min."""
    s = max(0, round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60:02d} s"
    return f"{s // 3600} h {s % 3600 // 60:02d} min"


def remaining_estimate(total_estimate: float, estimate_done: float, elapsed: float) -> float:
    """What is left of the up-front estimate, scaled by how the finished part compared with its estimate."""
    if estimate_done <= 0:
        return max(0.0, total_estimate - estimate_done)
    return max(0.0, total_estimate - estimate_done) * (elapsed / estimate_done)


class Progress:
    """Work done out of a total, for plain lines: they show elapsed() and remaining() themselves."""

    shows_clock = False  # whether a bar shows the elapsed time and the ETA (so that lines need not)

    def __init__(self, total: float, start: float | None = None) -> None:
        self.total = total
        self.done = 0.0
        self.start = time.monotonic() if start is None else start

    def begin(self, point: str) -> None:
        """The point the run works on now (a bar shows it)."""

    def advance(self, amount: float) -> None:
        """amount more work done."""
        self.done += amount

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def remaining(self) -> float:
        """Seconds left: the work left at the pace of the work done."""
        return remaining_estimate(self.total, self.done, self.elapsed())

    def clock(self) -> tuple[float, float] | tuple[None, None]:
        """(elapsed, remaining) for a plain line; (None, None) where a bar shows them."""
        return (None, None) if self.shows_clock else (self.elapsed(), self.remaining())


class EventProgress(Progress):
    """Rank 0's progress when the command shows a bar: each change goes out as an event line on stdout."""

    shows_clock = True

    def __init__(self, total: float, start: float | None = None) -> None:
        super().__init__(total, start)
        self._send({"total": total})

    def begin(self, point: str) -> None:
        self._send({"point": point})

    def advance(self, amount: float) -> None:
        super().advance(amount)
        self._send({"advance": amount})

    @staticmethod
    def _send(event: dict[str, Any]) -> None:
        print(_EVENT + json.dumps(event), flush=True)


def for_rank(rank: int, total: float, start: float | None = None) -> Progress:
    """A rank's progress: events for the command's bar (rank 0, when the command asked), else plain."""
    if rank == 0 and os.environ.get(PROGRESS_ENV) == "events":
        return EventProgress(total, start)
    return Progress(total, start)


def bar_wanted(stream: TextIO | None = None) -> bool:
    """A bar only where the output is a terminal, rich is installed and MSCCLPP_NCCL_PROGRESS is not plain."""
    stream = sys.stdout if stream is None else stream
    if os.environ.get(PROGRESS_ENV) == "plain":
        return False
    isatty = getattr(stream, "isatty", None)
    if isatty is None or not isatty():
        return False
    return importlib.util.find_spec("rich") is not None


class RankView:
    """How a command shows its ranks' output: with a bar (`bar` set) or as plain lines. Use with `with`;
    launch the ranks with env=view.rank_env(env) and output=view.output."""

    def __init__(self, description: str, bar: bool | None = None, console: Any = None) -> None:
        self.bar: Any = None
        self._task: Any = None
        if bar if bar is not None else bar_wanted():
            from rich.progress import (
                BarColumn,
                TaskProgressColumn,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )
            from rich.progress import Progress as RichProgress

            self.bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                TaskProgressColumn(),
                TimeElapsedColumn(),
                TextColumn("ETA"),
                TimeRemainingColumn(),
                TextColumn("{task.fields[point]}"),
                console=console,
                transient=True,  # gone at the end: what stays is what plain output shows
                redirect_stderr=sys.stderr.isatty(),
            )
            self._task = self.bar.add_task(description, total=None, point="")

    def __enter__(self) -> RankView:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.bar is not None:
            self.bar.stop()

    def rank_env(self, env: dict[str, str]) -> dict[str, str]:
        """The ranks' environment: asked for events with a bar, never with plain lines."""
        env = dict(env)
        if self.bar is not None:
            env[PROGRESS_ENV] = "events"
        elif env.get(PROGRESS_ENV) == "events":
            del env[PROGRESS_ENV]
        return env

    @property
    def output(self) -> Callable[[int, bool, bytes], None] | None:
        """The launcher's sink for the ranks' lines (rank, from stderr, line); None: lines as they come."""
        return self._line if self.bar is not None else None

    def _line(self, rank: int, is_stderr: bool, data: bytes) -> None:
        text = data.decode(errors="replace")
        if text.startswith(_EVENT):
            if rank == 0:
                self._event(json.loads(text[len(_EVENT) :]))
            return
        if is_stderr:
            sys.stderr.write(text)  # above the bar where stderr is the terminal (redirected by rich)
            sys.stderr.flush()
            return
        from rich.text import Text

        self.bar.console.print(Text(text.rstrip("\n")), soft_wrap=True)

    def _event(self, event: dict[str, Any]) -> None:
        if "total" in event:
            self.bar.update(self._task, total=float(event["total"]), completed=0)
        if "point" in event:
            self.bar.update(self._task, point=str(event["point"]))
        if "advance" in event:
            self.bar.advance(self._task, float(event["advance"]))


def launch_shown(
    description: str, nranks: int, cmd: list[str], mps: bool, env: dict[str, str], timeout: float
) -> int:
    """Runs `cmd` as `nranks` ranks (the count was asked for, so they may share GPUs), their output shown
    through a RankView; returns the launcher's exit code."""
    from .run import launch

    with RankView(description) as view:
        return launch(
            nranks,
            cmd,
            mps=mps,
            share=True,
            timeout=timeout,
            prefix=False,
            unique_id=False,
            env=view.rank_env(env),
            output=view.output,
        )
