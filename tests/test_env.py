"""CPU test of how durations are read from the environment (native/common/parameters.cc, through
tests/env_driver.cc): MSCCLPP_NCCL_WAIT_TIMEOUT becomes the kernels' nanoseconds without an undefined
conversion, whatever the text (a negative value must not wrap around to a huge unsigned one)."""

from __future__ import annotations

import socket
import subprocess
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = [
    "tests/env_driver.cc",
    "native/common/env.cc",
    "native/common/parameters.cc",
    "native/common/logging.cc",
]
MAX_NS = 10**18  # the clamp: 1e9 s


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_driver(tmp_path_factory.mktemp("env") / "env_driver", SOURCES, [], 0)


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("", 0),
        ("0", 0),
        ("2.5", 2_500_000_000),
        ("-1", 0),  # negative: wait forever, not a wrapped huge unsigned
        ("-1e300", 0),
        ("1e300", MAX_NS),
        ("inf", 0),  # not finite: ignored with a warning
        ("nan", 0),
        ("12abc", 0),
    ],
)
def test_wait_timeout_is_clamped_before_it_becomes_nanoseconds(driver: Path, text: str, ns: int) -> None:
    env = driver_env()
    env["MSCCLPP_NCCL_WAIT_TIMEOUT"] = text
    env["NCCL_DEBUG"] = "WARN"
    run = subprocess.run([str(driver)], capture_output=True, text=True, env=env, check=True)
    assert int(run.stdout) == ns, run.stdout + run.stderr
    if text in ("inf", "nan", "12abc"):
        assert "not a number" in run.stderr, run.stderr


def test_debug_file_takes_the_log_with_host_and_pid_substituted(driver: Path, tmp_path: Path) -> None:
    """NCCL_DEBUG_FILE as in NCCL: %h becomes the host name, %p the process id, %% a percent sign."""
    env = driver_env()
    env.update(
        MSCCLPP_NCCL_WAIT_TIMEOUT="inf",
        NCCL_DEBUG="WARN",
        NCCL_DEBUG_FILE=str(tmp_path / "nccl.%h.%p.100%%.log"),
    )
    run = subprocess.Popen([str(driver)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    out, err = run.communicate(timeout=30)
    assert run.returncode == 0, out + err
    expected = tmp_path / f"nccl.{socket.gethostname()}.{run.pid}.100%.log"
    assert expected.exists(), f"{sorted(p.name for p in tmp_path.iterdir())}, stderr: {err}"
    assert "ignoring MSCCLPP_NCCL_WAIT_TIMEOUT=inf: not a number" in expected.read_text()
    assert "not a number" not in err, err
