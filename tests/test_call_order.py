"""CPU tests of the ordering decisions (native/call_order.cc, through tests/call_order_driver.cc): what
each call of one communicator must do so that calls run in issue order across streams and CUDA graphs,
and that a communicator that stays on one stream, with kernels that publish tickets, pays nothing."""

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


def test_every_eager_call_records_and_a_change_of_stream_waits(driver: Path) -> None:
    got = plans(driver, ["eager 7", "eager 7", "eager 9", "eager 9", "eager 7"])
    # The record is made during the call, on its own stream: a stream may be destroyed after its calls
    # returned, so no later call may touch it.
    assert got == [
        "record_done",
        "record_done",
        "wait_done record_done",
        "record_done",
        "wait_done record_done",
    ]


def test_capture_waits_once_and_feeds_one_record_node(driver: Path) -> None:
    got = plans(
        driver,
        ["eager 7", "capture 7 1", "capture 7 1", "capture 8 1", "capture 7 2", "eager 7", "eager 7"],
    )
    assert got == [
        "record_done",
        "wait_done record_node",  # a graph launch waits for the communicator's earlier work
        "record_node",
        "join_capture record_node",  # another stream of the same capture: joined inside the graph
        "wait_done record_node",  # a new capture waits again
        # A graph may be launched at any time now: eager calls wait even on one stream.
        "wait_done record_done",
        "wait_done record_done",
    ]


def test_eager_calls_between_captured_calls(driver: Path) -> None:
    got = plans(driver, ["capture 5 3", "eager 6", "capture 5 3", "eager 6"])
    assert got == ["wait_done record_node", "wait_done record_done", "record_node", "wait_done record_done"]


def test_without_graph_mixing_graphs_only_order_their_own_calls(driver: Path) -> None:
    calls = ["eager 7", "capture 7 1", "capture 8 1", "eager 7", "eager 9"]
    assert plans(driver, calls, "--no-graph-mixing") == [
        "record_done",
        "-",
        "join_capture",
        "record_done",
        "wait_done record_done",
    ]


def test_kernel_tickets_mark_eager_calls_and_a_change_of_stream_waits_for_the_latest(driver: Path) -> None:
    calls = ["eager 7 kernel", "eager 7 kernel", "eager 9 kernel", "eager 9", "eager 7 kernel", "eager 9"]
    assert plans(driver, calls) == [
        "ticket 1",  # nothing recorded on the stream: the kernel's last block publishes the ticket
        "ticket 2",
        "wait_ticket 2 ticket 3",
        "record_done",  # work without a ticket (a copy, point-to-point kernels): `done` marks it
        "wait_done ticket 5",  # the ticket handed to the ticketless call is skipped, never waited for
        "wait_ticket 5 record_done",
    ]


def test_a_capture_turns_the_latest_ticket_into_done_once(driver: Path) -> None:
    calls = [
        "eager 7 kernel",
        "capture 8 1",
        "capture 8 1",
        "eager 7 kernel",
        "capture 8 2",
        "eager 9 kernel",
    ]
    assert plans(driver, calls) == [
        "ticket 1",
        # The graph waits for `done` at each launch, so `done` must first mark ticket 1; the stream that
        # ran it is not touched (the communicator's own stream waits for the ticket and records).
        "cover_ticket 1 wait_done record_node",
        "record_node",
        "wait_done record_done",  # once captured, eager calls use `done` and offer no ticket
        "wait_done record_node",
        "wait_done record_done",
    ]


def test_without_graph_mixing_tickets_continue_past_captures(driver: Path) -> None:
    calls = ["eager 7 kernel", "capture 8 1", "eager 9 kernel", "eager 9 kernel"]
    assert plans(driver, calls, "--no-graph-mixing") == [
        "ticket 1",
        "-",
        "wait_ticket 1 ticket 2",
        "ticket 3",
    ]


def test_without_device_waits_every_eager_call_records_done(driver: Path) -> None:
    calls = ["eager 7 kernel", "eager 9 kernel", "eager 9 kernel"]
    assert plans(driver, calls, "--no-tickets") == ["record_done", "wait_done record_done", "record_done"]


def test_marking_every_call_covers_the_latest_ticket_once(driver: Path) -> None:
    """ncclCommRevoke's mark: `done` covers the latest ticket, after which `done` marks the latest work."""
    calls = ["eager 7 kernel", "mark", "mark", "eager 9 kernel", "eager 9", "mark"]
    assert plans(driver, calls) == [
        "ticket 1",
        "cover_ticket 1",
        "-",  # `done` marks it already
        "wait_done ticket 2",  # a later call on another stream waits for `done`, not for ticket 1
        "record_done",
        "-",
    ]


@pytest.mark.parametrize("flags", [(), ("--no-graph-mixing",)])
def test_a_capture_is_remembered_for_suspend(driver: Path, flags: tuple[str, ...]) -> None:
    """ncclCommSuspend is refused once any call was captured (replays would use the freed scratch),
    with graph mixing or without."""
    got = plans(
        driver, ["captured?", "eager 7 kernel", "captured?", "capture 7 1", "eager 7", "captured?"], *flags
    )
    assert [got[0], got[2], got[5]] == ["no", "no", "yes"]
