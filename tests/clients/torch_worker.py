"""One rank of a real torch.distributed program (backend "nccl") run against our libnccl.so.2.

Run N of them with our library in LD_PRELOAD (tests/test_torch_client.py does this):

    python -m mscclpp_nccl.run -n 4 --mps --timeout 300 -- \\
        env LD_PRELOAD=$PWD/mscclpp_nccl/lib/libnccl.so.2 python tests/clients/torch_worker.py [ITEM ...]

Every rank computes every expected value locally (each rank's input is a function of its rank), checks
its own results exactly (avg within rounding), and prints "PASS <item>" per item. Items run in a fixed
order; name some to run only those (`--list` shows them). The steps "init" (init_process_group) and "destroy"
(destroy_process_group) always run. Each step has a deadline (--timeout); on a failure the rank prints
FAIL and exits at once with a non-zero code (the launcher then stops the others), unless --keep-going.

Without LD_PRELOAD and without the "library" item this runs on PyTorch's stock NCCL, which checks the
checks themselves.
"""

from __future__ import annotations

import time
from datetime import timedelta

import common
import torch
import torch.distributed as dist

DEV = torch.device("cuda", common.device_index())  # the launcher's device for this rank
POISON = 1234  # outside every pattern below, so an element never written is always caught
COUNTS = (1, 7, 4099, 1 << 20)


class Ctx:
    rank: int
    size: int
    timeout: float


ctx = Ctx()


# --- inputs and checks ---------------------------------------------------------------------------------


def wide(count: int, rank: int, dtype: torch.dtype, salt: int = 0) -> torch.Tensor:
    """Rank `rank`'s input on the host, in float64 (floats) or int64 (integers).

    Floats are small integers in [-8, 8], exact in bf16/fp16, and so are their sums over 8 ranks.
    Integers are above 2**50, where float64 is no longer exact, so a reduction that went through a
    floating-point type would show."""
    i = torch.arange(count, dtype=torch.int64)
    if dtype.is_floating_point:
        return ((i * 7 + rank * 13 + salt * 5) % 17 - 8).to(torch.float64)
    return (rank + 1) * (1 << 50) + i * 3 + salt - 5


def device_input(count: int, rank: int, dtype: torch.dtype, salt: int = 0) -> torch.Tensor:
    return wide(count, rank, dtype, salt).to(dtype).to(DEV)


