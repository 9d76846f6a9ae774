"""CPU tests of passing file descriptors between ranks (native/transport/fd_passing.cc, which windows use
for cuMem memory): tests/fd_passing_driver.cc, built with g++, runs as several processes over the TCP
bootstrap and hands each peer a memfd whose contents it reads back. No GPU or CUDA is needed."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from host_build import build_driver, driver_env

SOURCES = [
    "native/bootstrap/abort_link.cc",
    "native/bootstrap/bootstrap.cc",
    "native/bootstrap/socket.cc",
    "native/common/env.cc",
    "native/common/json.cc",
    "native/common/logging.cc",
    "native/transport/fd_passing.cc",
    "tests/fd_passing_driver.cc",
]
RANK_TIMEOUT_S = 60


@pytest.fixture(scope="session")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("fd_passing") / "fd_passing_driver"
    return build_driver(out, SOURCES, [], 2, ["-pthread"])


@pytest.mark.parametrize("nranks,silent", [(2, -1), (4, -1), (5, 2)])
def test_every_rank_gets_every_peers_descriptor(
    driver: Path, tmp_path: Path, nranks: int, silent: int
) -> None:
    idfile = tmp_path / "id"
    args = [[str(driver), str(idfile), str(r), str(nranks), str(silent)] for r in range(nranks)]
    procs = [
        subprocess.Popen(a, env=driver_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for a in args
    ]
    outputs = []
    for proc in procs:
        try:
            out, _ = proc.communicate(timeout=RANK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0] + "\n<killed: timed out>"
        outputs.append((proc.returncode, out))
    for rank, (code, out) in enumerate(outputs):
        assert code == 0 and f"OK rank {rank}" in out, f"rank {rank} exited {code}:\n{out}"
