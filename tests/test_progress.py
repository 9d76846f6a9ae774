"""Progress without a GPU: plain lines when the output is not a terminal, when rich is missing or when asked;
rank 0's event lines only when the command draws a bar; the bar moved by those events (where rich is
installed)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import io
import json
import sys
import time
import types
from typing import Any

import pytest

from mscclpp_nccl import bench as b
from mscclpp_nccl import progress as pg

HAS_RICH = importlib.util.find_spec("rich") is not None


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_when_not_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pg.PROGRESS_ENV, raising=False)
    assert not pg.bar_wanted(io.StringIO())
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    with pg.RankView("all_reduce") as view:
        assert view.bar is None and view.output is None
        # A stale request for events is not passed on: nothing would take the event lines out.
        assert view.rank_env({pg.PROGRESS_ENV: "events", "A": "1"}) == {"A": "1"}


def test_plain_when_rich_is_missing_or_plain_is_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pg.PROGRESS_ENV, raising=False)
    monkeypatch.setitem(sys.modules, "rich", None)  # find_spec then finds nothing
    assert not pg.bar_wanted(_Terminal())
    monkeypatch.delitem(sys.modules, "rich")
    monkeypatch.setenv(pg.PROGRESS_ENV, "plain")
    assert not pg.bar_wanted(_Terminal())


@pytest.mark.skipif(not HAS_RICH, reason="rich is not installed (the tools extra)")
def test_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(pg.PROGRESS_ENV, raising=False)
    assert pg.bar_wanted(_Terminal())


def test_ranks_report_events_only_when_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv(pg.PROGRESS_ENV, raising=False)
    plain = pg.for_rank(0, 10.0)
    plain.begin("all_reduce 8 B")
    plain.advance(1.0)
    assert not plain.shows_clock and capsys.readouterr().out == ""
    monkeypatch.setenv(pg.PROGRESS_ENV, "events")
    pg.for_rank(1, 10.0).advance(1.0)  # only rank 0 reports
    assert capsys.readouterr().out == ""
    events = pg.for_rank(0, 10.0)
    events.begin("all_reduce 8 B")
    events.advance(2.5)
    lines = capsys.readouterr().out.splitlines()
    assert all(line.startswith("@@mscclpp-nccl-progress ") for line in lines)
    assert [json.loads(line.split(" ", 1)[1]) for line in lines] == [
        {"total": 10.0},
        {"point": "all_reduce 8 B"},
        {"advance": 2.5},
    ]
    assert events.clock() == (None, None)  # the bar shows it


def test_plain_clock() -> None:
    p = pg.Progress(100.0, start=time.monotonic() - 40.0)
    p.advance(20.0)
    elapsed, left = p.clock()
    assert elapsed == pytest.approx(40.0, abs=1.0) and left == pytest.approx(160.0, abs=5.0)
    assert pg.format_duration(75) == "1 min 15 s"


def test_bench_launches_plainly_when_piped(monkeypatch: pytest.MonkeyPatch) -> None:
    import mscclpp_nccl.run as run

    seen: dict[str, Any] = {}
    cupy = types.ModuleType("cupy")
    cupy.__spec__ = importlib.machinery.ModuleSpec("cupy", None)  # "installed", for the command's check
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    monkeypatch.setattr(run, "visible_gpus", lambda env=None: ["0"])
    monkeypatch.setattr(run, "launch", lambda nranks, cmd, **kwargs: seen.update(kwargs) or 0)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.setenv(pg.PROGRESS_ENV, "events")
    assert b.main(["all_reduce", "-e", "1K"]) == 0
    assert seen["output"] is None and pg.PROGRESS_ENV not in seen["env"]


@pytest.mark.skipif(not HAS_RICH, reason="rich is not installed (the tools extra)")
def test_bar_moves_with_rank_0_events() -> None:
    from rich.console import Console

    screen = io.StringIO()
    console = Console(file=screen, force_terminal=True, width=160)
    with pg.RankView("tuning", bar=True, console=console) as view:
        env = view.rank_env({})
        assert env == {pg.PROGRESS_ENV: "events"} and view.output is not None
        sink = view.output
        sink(0, False, b'@@mscclpp-nccl-progress {"total": 8.0}\n')
        sink(0, False, b'@@mscclpp-nccl-progress {"point": "all_reduce 64 KB"}\n')
        sink(0, False, b'@@mscclpp-nccl-progress {"advance": 2.0}\n')
        sink(1, False, b'@@mscclpp-nccl-progress {"advance": 5.0}\n')  # another rank's: ignored
        sink(0, False, b"[1/4] all_reduce 64 KB: one_shot 10.0 -> best one_shot 10.0 us\n")
        (task,) = view.bar.tasks
        assert (task.total, task.completed, task.fields["point"]) == (8.0, 2.0, "all_reduce 64 KB")
    text = screen.getvalue()
    assert "[1/4] all_reduce 64 KB: one_shot 10.0 -> best one_shot 10.0 us" in text
    assert "@@mscclpp-nccl-progress" not in text