def poisoned(count: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.full((count,), POISON, dtype=dtype, device=DEV)


def check(what: str, got: torch.Tensor, expected: torch.Tensor, tol: float = 0.0) -> None:
    """`got` (on the GPU) must equal `expected` (host, any dtype: cast to got's) exactly, or within
    `tol` (absolute and relative) when tol > 0."""
    g = got.detach().cpu().reshape(-1)
    e = expected.reshape(-1).to(g.dtype)
    if g.shape != e.shape:
        raise AssertionError(f"{what}: got {tuple(g.shape)} elements, expected {tuple(e.shape)}")
    if tol > 0:
        bad = ~torch.isclose(g.double(), e.double(), rtol=tol, atol=tol)
    else:
        bad = g != e
    if bad.any():
        idx = bad.nonzero().flatten()
        first = idx[:4].tolist()
        raise AssertionError(
            f"{what}: {idx.numel()} of {g.numel()} elements wrong; at {first}: "
            f"got {[g[k].item() for k in first]}, expected {[e[k].item() for k in first]}"
        )


def total(count: int, ranks: list[int], dtype: torch.dtype, salt: int = 0) -> torch.Tensor:
    return torch.stack([wide(count, k, dtype, salt) for k in ranks]).sum(0)


def name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


# --- steps ---------------------------------------------------------------------------------------------


def step_init() -> str:
    ctx.rank, ctx.size = common.world()
    torch.cuda.set_device(DEV)
    dist.init_process_group(
        backend="nccl",
        init_method="env://",
        device_id=DEV,  # eager init: the communicator is created here, and new_group can split it
        timeout=timedelta(seconds=ctx.timeout + 30),  # our deadline fires first, with stacks
    )
    assert dist.get_rank() == ctx.rank and dist.get_world_size() == ctx.size, "rank/size mismatch"
    return (
        f"rank {ctx.rank}/{ctx.size}, torch {torch.__version__}; torch.cuda.nccl.version() = "
        f"{torch.cuda.nccl.version()} (the NCCL header torch was built with, not the library it runs on)"
    )


def item_library() -> str:
    # torch.cuda.nccl.version() is a compile-time constant (NCCL_MAJOR/MINOR/PATCH of torch's build);
    # torch's runtime query is c10d::getNcclVersion(), i.e. ncclGetVersion through the same symbol lookup
    # checked here; it is logged as "ProcessGroupNCCL environments: NCCL version: X" at
    # TORCH_CPP_LOG_LEVEL=INFO, which tests/test_torch_client.py checks.
    return common.check_our_library()


def item_all_reduce() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.int64):
        for count in COUNTS:
            t = device_input(count, r, dtype)
            dist.all_reduce(t)
            check(f"sum {name(dtype)} count={count}", t, total(count, list(range(n)), dtype))
            cases += 1
    for dtype, tol in ((torch.float32, 1e-6), (torch.bfloat16, 2.0**-5)):
        for count in COUNTS:
            t = device_input(count, r, dtype, salt=1)
            dist.all_reduce(t, op=dist.ReduceOp.AVG)
            check(f"avg {name(dtype)} count={count}", t, total(count, list(range(n)), dtype, 1) / n, tol)
            cases += 1
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for count in COUNTS:
            t = device_input(count, r, dtype, salt=2)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            expected = torch.stack([wide(count, k, dtype, 2) for k in range(n)]).amax(0)
            check(f"max {name(dtype)} count={count}", t, expected)
            cases += 1
    # Asynchronous, as DDP and FSDP call it: several in flight, then wait.
    ts = [device_input(4099 * (k + 1), r, torch.float32, salt=k) for k in range(4)]
    works = [dist.all_reduce(t, async_op=True) for t in ts]
    for k, (t, w) in enumerate(zip(ts, works, strict=True)):
        w.wait()
        check(f"async sum #{k}", t, total(t.numel(), list(range(n)), torch.float32, k))
    cases += len(ts)
    return f"{cases} cases: sum (float32, bfloat16, float16, int64), avg, max, 4 async; counts {COUNTS}"


def item_all_gather() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for count in (1, 4099, 1 << 18):
            inp = device_input(count, r, dtype, salt=3)
            out = poisoned(n * count, dtype)
            dist.all_gather_into_tensor(out, inp)
            expected = torch.cat([wide(count, k, dtype, 3) for k in range(n)])
            check(f"{name(dtype)} count={count}", out, expected)
            cases += 1
    # The stacked form: output of shape (world, count).
    inp = device_input(513, r, torch.float32, salt=4)
    out = torch.full((n, 513), POISON, dtype=torch.float32, device=DEV)
    dist.all_gather_into_tensor(out, inp)
    check("stacked float32 count=513", out, torch.stack([wide(513, k, torch.float32, 4) for k in range(n)]))
    return f"{cases + 1} cases (float32, bfloat16, int64; flat and stacked output)"


def item_reduce_scatter() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for count in (1, 4099, 1 << 18):
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX):
                # Chunk j of every rank's input goes to rank j.
                inp = torch.cat([wide(count, r, dtype, 10 + j) for j in range(n)]).to(dtype).to(DEV)
                out = poisoned(count, dtype)
                dist.reduce_scatter_tensor(out, inp, op=op)
                mine = torch.stack([wide(count, k, dtype, 10 + r) for k in range(n)])
                expected = mine.sum(0) if op == dist.ReduceOp.SUM else mine.amax(0)
                check(f"{op} {name(dtype)} count={count}", out, expected)
                cases += 1
    return f"{cases} cases (sum and max; float32, bfloat16, int64)"


