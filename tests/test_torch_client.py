"""PyTorch (torch.distributed, backend "nccl") running on our libnccl.so.2 through LD_PRELOAD.

N ranks share the GPU under MPS; every rank runs tests/clients/torch_worker.py, which checks that our
library is mapped and that NCCL's symbols bind to it, then checks each collective against values it
computes itself. PyTorch loads its own stock libnccl.so.2 by full path, so LD_PRELOAD is what puts ours
under it; the test also reads PyTorch's own runtime version query (logged by ProcessGroupNCCL at
TORCH_CPP_LOG_LEVEL=INFO) to show that torch itself talked to our library.

Choose the items with MSCCLPP_NCCL_TORCH_ITEMS=all_reduce,barrier,... (default: all of them; "library",
"init" and "destroy" always run).
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

CLIENTS = Path(__file__).resolve().parent / "clients"
_spec = importlib.util.spec_from_file_location("mscclpp_clients_common", CLIENTS / "common.py")
assert _spec is not None and _spec.loader is not None
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

WORKER = CLIENTS / "torch_worker.py"
ITEMS_ENV = "MSCCLPP_NCCL_TORCH_ITEMS"
TIMEOUT = 300.0  # the whole launch; each item also has its own deadline in the worker
_TORCH_VERSION_LINE = re.compile(
    r"^\[(\d+)\] .*ProcessGroupNCCL environments: NCCL version: (\d+)\.(\d+)\.(\d+)"
)


def torch_missing() -> bool:
    return importlib.util.find_spec("torch") is None


@pytest.mark.gpu
@pytest.mark.requires("torch")  # no CuPy: the ranks drive the GPU through PyTorch
@pytest.mark.skipif(torch_missing(), reason="PyTorch is not installed")
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_torch_client(nranks: int, nccl_lib: Path) -> None:
    lib = nccl_lib.resolve()
    items = common.selected_items(ITEMS_ENV, common.TORCH_ITEMS, always=("library",))
    rc, output = common.launch_client(
        nranks,
        WORKER,
        items,
        lib,
        timeout=TIMEOUT,
        # INFO makes ProcessGroupNCCL log the NCCL version it got from ncclGetVersion at run time.
        extra_env={"TORCH_CPP_LOG_LEVEL": "INFO"},
    )
    common.assert_all_passed(output, rc, nranks, ["init", *items, "destroy"])

    # torch.cuda.nccl.version() is the header torch was built with; c10d::getNcclVersion() asks the
    # library at run time. Every process group of every rank must have seen ours.
    want = common.version_tuple(common.library_version(lib))
    seen: dict[int, set[tuple[int, int, int]]] = {}
    for line in output.splitlines():
        m = _TORCH_VERSION_LINE.match(line)
        if m:
            seen.setdefault(int(m.group(1)), set()).add((int(m.group(2)), int(m.group(3)), int(m.group(4))))
    assert sorted(seen) == list(range(nranks)), (
        f"ProcessGroupNCCL did not log its NCCL version on every rank (ranks seen: {sorted(seen)}); "
        f"TORCH_CPP_LOG_LEVEL=INFO should make it\n{common.tail(output)}"
    )
    wrong = {r: v for r, v in seen.items() if v != {want}}
    assert not wrong, f"torch's runtime NCCL version is not ours ({'.'.join(map(str, want))}): {wrong}"
