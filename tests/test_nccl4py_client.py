"""NVIDIA's nccl4py (`nccl.core`) over this library, put under it with LD_PRELOAD as users do: the
queries it makes without a GPU (its version report, a unique id, the `params` mapping and
`dump_params`, no encryption, an empty simulated group) reach our exports and answer as stock's do.
Skips where nccl4py is not installed (`pip install nccl4py 'cuda-bindings~=13.0'`; CI installs it)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("nccl") is None or importlib.util.find_spec("nccl.core") is None,
    reason="nccl4py is not installed",
)

SCRIPT = textwrap.dedent(
    """
    import json
    import nccl.core as nc
    from nccl.bindings import nccl as raw

    version = nc.get_version()
    nc.get_unique_id()
    raw.set_encryption(raw.EncryptionConfig().ptr)  # no encryption: accepted, as stock accepts it
    raw.group_start()
    simulated = raw.group_simulate_end().estimated_time  # an empty group costs nothing
    try:
        nc.params["NCCL_NO_SUCH_PARAMETER"]
        unknown = "found"
    except KeyError:
        unknown = "KeyError"
    print(json.dumps({
        "path": str(version.libnccl.path),
        "version": str(version.libnccl.version),
        "keys": sorted(nc.params),
        "scratch": nc.params["MSCCLPP_NCCL_SCRATCH_BYTES"],
        "stall": nc.params["MSCCLPP_NCCL_STALL_REPORT"],
        "unknown": unknown,
        "simulated": simulated,
    }))
    nc.dump_params()
    """
)


def test_nccl4py_reads_our_parameters(nccl_lib: Path) -> None:
    env = {**os.environ, "LD_PRELOAD": str(nccl_lib), "MSCCLPP_NCCL_SCRATCH_BYTES": "65536"}
    env.pop("MSCCLPP_NCCL_STALL_REPORT", None)
    command = [sys.executable, "-c", SCRIPT]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    first, _, dump = done.stdout.partition("\n")
    report = json.loads(first)
    assert Path(report["path"]).resolve() == nccl_lib.resolve(), report["path"]
    assert report["version"].startswith("2.32"), report["version"]
    assert "MSCCLPP_NCCL_SCRATCH_BYTES" in report["keys"] and "NCCL_DEBUG" in report["keys"]
    assert "MSCCLPP_NCCL_COMM_SECRET" not in report["keys"]
    assert (report["scratch"], report["stall"], report["unknown"]) == ("65536", "60", "KeyError")
    assert report["simulated"] == 0.0
    assert dump.startswith("=== ncclParam Registry Dump ===")
    assert "    Current value=65536 set_by=Environment default=8388608" in dump
