"""One rank of the stall-report test; run N of them with `python -m mscclpp_nccl.run -n N --mps`.

    stall_worker.py LATE_SECONDS

Every rank makes a few all-reduces; then the last rank stops calling for LATE_SECONDS while the others
issue the next all-reduce (its number on the communicator is printed) and wait for it. With
MSCCLPP_NCCL_STALL_REPORT below LATE_SECONDS, each waiting rank prints one NCCL WARN line naming the call
and the late rank, and keeps waiting: when the late rank calls, every result is exact.
"""

from __future__ import annotations

import sys
import time

import cupy as cp
import numpy as np

from mscclpp_nccl.communicator import Communicator, world_from_env
from mscclpp_nccl.gpus import local_device

COUNT = 4096
WARMUP_CALLS = 3


def main() -> None:
    late_seconds = float(sys.argv[1])
    rank, size, uid = world_from_env()
    comm = Communicator(size, rank, uid, device=local_device())
    data = cp.empty(COUNT, dtype=cp.float32)
    for call in range(WARMUP_CALLS + 1):
        if call == WARMUP_CALLS:
            if rank == size - 1:
                time.sleep(late_seconds)
            else:
                # The call about to wait: its number on the communicator, as the report gives it.
                print(f"STALLED_CALL all_reduce #{call + 1}", flush=True)
        data[:] = cp.arange(COUNT, dtype=cp.float32) + rank + call
        comm.all_reduce(data)
        cp.cuda.get_current_stream().synchronize()
        expected = size * (np.arange(COUNT, dtype=np.float64) + call) + size * (size - 1) / 2
        if not np.array_equal(cp.asnumpy(data).astype(np.float64), expected):
            raise AssertionError(f"rank {rank}: wrong result in call {call + 1}")
    comm.destroy()
    print(f"PASS stall rank {rank}", flush=True)


if __name__ == "__main__":
    main()
