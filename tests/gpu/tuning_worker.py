"""One rank: a few checked all-reduces whose algorithm choice the test reads from the TUNING log."""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from allreduce_worker import Rank, pattern


def main() -> None:
    import cupy as cp

    # `--force-on-rank0 ALGO`: only rank 0 forces an algorithm (the library must notice the disagreement).
    if sys.argv[1:2] == ["--force-on-rank0"] and os.environ.get("MSCCLPP_NCCL_RANK") == "0":
        os.environ["MSCCLPP_NCCL_ALGO"] = sys.argv[2]
    r = Rank()
    for count in (256, 1 << 18):  # 1 KB and 1 MB of float32
        data = cp.asarray(pattern(count, r.rank).astype(np.float32))
        r.all_reduce_raw(data, data, count, "float32", 0)
        r.stream.synchronize()
        assert np.array_equal(data.get(), sum(pattern(count, k) for k in range(r.size))), f"count={count}"
    r.comm.destroy()
    print("PASS tuning")


if __name__ == "__main__":
    main()