def code(src: int, dst: int, count: int, dtype: torch.dtype) -> torch.Tensor:
    """What `src` sends to `dst`: every element names its sender, receiver and position."""
    i = torch.arange(count, dtype=torch.int64)
    if dtype.is_floating_point:  # below 2**24: exact in float32
        return (src * 100 + dst + (i % 97) * 1000).to(torch.float64)
    return src * 1_000_000_000 + dst * 1_000_000 + i


def item_all_to_all() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in (torch.float32, torch.int64):
        for c in (1, 1000, 1 << 16):
            inp = torch.cat([code(r, j, c, dtype) for j in range(n)]).to(dtype).to(DEV)
            out = poisoned(n * c, dtype)
            dist.all_to_all_single(out, inp)
            check(f"{name(dtype)} {c} per peer", out, torch.cat([code(j, r, c, dtype) for j in range(n)]))
            cases += 1
    return f"{cases} cases (equal splits; float32, int64)"


def split(src: int, dst: int, unit: int) -> int:
    """Elements `src` sends to `dst`: 0, 1 or 2 units (so some pairs send nothing), +1 to itself."""
    return ((src + 2 * dst) % 3) * unit + (1 if src == dst else 0)


def item_all_to_all_unequal() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in (torch.float32, torch.int64):
        for unit in (1, 777, 1 << 14):
            sends = [split(r, j, unit) for j in range(n)]
            recvs = [split(j, r, unit) for j in range(n)]
            inp = torch.cat([code(r, j, sends[j], dtype) for j in range(n)]).to(dtype).to(DEV)
            out = poisoned(sum(recvs), dtype)
            dist.all_to_all_single(out, inp, output_split_sizes=recvs, input_split_sizes=sends)
            expected = torch.cat([code(j, r, recvs[j], dtype) for j in range(n)])
            check(f"{name(dtype)} unit={unit} sends={sends}", out, expected)
            cases += 1
    return f"{cases} cases (unequal splits with empty ones; float32, int64)"


def item_broadcast() -> str:
    r, n = ctx.rank, ctx.size
    cases = 0
    for dtype in (torch.float32, torch.bfloat16, torch.int64):
        for count in COUNTS:
            for root in sorted({0, n - 1}):
                t = device_input(count, root, dtype, salt=5) if r == root else poisoned(count, dtype)
                dist.broadcast(t, src=root)
                check(f"{name(dtype)} count={count} root={root}", t, wide(count, root, dtype, 5))
                cases += 1
    return f"{cases} cases (float32, bfloat16, int64; roots 0 and {n - 1})"


def item_send_recv() -> str:
    r, n = ctx.rank, ctx.size
    nxt, prv = (r + 1) % n, (r - 1) % n
    cases = 0
    for dtype in (torch.float32, torch.int64):
        for count in (1, 4099, 1 << 20):
            # Both ways round the ring at once: a goes forward, b goes backward.
            a, b = device_input(count, r, dtype, salt=20), device_input(count, r, dtype, salt=21)
            ra, rb = poisoned(count, dtype), poisoned(count, dtype)
            ops = [
                dist.P2POp(dist.isend, a, nxt),
                dist.P2POp(dist.isend, b, prv),
                dist.P2POp(dist.irecv, ra, prv),
                dist.P2POp(dist.irecv, rb, nxt),
            ]
            for req in dist.batch_isend_irecv(ops):
                req.wait()
            check(f"forward {name(dtype)} count={count}", ra, wide(count, prv, dtype, 20))
            check(f"backward {name(dtype)} count={count}", rb, wide(count, nxt, dtype, 21))
            cases += 1
    return f"{cases} cases (batch_isend_irecv, both ways round the ring)"


def item_barrier() -> str:
    dist.barrier()  # lines the ranks up
    late = 1.0
    if ctx.rank == 0:
        time.sleep(late)
    start = time.monotonic()
    dist.barrier()
    waited = time.monotonic() - start
    if ctx.rank != 0 and waited < late / 2:
        raise AssertionError(f"barrier returned after {waited:.3f} s while rank 0 arrived {late} s late")
    for _ in range(10):
        dist.barrier()
    return f"waited {waited:.2f} s for rank 0 (which came {late} s late), then 10 more"


