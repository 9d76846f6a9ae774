"""One rank of a 64 MB bf16 all_reduce through torch.distributed, on whatever allocator the process was
started with (PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True gives cuMem memory, which the library
shares with its peers as file descriptors). Every result is checked exactly (small integers), and the
rank prints the median time per call, so that the pytest side can compare the two allocators. See
app_common.py for how to run it.
"""

from __future__ import annotations

import os
import statistics
import time

import app_common as app
import torch
import torch.distributed as dist
from app_common import ctx

ELEMENTS = 32 << 20  # 64 MB of bf16
CALLS = 30


def all_reduce_64mb(variant: str) -> str:
    expandable = "expandable_segments:True" in os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    assert expandable == (variant == "expandable"), "PYTORCH_CUDA_ALLOC_CONF does not match the item"
    # Small integers: every partial sum is exact in bf16 (|value| <= 8 * 8 < 256).
    base = (torch.arange(ELEMENTS, device=ctx.device) % 8).to(torch.bfloat16)
    tensor = torch.empty_like(base)
    expected = base * ctx.size + sum(range(ctx.size))
    times = []
    for call in range(CALLS):
        tensor.copy_(base + ctx.rank)
        torch.cuda.synchronize()
        start = time.perf_counter()
        dist.all_reduce(tensor)
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
        if call % 10 == 0 or call == CALLS - 1:
            assert torch.equal(tensor, expected), f"call {call}: wrong sum"
    median_us = statistics.median(times[5:]) * 1e6
    app.result("allocator", variant, median_us=median_us)
    return f"{CALLS} calls exact; median {median_us:.0f} us per call"


ITEMS = {
    "allocator_default": lambda: all_reduce_64mb("default"),
    "allocator_expandable": lambda: all_reduce_64mb("expandable"),
}

if __name__ == "__main__":
    app.main(ITEMS, "One rank of a 64 MB all_reduce on the allocator the process was started with.")
