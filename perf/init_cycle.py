"""Init cost and idle device memory of a communicator, measured as a CuPy program sees them.

Each rank repeats: make a unique id (rank 0, handed over on a world communicator), ncclCommInitRank
through `cupy.cuda.nccl`, one 1-element all-reduce, a synchronize, and destroy. Rank 0 prints the
median and fastest cycle. Before the cycles, every rank holds one idle communicator while the device's
free memory is read: what the ranks on the GPU took, divided among them, is a communicator's device
memory (all ranks on one GPU). Run it under the launcher with the library preloaded, ours or stock's:

    python -m mscclpp_nccl.run -n 4 --mps -- env LD_PRELOAD=$LIB python perf/init_cycle.py [--cycles 20]

(stock NCCL on a shared GPU also needs NCCL_MULTI_RANK_GPU_ENABLE=1). Output: one line
`RESULT init_cycle nranks=N median_ms=... min_ms=... idle_mib_per_rank=...` from rank 0.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import cupy as cp
import numpy as np
from cupy.cuda import nccl

UINT8, FLOAT32, SUM = 1, 7, 0


def communicator(size: int, raw: bytes, rank: int) -> nccl.NcclCommunicator:
    """NcclCommunicator from a 128-byte id: CuPy 14 takes bytes, older CuPy a tuple of signed chars."""
    try:
        return nccl.NcclCommunicator(size, raw, rank)
    except TypeError:
        return nccl.NcclCommunicator(size, tuple(b - 256 if b > 127 else b for b in raw), rank)


def unique_id() -> bytes:
    """ncclGetUniqueId's 128 bytes: CuPy 14 gives bytes, older CuPy a tuple of signed chars."""
    uid = nccl.get_unique_id()
    return uid if isinstance(uid, bytes) else bytes(v & 0xFF for v in uid)


def world_id(rank: int) -> bytes:
    """The world communicator's id, made by the library under test (stock NCCL cannot read the launcher's
    id): rank 0 writes it to a file named after the launcher's id, the others wait for the file."""
    path = f"/tmp/init_cycle_{os.environ['MSCCLPP_NCCL_UNIQUE_ID'][:32]}.id"
    if rank == 0:
        raw = unique_id()
        with open(path + ".tmp", "wb") as f:
            f.write(raw)
        os.replace(path + ".tmp", path)
        return raw
    deadline = time.monotonic() + 60
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise TimeoutError(f"rank 0 wrote no id to {path}")
        time.sleep(0.01)
    with open(path, "rb") as f:
        return f.read()


def fresh_id(world: nccl.NcclCommunicator, rank: int, stream: cp.cuda.Stream) -> bytes:
    """A new unique id made by rank 0 and broadcast on `world`."""
    buf = cp.zeros(128, dtype=cp.uint8)
    if rank == 0:
        buf.set(np.frombuffer(unique_id(), dtype=np.uint8))
    world.broadcast(buf.data.ptr, buf.data.ptr, 128, UINT8, 0, stream.ptr)
    stream.synchronize()
    return cp.asnumpy(buf).tobytes()


def free_bytes() -> int:
    cp.cuda.runtime.deviceSynchronize()
    return int(cp.cuda.runtime.memGetInfo()[0])


def one_all_reduce(comm: nccl.NcclCommunicator, stream: cp.cuda.Stream) -> None:
    value = cp.ones(1, dtype=cp.float32)
    comm.allReduce(value.data.ptr, value.data.ptr, 1, FLOAT32, SUM, stream.ptr)
    stream.synchronize()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cycles", type=int, default=20, help="timed cycles (after two untimed)")
    args = parser.parse_args()
    rank, size = int(os.environ["MSCCLPP_NCCL_RANK"]), int(os.environ["MSCCLPP_NCCL_WORLD_SIZE"])
    cp.cuda.Device(int(os.environ.get("MSCCLPP_NCCL_DEVICE", "0"))).use()
    stream = cp.cuda.Stream(non_blocking=True)
    world = communicator(size, world_id(rank), rank)
    one_all_reduce(world, stream)

    new_id = fresh_id(world, rank, stream)
    one_all_reduce(world, stream)  # every rank has its id before any reads free memory
    before = free_bytes()
    one_all_reduce(world, stream)
    idle = communicator(size, new_id, rank)
    one_all_reduce(idle, stream)
    one_all_reduce(world, stream)  # every rank holds its idle communicator
    taken = before - free_bytes()
    idle.destroy()

    times = []
    for cycle in range(args.cycles + 2):
        new_id = fresh_id(world, rank, stream)
        start = time.perf_counter()
        comm = communicator(size, new_id, rank)
        one_all_reduce(comm, stream)
        comm.destroy()
        if cycle >= 2:
            times.append((time.perf_counter() - start) * 1e3)
    world.destroy()
    if rank == 0:
        median, fastest = statistics.median(times), min(times)
        print(
            f"RESULT init_cycle nranks={size} median_ms={median:.2f} min_ms={fastest:.2f} "
            f"idle_mib_per_rank={taken / size / 2**20:.1f}",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
