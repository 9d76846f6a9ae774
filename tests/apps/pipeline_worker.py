"""One rank of a pipeline: rank r is stage r of a small MLP (one Linear and a tanh per stage).
Activations go forward and gradients backward between neighbours with dist.batch_isend_irecv, for 4
micro-batches per step (all forwards, then all backwards), for 4 SGD steps. Every rank also runs the
whole MLP on one device over the whole batch and checks, at each step, the loss (broadcast from the last
stage) and its own stage's parameter gradients, and at the end its parameters, all within 1e-5 relative
(fp32).

Each transfer after the first of a phase is one batch of two operations: send micro-batch m on and
receive micro-batch m + 1, as pipeline schedules do; the ranks' batches pair up across neighbours
without a cycle. See app_common.py for how to run it.
"""

from __future__ import annotations

import copy

import app_common as app
import torch
import torch.distributed as dist
import torch.nn.functional as F
from app_common import ctx
from torch import nn

WIDTH = 32
MICRO = 4  # micro-batches per step
MICRO_BATCH = 4  # samples per micro-batch
STEPS = 4
# Only the batch size of each matmul differs from the reference (a micro-batch against the whole
# batch); transfers are exact copies.
BOUND = 1e-5


def stages(n: int) -> list[nn.Module]:
    torch.manual_seed(app.SEED)
    return [nn.Sequential(nn.Linear(WIDTH, WIDTH), nn.Tanh()).to(ctx.device) for _ in range(n)]


def micro_batch(step: int, m: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = app.generator(step, m, 555)
    x = torch.randn(MICRO_BATCH, WIDTH, generator=g)
    return x.to(ctx.device), torch.randn(MICRO_BATCH, WIDTH, generator=g).to(ctx.device)


def exchange(ops: list[dist.P2POp]) -> None:
    if ops:
        for req in dist.batch_isend_irecv(ops):
            req.wait()


def pipeline_step(stage: nn.Module, step: int) -> torch.Tensor:
    """Forward and backward of every micro-batch through this rank's stage; returns the loss on the last
    stage (zero elsewhere); leaves the gradients in the stage's parameters."""
    r, n = ctx.rank, ctx.size
    first, last = r == 0, r == n - 1

    def buffers() -> list[torch.Tensor]:
        return [torch.empty(MICRO_BATCH, WIDTH, device=ctx.device) for _ in range(MICRO)]

    inputs, outputs = buffers(), []
    if not first:
        exchange([dist.P2POp(dist.irecv, inputs[0], r - 1)])
    for m in range(MICRO):
        x = micro_batch(step, m)[0] if first else inputs[m].requires_grad_()
        inputs[m] = x
        out = stage(x)
        outputs.append(out)
        ops = []
        if not last:
            ops.append(dist.P2POp(dist.isend, out.detach(), r + 1))
        if not first and m + 1 < MICRO:
            ops.append(dist.P2POp(dist.irecv, inputs[m + 1], r - 1))
        exchange(ops)

    grads = buffers()
    loss = torch.zeros((), device=ctx.device)
    if not last:
        exchange([dist.P2POp(dist.irecv, grads[0], r + 1)])
    for m in range(MICRO):
        if last:
            part = F.mse_loss(outputs[m], micro_batch(step, m)[1]) / MICRO
            part.backward()
            loss += part.detach()
        else:
            outputs[m].backward(grads[m])
        ops = []
        if not first:
            grad = inputs[m].grad
            assert grad is not None, f"micro-batch {m}: no input gradient"
            ops.append(dist.P2POp(dist.isend, grad, r - 1))
        if not last and m + 1 < MICRO:
            ops.append(dist.P2POp(dist.irecv, grads[m + 1], r + 1))
        exchange(ops)
    return loss


def item_pipeline_fp32() -> str:
    r, n = ctx.rank, ctx.size
    every = stages(n)
    ref = nn.Sequential(*copy.deepcopy(every))
    stage = every[r]
    opt, ref_opt = app.sgd(stage.parameters()), app.sgd(ref.parameters())
    worst = {"loss": 0.0, "grads": 0.0, "params": 0.0}
    losses = []
    for step in range(STEPS):
        opt.zero_grad(set_to_none=True)
        ref_opt.zero_grad(set_to_none=True)
        loss = pipeline_step(stage, step).reshape(1)
        dist.broadcast(loss, src=n - 1)
        parts = [micro_batch(step, m) for m in range(MICRO)]
        x, y = torch.cat([p[0] for p in parts]), torch.cat([p[1] for p in parts])
        ref_loss = F.mse_loss(ref(x), y)
        ref_loss.backward()
        d = app.rel_diff(loss, ref_loss.reshape(1))
        worst["loss"] = max(worst["loss"], d)
        app.require(f"step {step}: loss {loss.item():.6f} against {ref_loss.item():.6f}: relative", d, BOUND)
        for (name, p), q in zip(stage.named_parameters(), ref[r].parameters(), strict=True):
            assert p.grad is not None and q.grad is not None, f"{name}: no gradient"
            d = app.rel_diff(p.grad, q.grad)
            worst["grads"] = max(worst["grads"], d)
            app.require(f"step {step}: stage {r} {name}.grad: relative difference", d, BOUND)
        opt.step()
        ref_opt.step()
        losses.append(loss.item())
    for (name, p), q in zip(stage.named_parameters(), ref[r].parameters(), strict=True):
        d = app.rel_diff(p, q)
        worst["params"] = max(worst["params"], d)
        app.require(f"after {STEPS} steps: stage {r} {name}: relative difference", d, BOUND)
    app.result("pipeline", "fp32", **{f"max_rel_{k}_diff": v for k, v in worst.items()})
    shown = ", ".join(f"{k} {v:.2g}" for k, v in worst.items())
    return (
        f"stage {r} of {n}, {MICRO} micro-batches, {STEPS} steps, "
        f"losses {losses[0]:.5f} -> {losses[-1]:.5f}; largest relative differences: {shown} (bound {BOUND:g})"
    )


ITEMS = {"pipeline_fp32": item_pipeline_fp32}

if __name__ == "__main__":
    app.main(ITEMS, "One rank of a pipeline-parallel MLP checked against one device.")