def item_new_group() -> str:
    r, n = ctx.rank, ctx.size
    evens, odds = list(range(0, n, 2)), list(range(1, n, 2))
    # Every rank creates every group, in the same order.
    g_even = dist.new_group(evens)
    g_odd = dist.new_group(odds) if odds else None
    mine, group = (evens, g_even) if r % 2 == 0 else (odds, g_odd)
    assert dist.get_world_size(group) == len(mine), "group size"
    assert dist.get_rank(group) == mine.index(r), "group rank"
    for count in (7, 4099, 1 << 20):
        t = device_input(count, r, torch.float32, salt=30)
        dist.all_reduce(t, group=group)
        check(f"group {mine} count={count}", t, total(count, mine, torch.float32, 30))
    # The world communicator still works next to the new ones.
    t = device_input(4099, r, torch.float32, salt=31)
    dist.all_reduce(t)
    check("world after the split", t, total(4099, list(range(n)), torch.float32, 31))
    return f"all_reduce in group {mine} of even/odd ranks, then in the world"


def item_graph() -> str:
    r, n = ctx.rank, ctx.size
    big, small = 1 << 20, 1024
    static_in = device_input(big, r, torch.float32)
    out1, out2 = torch.zeros_like(static_in), torch.zeros_like(static_in)
    out3 = torch.zeros(small, dtype=torch.float32, device=DEV)
    # Warm up on a side stream, as torch asks before capturing.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            out1.copy_(static_in)
            dist.all_reduce(out1)
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        # Three dependent collectives in one graph: step counters must advance inside the graph.
        out1.copy_(static_in)
        dist.all_reduce(out1)
        out2.copy_(out1 * 2)
        dist.all_reduce(out2)
        out3.copy_(static_in[:small])
        dist.all_reduce(out3)
    replays = 8
    base = total(big, list(range(n)), torch.float32)
    for k in range(replays):
        static_in.copy_((wide(big, r, torch.float32) + k).to(torch.float32).to(DEV))
        graph.replay()
        torch.cuda.synchronize()
        first = base + n * k
        check(f"replay {k}: first all_reduce", out1, first)
        check(f"replay {k}: second all_reduce", out2, first * 2 * n)
        check(f"replay {k}: small all_reduce", out3, first[:small])
    graph.reset()
    return f"3 captured all_reduces ({big} and {small} floats) replayed {replays} times with new input"


def step_destroy() -> str:
    start = time.monotonic()
    dist.destroy_process_group()
    return f"destroy_process_group took {common.elapsed(start)}"


ITEMS = {
    "library": item_library,
    "all_reduce": item_all_reduce,
    "all_gather": item_all_gather,
    "reduce_scatter": item_reduce_scatter,
    "all_to_all": item_all_to_all,
    "all_to_all_unequal": item_all_to_all_unequal,
    "broadcast": item_broadcast,
    "send_recv": item_send_recv,
    "barrier": item_barrier,
    "new_group": item_new_group,
    "graph": item_graph,
}
assert tuple(ITEMS) == common.TORCH_ITEMS, "common.TORCH_ITEMS is out of date"


def main() -> None:
    args = common.parse_args(common.TORCH_ITEMS, "One rank of the torch.distributed client test.")
    ctx.timeout = args.timeout
    if not common.run_step("init", step_init, args.timeout):
        common.hard_exit(1)
    if not common.run_items(ITEMS, args.items, args.timeout, args.keep_going):
        common.hard_exit(1)
    if not common.run_step("destroy", step_destroy, args.timeout):
        common.hard_exit(1)
    # A normal exit from here: interpreter and library teardown must not hang either (the launcher's
    # timeout catches it if it does).
    print(f"rank {ctx.rank}: {len(args.items)} items passed: {' '.join(args.items)}", flush=True)


if __name__ == "__main__":
    main()
