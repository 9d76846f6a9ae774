"""One rank of the grow GPU tests; run N (even) of them with `python -m mscclpp_nccl.run -n N --mps`.

    grow_worker.py DIR SCENARIO

The lower half of the ranks hold a communicator of their own, the upper half none; rank 0 makes the id
of a larger one (ncclCommGetUniqueId) and hands it over through DIR, a directory the ranks share, to the
new ranks. As NCCL's header says, the holders grow with rank -1, rank 0 passing the id and the other
holders NULL (they get it over their communicator), and the new ranks join with a NULL communicator, the
id and their rank (ncclCommGrow); the grown communicator's all-reduce is checked against NumPy. Scenarios:

- split        the lower half's communicator is a split of the world.
- shrink       the lower half's communicator is a shrink of the world that leaves out the upper half
               (ncclCommShrink then ncclCommGrow back to every rank).

Prints `PASS <scenario>`; any failure raises (non-zero exit).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import cupy as cp
import numpy as np

from mscclpp_nccl.binding import ffi
from mscclpp_nccl.communicator import Communicator, world_from_env
from mscclpp_nccl.gpus import local_device

COUNT = 1 << 18  # float32 elements: a size that runs on LL packets and one that maps, in turn
SIZES = (4096, COUNT)


def wait_for(path: Path, limit_s: float = 60.0) -> None:
    deadline = time.monotonic() + limit_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"never appeared: {path}")
        time.sleep(0.01)


def lower_half(world: Communicator, scenario: str) -> Communicator | None:
    half = world.size // 2
    if scenario == "split":
        return world.split(0 if world.rank < half else -1, world.rank)
    if world.rank >= half:
        return None  # left out: takes no part in the shrink
    nccl, lib = world._nccl, world._nccl.lib
    upper = ffi.new("int[]", list(range(half, world.size)))
    new = ffi.new("ncclComm_t*")
    nccl.check(lib.ncclCommShrink(world.handle, upper, world.size - half, new, ffi.NULL, 0), world.handle)
    return Communicator._wrap(nccl, new[0], world.device)


def main() -> int:
    shared, scenario = Path(sys.argv[1]), sys.argv[2]
    rank, size, uid = world_from_env()
    assert size % 2 == 0, "an even number of ranks"
    world = Communicator(size, rank, uid, device=local_device())
    nccl, lib = world._nccl, world._nccl.lib
    small = lower_half(world, scenario)
    assert (small is not None) == (rank < size // 2)
    if small is not None:
        assert small.size == size // 2 and small.rank == rank, (small.size, small.rank)
    id_file = shared / "grow_id"
    grow_id = ffi.new("ncclUniqueId*")
    if rank == 0:
        assert small is not None
        nccl.check(lib.ncclCommGetUniqueId(small.handle, grow_id), small.handle)
        (shared / "grow_id.tmp").write_bytes(bytes(ffi.buffer(grow_id)))
        (shared / "grow_id.tmp").rename(id_file)
    if small is None:  # a new rank: the id comes out of band
        wait_for(id_file)
        ffi.memmove(grow_id, id_file.read_bytes(), ffi.sizeof("ncclUniqueId"))
    new = ffi.new("ncclComm_t*")
    parent = small.handle if small is not None else ffi.NULL
    given = grow_id if small is None or rank == 0 else ffi.NULL
    nccl.check(lib.ncclCommGrow(parent, size, given, -1 if small is not None else rank, new, ffi.NULL))
    grown = Communicator._wrap(nccl, new[0], world.device)
    assert grown.size == size and grown.rank == rank, (grown.size, grown.rank)
    stream = cp.cuda.Stream(non_blocking=True)
    for count in SIZES:
        mine = np.arange(count, dtype=np.float32) % 7 + rank
        data = cp.asarray(mine)
        grown.all_reduce(data, stream=stream)
        stream.synchronize()
        expected = sum(np.arange(count, dtype=np.float64) % 7 + r for r in range(size))
        got = cp.asnumpy(data)
        assert np.array_equal(got, expected.astype(np.float32)), f"count {count}: {got[:8]} != {expected[:8]}"
    if small is not None:  # the communicator it grew from still works
        values = cp.full(64, rank + 1, dtype=cp.float32)
        small.all_reduce(values, stream=stream)
        stream.synchronize()
        assert bool(cp.all(values == sum(r + 1 for r in range(size // 2))))
    grown.destroy()
    if small is not None:
        small.destroy()
    world.destroy()
    print(f"PASS {scenario}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
