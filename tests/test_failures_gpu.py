"""The failure contract PyTorch's watchdog relies on, on the GPU (scenarios in tests/gpu/failure_worker.py):
a rank killed with SIGKILL at init or in the middle of queued all-reduces, ncclCommAbort while another
thread is blocked in split, shrink or window registration, and ncclCommRevoke of calls that wait for a
rank which stopped calling, then a shrink without it. Every launch is bounded (about 2 minutes)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from multirank import ROOT, run_ranks, wait_for_device

WORKER = ROOT / "tests" / "gpu" / "failure_worker.py"
LAUNCH_TIMEOUT = 110.0
BOOTSTRAP_TIMEOUT = "5"


def _launch(nranks: int, tmp_path: Path, scenario: str, **env: str) -> str:
    wait_for_device()
    output = run_ranks(nranks, WORKER, str(tmp_path), scenario, timeout=LAUNCH_TIMEOUT, env=env)
    # Shown with -s: where the time goes (RESULT lines, and the teardown and abort phases at INFO).
    for line in output.splitlines():
        if "RESULT" in line or "teardown" in line or "ncclCommAbort:" in line:
            print(line)
    return output


def _assert_passed(output: str, scenario: str, expected: int) -> None:
    passes = output.count(f"PASS {scenario}")
    assert passes == expected, f"{scenario}: {passes} of {expected} ranks passed\n{output[-6000:]}"


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
@pytest.mark.parametrize("when", ["before", "during"])
def test_rank_killed_at_init(nranks: int, when: str, tmp_path: Path) -> None:
    output = _launch(nranks, tmp_path, f"init:{when}", MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT=BOOTSTRAP_TIMEOUT)
    assert "victim: killed as planned" in output, output[-6000:]
    _assert_passed(output, f"init:{when}", nranks - 1)


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
@pytest.mark.parametrize("ending", ["abort", "destroy"])
def test_rank_killed_mid_collective(nranks: int, ending: str, tmp_path: Path) -> None:
    # No kernel wait timeout: only the peer-loss detection may end the survivors' waits.
    env = {"MSCCLPP_NCCL_WAIT_TIMEOUT": "0", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,BOOTSTRAP"}
    output = _launch(nranks, tmp_path, f"collective:{ending}", **env)
    assert "victim: killed as planned" in output, output[-6000:]
    _assert_passed(output, f"collective:{ending}", nranks - 1)
    results = re.findall(r"RESULT detect_ms=([\d.]+) " + ending + r"_ms=([\d.]+)", output)
    assert len(results) == nranks - 1, output[-6000:]
    for detect_ms, end_ms in results:
        assert float(detect_ms) < 1000, output[-6000:]
        assert float(end_ms) < (1000 if ending == "abort" else 5000), output[-6000:]


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
@pytest.mark.parametrize("call", ["split", "shrink", "window"])
def test_abort_while_a_call_is_blocked(nranks: int, call: str, tmp_path: Path) -> None:
    if call == "shrink" and nranks < 3:
        pytest.skip("a shrink excludes a rank and waits for another: it cannot block at 2 ranks")
    env = {"MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT": "60", "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT"}
    output = _launch(nranks, tmp_path, f"blocked:{call}", **env)
    _assert_passed(output, f"blocked:{call}", nranks)


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_revoke_ends_waiting_calls_and_shrink_goes_on(nranks: int, tmp_path: Path) -> None:
    output = _launch(nranks, tmp_path, "revoke:shrink")
    _assert_passed(output, "revoke:shrink", nranks)


@pytest.mark.gpu
@pytest.mark.parametrize("nranks", [2, 4])
def test_stall_report_names_the_call_and_the_late_rank(nranks: int) -> None:
    """The last rank stops calling for 6 s; with MSCCLPP_NCCL_STALL_REPORT=2 every other rank prints one
    NCCL WARN line naming the communicator, the stalled all_reduce by its number and the late rank, and
    then completes the call exactly when the late rank comes."""
    wait_for_device()
    env = {"MSCCLPP_NCCL_STALL_REPORT": "2", "MSCCLPP_NCCL_WAIT_TIMEOUT": "0"}
    output = run_ranks(
        nranks, ROOT / "tests" / "gpu" / "stall_worker.py", "6", timeout=LAUNCH_TIMEOUT, env=env
    )
    assert output.count("PASS stall") == nranks, output[-6000:]
    late = nranks - 1
    reports = [ln for ln in output.splitlines() if "NCCL WARN" in ln and "MSCCLPP_NCCL_STALL_REPORT" in ln]
    print("\n".join(reports))
    assert len(reports) == nranks - 1, output[-6000:]  # one line per waiting rank, none from the late one
    stalled = re.search(r"STALLED_CALL (\S+ #\d+)", output)
    assert stalled is not None, output[-6000:]
    for line in reports:
        assert re.search(r"commHash 0x[0-9a-f]{16} rank \d+: ", line), line
        assert stalled.group(1) in line and line.rstrip().split("no data yet from rank ")[1].startswith(
            f"{late}."
        ), line
