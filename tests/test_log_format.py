"""CPU tests of the log format (native/common/logging.cc, through tests/log_format_driver.cc): lines as stock
NCCL 2.32 prints them, so that tools that parse `host:pid:tid [dev] NCCL INFO|WARN` read ours, and the
version banner `mscclpp-nccl X.Y.Z (commit), NCCL ABI 2.32.3`, also in NCCL_DEBUG_FILE."""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from host_build import REPO, build_driver, driver_env

import mscclpp_nccl

SOURCES = ["tests/log_format_driver.cc", "native/common/logging.cc"]
HOST = socket.gethostname().split(".")[0].replace("%", "-").replace("/", "-")
ABI = "2.32.3"
BANNER_UNKNOWN = f"mscclpp-nccl {mscclpp_nccl.__version__} (commit unknown), NCCL ABI {ABI}"
# What a parser of stock NCCL logs looks for.
PREFIX = re.compile(r"^(?P<host>[^:\s]+):(?P<pid>\d+):(?P<tid>\d+) \[(?P<dev>\d+)\] ")
STAMP = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\] "


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    flags = [f'-DMSCCLPP_NCCL_VERSION="{mscclpp_nccl.__version__}"']
    return build_driver(tmp_path_factory.mktemp("log_format") / "log_format_driver", SOURCES, [], 0, flags)


def run(driver: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(driver), *args], capture_output=True, text=True, env=driver_env() | env, timeout=30, check=False
    )


def test_warn_line_as_stock_prints_it(driver: Path) -> None:
    done = run(driver, "warn", NCCL_DEBUG="WARN")
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    # The banner first (plain, as stock's "NCCL version" line at WARN), then an empty line and the WARN.
    assert lines[0] == BANNER_UNKNOWN
    assert lines[1] == ""
    m = re.fullmatch(STAMP + r"(?P<rest>.*)", lines[2])
    assert m, lines[2]
    prefix = PREFIX.match(m.group("rest"))
    assert prefix and prefix.group("host") == HOST and prefix.group("dev") == "0", lines[2]
    assert prefix.group("pid") == prefix.group("tid")  # the main thread
    tail = m.group("rest")[prefix.end() :]
    assert re.fullmatch(r"log_format_driver\.cc:\d+ \(main\) NCCL WARN driver warning here", tail), tail


def test_fail_names_the_api_function_and_keeps_the_last_error(driver: Path) -> None:
    done = run(driver, "fail", "lasterror", NCCL_DEBUG="WARN")
    warn = [ln for ln in done.stderr.splitlines() if "NCCL WARN" in ln]
    assert len(warn) == 1, done.stderr
    assert re.search(
        r" log_format_driver\.cc:\d+ \(ncclDriverCall\) NCCL WARN driver call: bad argument 7$", warn[0]
    )
    assert done.stdout == "driver call: bad argument 7\n"


def test_info_lines_start_with_the_banner(driver: Path) -> None:
    done = run(driver, "info", "warn", "info", NCCL_DEBUG="INFO")
    lines = [ln for ln in done.stderr.splitlines() if ln]
    assert [PREFIX.match(ln) is not None for ln in lines] == [True, True, False, True]  # the WARN is stamped
    assert lines[0].endswith(f"] NCCL INFO {BANNER_UNKNOWN}")
    assert lines[1].endswith("] NCCL INFO driver info 42")
    assert re.fullmatch(STAMP + PREFIX.pattern[1:] + r".*NCCL WARN driver warning here", lines[2])
    assert sum(BANNER_UNKNOWN in ln for ln in lines) == 1  # once per process


def test_version_level_prints_the_banner_alone(driver: Path) -> None:
    done = run(driver, "warn", "info", "banner", "banner", NCCL_DEBUG="VERSION")
    assert done.stderr == BANNER_UNKNOWN + "\n"


def test_nothing_without_nccl_debug_but_what_must_be_seen(driver: Path) -> None:
    assert run(driver, "warn", "info", "banner").stderr == ""
    always = run(driver, "always").stderr.splitlines()
    assert len(always) == 2 and always[0] == "" and always[1].endswith("(main) NCCL WARN driver stall")


def test_banner_goes_to_the_debug_file_with_the_commit(driver: Path, tmp_path: Path) -> None:
    """The commit comes from build_info.json beside the library (here, beside the driver)."""
    local = tmp_path / "log_format_driver"
    shutil.copy(driver, local)
    (tmp_path / "build_info.json").write_text(json.dumps({"git_commit": "0123456789abcdef0123-dirty"}))
    log = tmp_path / "nccl.%h.log"
    done = run(local, "banner", NCCL_DEBUG="VERSION", NCCL_DEBUG_FILE=str(log))
    assert done.stderr == ""
    text = (tmp_path / f"nccl.{socket.gethostname()}.log").read_text()
    assert text == f"mscclpp-nccl {mscclpp_nccl.__version__} (0123456789ab-dirty), NCCL ABI {ABI}\n"


def test_timestamp_levels_and_format(driver: Path) -> None:
    done = run(
        driver,
        "info",
        "warn",
        NCCL_DEBUG="INFO",
        NCCL_DEBUG_TIMESTAMP_LEVELS="INFO",
        NCCL_DEBUG_TIMESTAMP_FORMAT="<%H:%M:%S.%3f>_",
    )
    lines = [ln for ln in done.stderr.splitlines() if ln]
    assert all(
        re.match(r"<\d\d:\d\d:\d\d\.\d{3}> " + PREFIX.pattern[1:] + "NCCL INFO", ln) for ln in lines[:2]
    )
    assert PREFIX.match(lines[2]) and "NCCL WARN" in lines[2]  # WARN no longer stamped


def test_abi_version_matches_the_header() -> None:
    header = (REPO / "include" / "nccl.h").read_text()
    parts = [re.search(rf"#define NCCL_{k} (\d+)", header) for k in ("MAJOR", "MINOR", "PATCH")]
    abi = ".".join(m.group(1) for m in parts if m)
    version_h = (REPO / "native" / "common" / "version.h").read_text()
    assert f'#define MSCCLPP_NCCL_ABI_VERSION "{abi}"' in version_h
    assert abi == ".".join(map(str, mscclpp_nccl.NCCL_VERSION)) == ABI


def test_setup_passes_the_package_version() -> None:
    """The version is written once (mscclpp_nccl/__init__.py); setup.py hands it to the compiler."""
    setup = (REPO / "setup.py").read_text()
    assert "-DMSCCLPP_NCCL_VERSION=" in setup and '"mscclpp_nccl" / "__init__.py"' in setup
    pyproject = (REPO / "pyproject.toml").read_text()
    assert 'version = { attr = "mscclpp_nccl.__version__" }' in pyproject
