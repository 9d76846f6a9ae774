"""One rank of parallelisms composed on a DeviceMesh, as real training jobs combine them; each trains for
20 steps in fp32 and is checked against the same model trained on one device over the global batch,
without any communication: the loss at every step within 1e-4 relative, and the final parameters (those
this rank holds, made whole) within 1e-4 of each tensor's largest value.

Items (meshes for 8 ranks; at 4 ranks every mesh is 2 x 2):
- fsdp2_tp_4x2, fsdp2_tp_2x4: a (data, tensor) mesh of (N/2, 2) and (2, N/2). In every transformer
  block q, k, v and the MLP's fc1 are ColwiseParallel, the attention output and fc2 RowwiseParallel on
  the tensor dimension; then fully_shard each block and the root on the data dimension. The ranks of a
  tensor-parallel group train on one batch.
- hsdp_2d: fully_shard on a 2-D (replicate, shard) mesh of (2, N/2): reduce-scatter within a shard group,
  all-reduce across the replicas.
- fsdp2_no_reshard: FSDP2 over all ranks with reshard_after_forward=False (parameters stay gathered from
  the forward pass to the backward pass).
- pipeline_dp: torch.distributed.pipelining over a (pipeline, data) mesh of (2, N/2): the transformer
  cut into 2 PipelineStages under Schedule1F1B (4 micro-batches), each stage sharded with FSDP2 over
  the data dimension.
- moe_all_to_all: a top-1 mixture-of-experts layer with 2 experts per rank, on a (data, expert) mesh of
  (2, N/2): tokens go to their experts' ranks and back with dist.all_to_all_single, uneven splits, on the
  expert dimension; the router is a fixed table (per token id, skewed towards the last experts), so the
  one-device reference routes exactly alike. Also checks every gradient at every step.

See app_common.py for how to run it.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

import app_common as app
import torch
import torch.distributed as dist
from app_common import ctx
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.fsdp import fully_shard
from torch.distributed.pipelining import PipelineStage, Schedule1F1B
from torch.distributed.tensor.parallel import parallelize_module

# fp32 epsilon is 1.2e-7. Sharded reductions and tensor-parallel partial sums add in other orders than
# one device does, and micro-batches and expert groups change matmul shapes: a few epsilons per step,
# which 20 steps of momentum SGD keep of the same order (observed on the CPU: below 1e-6).
BOUND = 1e-4


def half() -> int:
    if ctx.size < 4 or ctx.size % 2:
        raise AssertionError(f"the composed meshes need an even number of ranks, 4 or more, not {ctx.size}")
    return ctx.size // 2


def mesh_2d(shape: tuple[int, int], names: tuple[str, str]) -> DeviceMesh:
    return init_device_mesh(ctx.device.type, shape, mesh_dim_names=names)


# --- FSDP2 x tensor parallelism, HSDP, FSDP2 without resharding ------------------------------------------


def item_fsdp2_tp(variant: str, dp: int, tp: int) -> str:
    mesh = mesh_2d((dp, tp), ("dp", "tp"))
    model = app.new_transformer()
    ref = copy.deepcopy(model)
    ref_losses = app.train_reference(ref, batches=dp)
    for block in model.blocks:
        parallelize_module(block, mesh["tp"], app.block_tp_plan())
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(model, mesh=mesh["dp"])
    # The parameters are DTensors on two meshes (the 2-D one where tensor parallelism split them, the
    # data one elsewhere); CUDA's default foreach update would mix both in one multi-tensor kernel,
    # which DTensor refuses.
    losses = app.train_distributed(model, batch=mesh.get_local_rank("dp"), foreach=False)
    param_diff = app.max_param_diff(model, ref, app.full_tensor)
    summary = app.check_training("fsdp2_tp", variant, losses, ref_losses, param_diff, BOUND)
    return f"mesh (data {dp}, tensor {tp}): {summary}"


def item_fsdp2_tp_4x2() -> str:
    return item_fsdp2_tp("4x2", half(), 2)


def item_fsdp2_tp_2x4() -> str:
    return item_fsdp2_tp("2x4", 2, half())


def data_parallel(app_name: str, variant: str, mesh: DeviceMesh, **shard_options: bool) -> str:
    """FSDP2 on `mesh` (each block, then the root) with `shard_options`, every rank on its own batch."""
    model = app.new_transformer()
    ref = copy.deepcopy(model)
    ref_losses = app.train_reference(ref)
    for block in model.blocks:
        fully_shard(block, mesh=mesh, **shard_options)
    fully_shard(model, mesh=mesh, **shard_options)
    losses = app.train_distributed(model)
    param_diff = app.max_param_diff(model, ref, app.full_tensor)
    return f"mesh {tuple(mesh.shape)}: " + app.check_training(
        app_name, variant, losses, ref_losses, param_diff, BOUND
    )


def item_hsdp_2d() -> str:
    return data_parallel("hsdp", "2d", mesh_2d((2, half()), ("replicate", "shard")))


def item_fsdp2_no_reshard() -> str:
    mesh = init_device_mesh(ctx.device.type, (ctx.size,))
    return data_parallel("fsdp2", "no_reshard", mesh, reshard_after_forward=False)


# --- a pipeline of data-parallel stages ----------------------------------------------------------------

MICROBATCHES = 4
BATCHES_PER_GROUP = 2  # ranks' batches (app.BATCH sequences each) per data-parallel group and step


class FirstStage(nn.Module):
    """The embeddings and the first half of the blocks of `t` (its parameters, shared)."""

    def __init__(self, t: app.Transformer) -> None:
        super().__init__()
        self.embed, self.pos = t.embed, t.pos
        self.blocks = nn.ModuleList(t.blocks[: len(t.blocks) // 2])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.embed(x) + self.pos
        for block in self.blocks:
            h = block(h)
        return h


class LastStage(nn.Module):
    """The second half of the blocks of `t`, its final norm and its head (its parameters, shared)."""

    def __init__(self, t: app.Transformer) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(t.blocks[len(t.blocks) // 2 :])
        self.norm, self.head = t.norm, t.head

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            h = block(h)
        return self.head(self.norm(h))


def item_pipeline_dp() -> str:
    dp = half()
    mesh = mesh_2d((2, dp), ("pp", "dp"))
    stage_index, dp_rank = mesh.get_local_rank("pp"), mesh.get_local_rank("dp")
    model = app.new_transformer()
    ref = copy.deepcopy(model)
    ref_losses = app.train_reference(ref, batches=dp * BATCHES_PER_GROUP)

    kinds = (FirstStage, LastStage)
    module, ref_module = kinds[stage_index](model), kinds[stage_index](ref)
    for block in module.blocks:
        fully_shard(block, mesh=mesh["dp"])
    fully_shard(module, mesh=mesh["dp"])
    stage = PipelineStage(module, stage_index, 2, ctx.device, group=mesh["pp"].get_group())
    # Each micro-batch's loss is its mean and the schedule divides the gradients by the micro-batches:
    # the gradient of the batch's mean loss, which FSDP2 then averages over the data dimension.
    schedule = Schedule1F1B(stage, n_microbatches=MICROBATCHES, loss_fn=app.lm_loss)
    opt = app.sgd(module.parameters())
    first = dp_rank * BATCHES_PER_GROUP
    losses = []
    for step in range(app.STEPS):
        x, y = app.batch_tokens(step, range(first, first + BATCHES_PER_GROUP))
        opt.zero_grad(set_to_none=True)
        micro_losses: list[torch.Tensor] = []
        if stage_index == 0:
            schedule.step(x)
        else:
            schedule.step(target=y, losses=micro_losses)
        opt.step()
        # The last stage's groups hold the losses (equal micro-batches: the mean of theirs is the
        # batch's); the sum over all ranks divided by the groups is the global batch's loss.
        loss = (
            torch.stack(micro_losses).mean().reshape(1) if micro_losses else torch.zeros(1, device=ctx.device)
        )
        dist.all_reduce(loss)
        losses.append(loss / dp)
    got = [float(v) for v in torch.cat(losses).cpu()]
    param_diff = app.max_param_diff(module, ref_module, app.full_tensor)
    summary = app.check_training("pipeline", "dp", got, ref_losses, param_diff, BOUND)
    where = f"stage {stage_index} of 2, data-parallel rank {dp_rank} of {dp}"
    return f"{where}, {MICROBATCHES} micro-batches: {summary}"


# --- mixture of experts over all_to_all_single ----------------------------------------------------------

EXPERTS_PER_RANK = 2


class AllToAll(torch.autograd.Function):
    """dist.all_to_all_single of the rows of x (uneven splits), with the reverse exchange for the
    gradient: the rows came from the peers, so their gradients go back to them."""

    @staticmethod
    def forward(  # type: ignore[override]
        fctx: torch.autograd.function.FunctionCtx,
        x: torch.Tensor,
        out_splits: list[int],
        in_splits: list[int],
        group: dist.ProcessGroup,
    ) -> torch.Tensor:
        fctx.splits, fctx.group = (out_splits, in_splits), group  # type: ignore[attr-defined]
        return exchange_rows(x, out_splits, in_splits, group)

    @staticmethod
    def backward(  # type: ignore[override]
        fctx: torch.autograd.function.FunctionCtx, grad: torch.Tensor
    ) -> tuple[torch.Tensor, None, None, None]:
        out_splits, in_splits = fctx.splits  # type: ignore[attr-defined]
        return exchange_rows(grad, in_splits, out_splits, fctx.group), None, None, None  # type: ignore[attr-defined]


def exchange_rows(
    x: torch.Tensor, out_splits: list[int], in_splits: list[int], group: dist.ProcessGroup
) -> torch.Tensor:
    out = x.new_empty((sum(out_splits), *x.shape[1:]))
    dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
    return out


class Moe(nn.Module):
    """Embeddings, one top-1 mixture-of-experts MLP with a residual, and a head. Token id t goes to
    expert route[t]; the gate's softmax probability of that expert scales its output (so the gate
    learns, while the routing stays fixed). An expert-parallel rank keeps only its own experts (keep)."""

    def __init__(self, experts: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(app.VOCAB, app.DIM)
        self.pos = nn.Parameter(torch.randn(app.SEQ, app.DIM) * 0.02)
        self.norm1 = nn.LayerNorm(app.DIM)
        self.gate = nn.Linear(app.DIM, experts, bias=False)
        self.experts = nn.ModuleList(app.Mlp(app.DIM) for _ in range(experts))
        self.norm2 = nn.LayerNorm(app.DIM)
        self.head = nn.Linear(app.DIM, app.VOCAB)
        # Expert e is drawn with weight e + 1: the last ranks' experts get several times the tokens of
        # the first ones', so the splits are uneven, some of them empty.
        weights = torch.arange(1, experts + 1, dtype=torch.float)
        route = torch.multinomial(weights, app.VOCAB, replacement=True, generator=app.generator(4242))
        self.register_buffer("route", route, persistent=False)
        self.first = 0  # the global index of self.experts[0]

    def keep(self, first: int, count: int) -> None:
        self.experts = nn.ModuleList(self.experts[first : first + count])
        self.first = first

    def run_experts(self, z: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """Rows of z through their experts (e: each row's global expert index, all held here)."""
        y = torch.zeros_like(z)
        for j, expert in enumerate(self.experts):
            # Also on no rows: every expert gets a gradient (zero) on every rank, for the all-reduce.
            rows = (e == self.first + j).nonzero().squeeze(1)
            y = y.index_put((rows,), expert(z[rows]))
        return y

    def forward(
        self, x: torch.Tensor, dispatch: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None
    ) -> torch.Tensor:
        h = self.embed(x) + self.pos
        z = self.norm1(h).reshape(-1, app.DIM)
        e = self.route[x].reshape(-1)
        y = (dispatch or self.run_experts)(z, e)
        p = self.gate(z).softmax(dim=-1).gather(1, e[:, None])
        h = h + (p * y).view_as(h)
        return self.head(self.norm2(h))


def new_moe(experts: int) -> Moe:
    torch.manual_seed(app.SEED)
    return Moe(experts).to(ctx.device)


def item_moe_all_to_all() -> str:
    ep = half()
    mesh = mesh_2d((2, ep), ("dp", "ep"))
    ep_rank, group, dp_group = mesh.get_local_rank("ep"), mesh["ep"].get_group(), mesh["dp"].get_group()
    experts = EXPERTS_PER_RANK * ep
    model, ref = new_moe(experts), new_moe(experts)
    model.keep(ep_rank * EXPERTS_PER_RANK, EXPERTS_PER_RANK)
    splits_seen: list[int] = []

    def dispatch(z: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        """Each row of z to the rank of its expert and back, through that expert."""
        order = torch.argsort(e, stable=True)
        dest = e[order] // EXPERTS_PER_RANK
        send = torch.bincount(dest, minlength=ep)
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send, group=group)  # how many rows each peer sends
        in_splits, out_splits = send.tolist(), recv.tolist()
        splits_seen.extend(in_splits)
        z_here = AllToAll.apply(z[order], out_splits, in_splits, group)
        e_here = exchange_rows(e[order], out_splits, in_splits, group)
        y = AllToAll.apply(model.run_experts(z_here, e_here), in_splits, out_splits, group)
        return y[torch.argsort(order)]

    def pairs() -> list[tuple[str, nn.Parameter, nn.Parameter]]:
        """(name, this rank's parameter, the reference's): the experts held here by global index."""
        held = dict(ref.named_parameters())
        out = []
        for name, p in model.named_parameters():
            parts = name.split(".")
            if parts[0] == "experts":
                parts[1] = str(model.first + int(parts[1]))
            out.append((name, p, held[".".join(parts)]))
        return out

    opt, ref_opt = app.sgd(model.parameters()), app.sgd(ref.parameters())
    losses, ref_losses, grad_diff = [], [], 0.0
    for step in range(app.STEPS):
        x, y = app.tokens(step, ctx.rank)
        loss = app.lm_loss(model(x, dispatch), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        # The global loss is the mean of the ranks' losses. An expert's gradient here sums the losses of
        # its expert group's ranks (their tokens came here); its replicas on the data dimension hold the
        # others'. The dense parameters' gradients are each rank's own.
        for name, p, _ in pairs():
            assert p.grad is not None, f"{name}: no gradient"
            dist.all_reduce(p.grad, group=dp_group if name.startswith("experts.") else None)
            p.grad /= ctx.size
        gx, gy = app.global_tokens(step)
        ref_loss = app.lm_loss(ref(gx), gy)
        ref_opt.zero_grad(set_to_none=True)
        ref_loss.backward()
        # Gradients judged against 5% of the largest one at least: an expert that got few tokens has
        # gradients near 0, where only rounding differs.
        floor = 0.05 * max(q.grad.abs().max().item() for q in ref.parameters() if q.grad is not None)
        for name, p, q in pairs():
            assert q.grad is not None, f"reference {name}: no gradient"
            d = app.rel_diff(p.grad, q.grad, floor)
            grad_diff = max(grad_diff, d)
            app.require(f"step {step}: {name}.grad: relative difference", d, BOUND)
        opt.step()
        ref_opt.step()
        losses.append(app.mean_over_ranks(loss))
        ref_losses.append(ref_loss.detach().reshape(1))
    got, expected = (
        [float(v) for v in torch.cat(losses).cpu()],
        [float(v) for v in torch.cat(ref_losses).cpu()],
    )
    param_diff = max(app.rel_diff(p, q) for _, p, q in pairs())
    # The routing must really be uneven, or the test would not be what it claims.
    if min(splits_seen) == max(splits_seen):
        raise AssertionError(f"every split was {splits_seen[0]} rows: the routing is even")
    summary = app.check_training(
        "moe", "all_to_all", got, expected, param_diff, BOUND, max_rel_grad_diff=grad_diff
    )
    zeros = splits_seen.count(0)
    return (
        f"{experts} experts over {ep} ranks, splits {min(splits_seen)}..{max(splits_seen)} rows "
        f"({zeros} empty of {len(splits_seen)}); gradients {grad_diff:.3g}; {summary}"
    )


ITEMS = {
    "fsdp2_tp_4x2": item_fsdp2_tp_4x2,
    "fsdp2_tp_2x4": item_fsdp2_tp_2x4,
    "hsdp_2d": item_hsdp_2d,
    "fsdp2_no_reshard": item_fsdp2_no_reshard,
    "pipeline_dp": item_pipeline_dp,
    "moe_all_to_all": item_moe_all_to_all,
}

if __name__ == "__main__":
    app.main(ITEMS, "One rank of parallelisms composed on a DeviceMesh, checked against one device.")
