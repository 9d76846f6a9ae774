"""CuPy (cupy.cuda.nccl) running on our libnccl.so.2 through LD_PRELOAD.

N ranks share the GPU under MPS; every rank runs tests/clients/cupy_worker.py: NcclCommunicator from
the launcher's unique id (made by our library), the collectives CuPy wraps (allReduce, bcast, broadcast,
reduce, allGather, reduceScatter, send/recv in a group), ncclCommInitAll through initAll([0]), a
communicator from CuPy's own get_unique_id(), and the ids (ncclCommCuDevice, ncclCommUserRank,
ncclCommCount); first it checks that our library is mapped, that NCCL's symbols bind to it and that
cupy.cuda.nccl.get_version() (CuPy's runtime query) reports our version.

Choose the items with MSCCLPP_NCCL_CUPY_ITEMS=all_reduce,bcast,... (default: all of them; "library",
"init" and "destroy" always run).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

CLIENTS = Path(__file__).resolve().parent / "clients"
_spec = importlib.util.spec_from_file_location("mscclpp_clients_common", CLIENTS / "common.py")
assert _spec is not None and _spec.loader is not None
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

WORKER = CLIENTS / "cupy_worker.py"
ITEMS_ENV = "MSCCLPP_NCCL_CUPY_ITEMS"
TIMEOUT = 300.0  # the whole launch; each item also has its own deadline in the worker


def cupy_missing() -> bool:
    return importlib.util.find_spec("cupy") is None


@pytest.mark.gpu
@pytest.mark.skipif(cupy_missing(), reason="CuPy is not installed")
@pytest.mark.parametrize("nranks", [2, 4, 8])
def test_cupy_client(nranks: int, nccl_lib: Path) -> None:
    items = common.selected_items(ITEMS_ENV, common.CUPY_ITEMS, always=("library",))
    rc, output = common.launch_client(nranks, WORKER, items, nccl_lib.resolve(), timeout=TIMEOUT)
    common.assert_all_passed(output, rc, nranks, ["init", *items, "destroy"])
