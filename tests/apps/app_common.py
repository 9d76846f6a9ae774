"""What the application workers in tests/apps/ share: the command line, the rank's context, the steps
every run has (init, library, destroy), a tiny transformer, deterministic data and comparisons.

Each worker is one rank of a real PyTorch program (backend "nccl" on the launcher's device for it;
ranks share the GPU). It trains or runs a model the distributed way and, on every rank, the same model
on one device without any communication, and compares the two. Run N of them through the launcher:

    python -m mscclpp_nccl.run -n 4 --mps --timeout 150 -- \\
        env LD_PRELOAD=$PWD/mscclpp_nccl/lib/libnccl.so.2 python tests/apps/ddp_worker.py --library

Without LD_PRELOAD (and without --library) the same script runs on PyTorch's own NCCL, as a control
(PyTorch's bundled NCCL refuses several ranks on one GPU; give each rank a GPU, or preload a stock NCCL
2.30+ with NCCL_MULTI_RANK_GPU_ENABLE=1). With --cpu it runs on the CPU over gloo, which checks the
workers' own logic on a machine without a GPU.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import ColwiseParallel, ParallelStyle, RowwiseParallel

# tests/clients/common.py: deadlines, PASS/FAIL lines and the check that our library is the one bound.
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients"))
import common

SEED = 1234


@dataclass
class Ctx:
    rank: int = 0
    size: int = 1
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    timeout: float = 90.0
    cpu: bool = False


ctx = Ctx()


def parse_args(items: Sequence[str], description: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("items", nargs="*", help=f"items to run (default: all): {', '.join(items)}")
    parser.add_argument("--timeout", type=float, default=90.0, help="seconds allowed per step (default 90)")
    parser.add_argument("--library", action="store_true", help="first check that our libnccl.so.2 is bound")
    parser.add_argument("--cpu", action="store_true", help="run on the CPU over gloo (checks the checks)")
    args = parser.parse_args()
    args.items = common.chosen_items(parser, args.items, items)
    return args


def step_init() -> str:
    ctx.rank, ctx.size = common.world()
    master = f"tcp://{os.environ['MASTER_ADDR']}:{os.environ['MASTER_PORT']}"
    timeout = timedelta(seconds=ctx.timeout + 30)  # our deadline fires first, with stacks
    if ctx.cpu:
        ctx.device = torch.device("cpu")
        dist.init_process_group(
            "gloo", init_method=master, rank=ctx.rank, world_size=ctx.size, timeout=timeout
        )
    else:
        # The launcher's device for this rank: LOCAL_RANK, or a shared GPU's index under --mps.
        ctx.device = torch.device("cuda", common.device_index())
        torch.cuda.set_device(ctx.device)
        dist.init_process_group(
            "nccl",
            init_method=master,
            rank=ctx.rank,
            world_size=ctx.size,
            timeout=timeout,
            device_id=ctx.device,  # eager init: the communicator is created here
        )
    # Exact fp32 on both sides of every comparison: TF32 would add 1e-3 relative errors of its own.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    return (
        f"rank {ctx.rank}/{ctx.size} on {ctx.device}, torch {torch.__version__}, backend {dist.get_backend()}"
    )


def step_destroy() -> str:
    start = time.monotonic()
    dist.destroy_process_group()
    return f"destroy_process_group took {common.elapsed(start)}"


def main(items: dict[str, Callable[[], str]], description: str) -> None:
    args = parse_args(list(items), description)
    ctx.timeout, ctx.cpu = args.timeout, args.cpu
    steps: list[tuple[str, Callable[[], str | None]]] = [("init", step_init)]
    if args.library:
        steps.append(("library", common.check_our_library))
    steps += [(name, items[name]) for name in args.items]
    steps.append(("destroy", step_destroy))
    for name, fn in steps:
        if not common.run_step(name, fn, args.timeout):
            common.hard_exit(1)
    print(f"rank {ctx.rank}: passed {' '.join(args.items)}", flush=True)


def result(app: str, variant: str, **values: float) -> None:
    """The line a person quotes: `RESULT fsdp2 fp32 nranks=4 max_rel_loss_diff=3.1e-06 ...`."""
    fields = " ".join(f"{k}={v:.3g}" for k, v in values.items())
    print(f"RESULT {app} {variant} nranks={ctx.size} {fields}", flush=True)


# --- comparisons ---------------------------------------------------------------------------------------


def rel_diff(got: torch.Tensor, ref: torch.Tensor, scale: float = 0.0) -> float:
    """max |got - ref| / max(max |ref|, scale): one number per tensor that does not blow up where single
    elements of ref are near 0. `scale` is for tensors that are all near 0 (a gradient that vanishes in
    exact arithmetic is rounding noise, to be judged against the gradients around it)."""
    g, r = got.detach().double().cpu(), ref.detach().double().cpu()
    if g.shape != r.shape:
        raise AssertionError(f"shape {tuple(g.shape)} against reference {tuple(r.shape)}")
    if not torch.isfinite(g).all():
        return math.inf
    return (g - r).abs().max().item() / max(r.abs().max().item(), scale, 1e-30)


def rel_loss_diff(losses: Sequence[float], ref: Sequence[float]) -> float:
    if len(losses) != len(ref):
        raise AssertionError(f"{len(losses)} losses against {len(ref)} reference losses")
    diffs = [abs(a - b) / abs(b) if math.isfinite(a) else math.inf for a, b in zip(losses, ref, strict=True)]
    return max(diffs)


def require(what: str, value: float, bound: float, detail: str = "") -> None:
    if not value <= bound:  # also catches NaN
        raise AssertionError(f"{what} = {value:.3g} exceeds {bound:.3g}" + (f"; {detail}" if detail else ""))


def loss_table(losses: Sequence[float], ref: Sequence[float]) -> str:
    return ", ".join(f"{k}: {a:.6f}/{b:.6f}" for k, (a, b) in enumerate(zip(losses, ref, strict=True)))


def mean_over_ranks(value: torch.Tensor) -> torch.Tensor:
    """The mean of a scalar over the ranks (SUM then divide: gloo has no AVG)."""
    t = value.detach().float().reshape(1).clone()
    dist.all_reduce(t)
    return t / ctx.size


# --- data ------------------------------------------------------------------------------------------------

VOCAB, SEQ, DIM, HEADS, LAYERS = 64, 16, 64, 8, 2  # HEADS divisible by 8 ranks for tensor parallelism
BATCH = 2  # sequences per rank and step


def generator(*key: int) -> torch.Generator:
    g = torch.Generator()
    seed = SEED
    for k in key:
        seed = seed * 1_000_003 + k + 1
    g.manual_seed(seed % (1 << 62))
    return g


def tokens(step: int, rank: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Rank `rank`'s batch at `step` (inputs, targets), on ctx.device. The target of position t is
    x[t] + 32 * (x[t-1] mod 2) mod VOCAB: half of it is learnt in a few steps (the loss falls from ~4.2 to
    ~1 in 20), the other half needs attention to the previous token."""
    x = torch.randint(0, VOCAB, (BATCH, SEQ), generator=generator(step, rank))
    prev = torch.cat([torch.zeros(BATCH, 1, dtype=x.dtype), x[:, :-1]], dim=1)
    return x.to(ctx.device), ((x + (prev % 2) * (VOCAB // 2)) % VOCAB).to(ctx.device)


def batch_tokens(step: int, ranks: Iterable[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """The batches of `ranks` at `step`, concatenated in that order."""
    parts = [tokens(step, r) for r in ranks]
    return torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])


def global_tokens(step: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Every rank's batch at `step`, concatenated in rank order."""
    return batch_tokens(step, range(ctx.size))


# --- model ------------------------------------------------------------------------------------------------


class Attention(nn.Module):
    """Causal self-attention written out (no fused kernel: the same arithmetic at every batch size).
    Heads are inferred from q's width, so a column-sharded q/k/v gives each rank its own heads."""

    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.head_dim = dim // heads
        self.q = nn.Linear(dim, dim)
        self.k = nn.Linear(dim, dim)
        self.v = nn.Linear(dim, dim)
        self.o = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape

        def heads(y: torch.Tensor) -> torch.Tensor:
            return y.view(b, t, -1, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.q(x)), heads(self.k(x)), heads(self.v(x))
        scores = (q @ k.transpose(-2, -1)) * self.head_dim**-0.5
        causal = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        weights = scores.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        return self.o((weights @ v).transpose(1, 2).reshape(b, t, -1))


class Mlp(nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, dim: int = DIM, heads: int = HEADS) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.norm2 = nn.LayerNorm(dim)
        self.mlp = Mlp(dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(VOCAB, DIM)
        self.pos = nn.Parameter(torch.randn(SEQ, DIM) * 0.02)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = nn.LayerNorm(DIM)
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.pos
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


def block_tp_plan() -> dict[str, ParallelStyle]:
    """Tensor parallelism in a Block, for parallelize_module: q, k, v and the MLP's first layer split by
    columns, the attention output and the MLP's second layer by rows, so that each rank gets its own
    heads (HEADS is divisible by 2, 4 and 8) and its own slice of the MLP's hidden layer."""
    return {
        "attn.q": ColwiseParallel(),
        "attn.k": ColwiseParallel(),
        "attn.v": ColwiseParallel(),
        "attn.o": RowwiseParallel(),
        "mlp.fc1": ColwiseParallel(),
        "mlp.fc2": RowwiseParallel(),
    }


def new_transformer() -> Transformer:
    """The same initial weights on every rank and for every copy."""
    torch.manual_seed(SEED)
    return Transformer().to(ctx.device)


def lm_loss(logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    # In fp32 whatever the compute dtype, as a mixed-precision training loop does.
    return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), target.reshape(-1))


def sgd(params: Iterable[nn.Parameter], foreach: bool | None = None) -> torch.optim.Optimizer:
    # SGD with momentum is linear in the gradient, so rounding differences stay as small as they start
    # (Adam's first steps divide by |g| and would turn noise on zero gradients into full-size updates).
    return torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=foreach)


STEPS = 20


def train_reference(model: nn.Module, steps: int = STEPS, batches: int | None = None) -> list[float]:
    """`model` trained on one device over the global batch of each step: the batches of ranks 0 to
    `batches` - 1 (every rank's by default; fewer where several ranks train on one batch)."""
    opt = sgd(model.parameters())
    losses = []
    for step in range(steps):
        x, y = batch_tokens(step, range(ctx.size if batches is None else batches))
        loss = lm_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.detach())
    return [float(v) for v in torch.stack(losses).cpu()]


def train_distributed(
    model: nn.Module, steps: int = STEPS, batch: int | None = None, foreach: bool | None = None
) -> list[float]:
    """`model` (wrapped for data parallelism) trained on batch `batch` of each step (this rank's by
    default); the losses are the mean over ranks, i.e. the loss of the global batch, comparable with
    train_reference's (where the ranks of a tensor-parallel group share a batch, they share its loss,
    and the mean over ranks is still the mean over batches)."""
    opt = sgd(model.parameters(), foreach)
    losses = []
    for step in range(steps):
        x, y = tokens(step, ctx.rank if batch is None else batch)
        loss = lm_loss(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(mean_over_ranks(loss))
    return [float(v) for v in torch.cat(losses).cpu()]


def full_tensor(t: torch.Tensor) -> torch.Tensor:
    """A parameter or gradient made whole: a DTensor's full tensor (gathered over its mesh), or `t`."""
    return t.full_tensor() if isinstance(t, DTensor) else t


def max_param_diff(
    model: nn.Module, ref: nn.Module, full: Callable[[torch.Tensor], torch.Tensor] = lambda p: p
) -> float:
    """The largest relative difference between the parameters of `model` (each made whole by `full`)
    and those of `ref`, checking that both list the same parameters in the same order."""
    worst = 0.0
    for (name, p), (ref_name, q) in zip(model.named_parameters(), ref.named_parameters(), strict=True):
        assert name == ref_name, f"parameter order differs: {name} against {ref_name}"
        worst = max(worst, rel_diff(full(p), q))
    return worst


def check_training(
    app: str,
    variant: str,
    losses: Sequence[float],
    ref_losses: Sequence[float],
    param_diff: float,
    bound: float,
    **extra: float,
) -> str:
    """Prints the RESULT line of a training run against its reference (with `extra` values) and requires
    the losses and the final parameters within `bound` (relative); returns the PASS line's summary."""
    diff = rel_loss_diff(losses, ref_losses)
    result(app, variant, max_rel_loss_diff=diff, max_rel_param_diff=param_diff, **extra)
    require(
        "max relative loss difference",
        diff,
        bound,
        f"step: {app}/reference: {loss_table(losses, ref_losses)}",
    )
    require("max relative parameter difference", param_diff, bound)
    return (
        f"losses {losses[0]:.4f} -> {losses[-1]:.4f} over {len(losses)} steps; max relative loss difference "
        f"{diff:.3g}, final parameters {param_diff:.3g} (bound {bound:g})"
    )
