"""CPU tests of the ordering decisions (native/call_order.cc, through tests/call_order_driver.cc): what
each call of one communicator must do so that calls run in issue order across streams and CUDA graphs,
and that a communicator that stays on one stream pays nothing."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = ["tests/call_order_driver.cc", "native/call_order.cc"]


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(tmp_path_factory.mktemp("call_order") / "call_order_driver", SOURCES, [], 0)


def plans(driver: Path, calls: list[str], *flags: str) -> list[str]:
    run = subprocess.run(
        [str(driver), *flags],
        input="\n".join(calls) + "\n",
        capture_output=True,
        text=True,
        env=driver_env(),
        check=True,
    )
    return run.stdout.splitlines()


def test_one_stream_costs_nothing(driver: Path) -> None:
    assert plans(driver, ["eager 7"] * 5) == ["-"] * 5


def test_first_stream_change_records_late_then_every_call_records(driver: Path) -> None:
    got = plans(driver, ["eager 7", "eager 7", "eager 9", "eager 9", "eager 7", "eager 7"])
    assert got == [
        "-",
        "-",
        # The previous call was never recorded: record it on its stream now, then wait for it.
        "record_previous wait_done record_done",
        "record_done",  # same stream: ordered by the stream, but a later change needs the record
        "wait_done record_done",
        "record_done",
    ]


def test_capture_waits_once_and_records_every_call(driver: Path) -> None:
    got = plans(
        driver,
        ["eager 7", "capture 7 1", "capture 7 1", "capture 8 1", "capture 7 2", "eager 7", "eager 7"],
    )
    assert got == [
        "-",
        # A graph launch waits for the communicator's earlier work, which must be behind `done`.
        "record_previous wait_done record_node",
        "record_node",
        "join_capture record_node",  # another stream of the same capture: joined inside the graph
        "wait_done record_node",  # a new capture waits again
        # A graph may be launched at any time now: eager calls wait and record even on one stream.
        "wait_done record_done",
        "wait_done record_done",
    ]


def test_eager_calls_between_captured_calls(driver: Path) -> None:
    got = plans(driver, ["capture 5 3", "eager 6", "capture 5 3", "eager 6"])
    assert got == ["wait_done record_node", "wait_done record_done", "record_node", "wait_done record_done"]


def test_without_graph_mixing_graphs_only_order_their_own_calls(driver: Path) -> None:
    calls = ["eager 7", "capture 7 1", "capture 8 1", "eager 7", "eager 7"]
    assert plans(driver, calls, "--no-graph-mixing") == ["-", "-", "join_capture", "-", "-"]
