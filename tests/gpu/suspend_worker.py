"""One rank of the suspend/resume GPU test; run N of them with `python -m mscclpp_nccl.run -n N --mps`.

Every rank checks an all-reduce against NumPy, suspends the world communicator (NCCL_SUSPEND_MEM), and
measures with cudaMemGetInfo what came back to the driver: the ranks of this GPU together must get back
at least 95% of what ncclCommMemStats said suspend would free, and no more than that plus 1 MiB a rank.
A call while suspended must fail naming the suspend; after ncclCommResume the all-reduces are exact
again. Prints `PASS suspend` and the times and bytes measured; any failure raises (non-zero exit).
"""

from __future__ import annotations

import sys
import time

import cupy as cp
import numpy as np

from mscclpp_nccl.binding import NcclError, ffi
from mscclpp_nccl.communicator import Communicator, world_from_env
from mscclpp_nccl.gpus import local_device

NCCL_SUSPEND_MEM = 0x01
STAT_SUSPEND, STAT_SUSPENDED, STAT_PERSIST, STAT_TOTAL = range(4)
SIZES = (4096, 1 << 20)  # float32 elements: LL packets, then chunks or zero-copy
MIB = 1 << 20


def check_all_reduce(comm: Communicator, stream: cp.cuda.Stream) -> None:
    for count in SIZES:
        data = cp.asarray(np.arange(count, dtype=np.float32) % 5 + comm.rank)
        comm.all_reduce(data, stream=stream)
        stream.synchronize()
        expected = sum(np.arange(count, dtype=np.float64) % 5 + r for r in range(comm.size))
        assert np.array_equal(cp.asnumpy(data), expected.astype(np.float32)), f"all_reduce of {count} wrong"


def stat(comm: Communicator, which: int) -> int:
    value = ffi.new("uint64_t*")
    comm._nccl.check(comm._nccl.lib.ncclCommMemStats(comm.handle, which, value), comm.handle)
    return int(value[0])


def free_bytes() -> int:
    cp.cuda.runtime.deviceSynchronize()
    return int(cp.cuda.runtime.memGetInfo()[0])


def main() -> int:
    rank, size, uid = world_from_env()
    device = local_device()
    start = time.perf_counter()
    comm = Communicator(size, rank, uid, device=device)
    init_ms = (time.perf_counter() - start) * 1e3
    nccl, lib = comm._nccl, comm._nccl.lib
    stream = cp.cuda.Stream(non_blocking=True)
    check_all_reduce(comm, stream)
    devices = cp.zeros(size, dtype=cp.int32)
    devices[rank] = cp.cuda.runtime.getDevice() if device is None else device
    comm.all_reduce(devices, stream=stream)  # every rank's device: who shares this GPU
    stream.synchronize()
    same_gpu = int((cp.asnumpy(devices) == int(devices[rank])).sum())
    releasable, total = stat(comm, STAT_SUSPEND), stat(comm, STAT_TOTAL)
    assert 0 < releasable <= total and stat(comm, STAT_SUSPENDED) == 0, (releasable, total)
    assert stat(comm, STAT_PERSIST) == total - releasable

    cp.get_default_memory_pool().free_all_blocks()
    comm.barrier()
    before = free_bytes()
    comm.barrier()  # nobody suspends while another still measures
    start = time.perf_counter()
    nccl.check(lib.ncclCommSuspend(comm.handle, NCCL_SUSPEND_MEM), comm.handle)
    suspend_ms = (time.perf_counter() - start) * 1e3
    freed = free_bytes() - before  # every rank of the GPU has released its scratch when suspend returns
    assert suspend_ms < 100, f"suspend took {suspend_ms:.1f} ms"
    expected = same_gpu * releasable
    assert freed >= 0.95 * expected, f"suspend freed {freed} B of the {expected} B expected"
    assert freed <= expected + same_gpu * MIB, f"suspend freed {freed} B, more than the {expected} B expected"
    assert stat(comm, STAT_SUSPENDED) == 1 and stat(comm, STAT_SUSPEND) == 0
    try:
        comm.all_reduce(cp.ones(16, dtype=cp.float32), stream=stream)
    except NcclError as e:
        assert "suspended" in str(e), e
    else:
        raise AssertionError("a call on a suspended comm was accepted")
    try:
        nccl.check(lib.ncclCommSuspend(comm.handle, NCCL_SUSPEND_MEM), comm.handle)
    except NcclError as e:
        assert "suspended" in str(e), e
    else:
        raise AssertionError("a second suspend was accepted")

    start = time.perf_counter()
    nccl.check(lib.ncclCommResume(comm.handle), comm.handle)
    resume_ms = (time.perf_counter() - start) * 1e3
    # No longer than an init (with slack for a noisy shared GPU: both take a few milliseconds here).
    assert resume_ms <= max(2 * init_ms, 50), f"resume took {resume_ms:.1f} ms, init {init_ms:.1f} ms"
    assert stat(comm, STAT_SUSPENDED) == 0 and stat(comm, STAT_SUSPEND) == releasable
    check_all_reduce(comm, stream)
    try:
        nccl.check(lib.ncclCommResume(comm.handle), comm.handle)
    except NcclError as e:
        assert "not suspended" in str(e), e
    else:
        raise AssertionError("a resume of a running comm was accepted")
    comm.destroy()
    print(
        f"RESULT suspend rank {rank}: {releasable / MIB:.1f} MiB of {total / MIB:.1f} MiB released, "
        f"{freed / MIB:.1f} MiB back on the GPU ({same_gpu} ranks on it), suspend {suspend_ms:.1f} ms, "
        f"resume {resume_ms:.1f} ms, init {init_ms:.1f} ms",
        flush=True,
    )
    print("PASS suspend", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
