"""One rank of tensor parallelism (torch.distributed.tensor.parallel) on a transformer block: q, k, v
and the MLP's first layer split by columns, the attention output and the MLP's second layer by rows,
over a DeviceMesh of all ranks (each rank gets its own heads). Checked against the same block on one
device, at each of 5 SGD steps: the output, the input's gradient and every parameter's gradient, and at
the end the parameters, all within 1e-5 of each tensor's largest value (fp32).

Every rank feeds the same input (it is replicated, as tensor parallelism expects). See app_common.py
for how to run it.
"""

from __future__ import annotations

import copy

import app_common as app
import torch
import torch.nn.functional as F
from app_common import ctx
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import DTensor
from torch.distributed.tensor.parallel import parallelize_module

# fp32 epsilon is 1.2e-7; a row-split layer adds its partial sums in another order than one matmul, which
# changes results by a few epsilons times the square root of the reduced width (256).
BOUND = 1e-5
STEPS = 5


def full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if isinstance(t, DTensor) else t


def item_tp_fp32() -> str:
    torch.manual_seed(app.SEED)
    block = app.Block().to(ctx.device)
    ref = copy.deepcopy(block)
    mesh = init_device_mesh(ctx.device.type, (ctx.size,))
    tp = parallelize_module(block, mesh, app.block_tp_plan())
    # The layer norms stay plain tensors beside the DTensor weights; CUDA's default foreach update would
    # put both in one multi-tensor kernel, which DTensor refuses.
    opt, ref_opt = app.sgd(tp.parameters(), foreach=False), app.sgd(ref.parameters(), foreach=False)
    worst: dict[str, float] = {"output": 0.0, "input grad": 0.0, "param grads": 0.0, "params": 0.0}

    def note(what: str, where: str, got: torch.Tensor, expected: torch.Tensor, scale: float = 0.0) -> None:
        d = app.rel_diff(got, expected, scale)
        worst[what] = max(worst[what], d)
        app.require(f"{where}: relative difference", d, BOUND)

    for step in range(STEPS):
        g = app.generator(step, 777)  # the same on every rank
        x = torch.randn(2 * app.BATCH, app.SEQ, app.DIM, generator=g).to(ctx.device)
        target = torch.randn(2 * app.BATCH, app.SEQ, app.DIM, generator=g).to(ctx.device)
        x_tp, x_ref = x.clone().requires_grad_(), x.clone().requires_grad_()
        out, ref_out = tp(x_tp), ref(x_ref)
        note("output", f"step {step}: output", out, ref_out)
        opt.zero_grad(set_to_none=True)
        ref_opt.zero_grad(set_to_none=True)
        F.mse_loss(out, target).backward()
        F.mse_loss(ref_out, target).backward()
        note("input grad", f"step {step}: input gradient", x_tp.grad, x_ref.grad)
        # The key bias's gradient is 0 in exact arithmetic (softmax ignores a shift common to a row), so
        # each gradient is judged against 5% of the block's largest one at least.
        ref_grads = [q.grad for q in ref.parameters() if q.grad is not None]
        floor = 0.05 * max(g.abs().max().item() for g in ref_grads)
        for (name, p), (_, q) in zip(tp.named_parameters(), ref.named_parameters(), strict=True):
            assert p.grad is not None and q.grad is not None, f"{name}: no gradient"
            note("param grads", f"step {step}: {name}.grad", full(p.grad), q.grad, floor)
        opt.step()
        ref_opt.step()
    for (name, p), (_, q) in zip(tp.named_parameters(), ref.named_parameters(), strict=True):
        note("params", f"after {STEPS} steps: {name}", full(p), q)
    app.result("tp", "fp32", **{f"max_rel_{k.replace(' ', '_')}_diff": v for k, v in worst.items()})
    shown = ", ".join(f"{k} {v:.2g}" for k, v in worst.items())
    return f"{STEPS} steps; largest relative differences: {shown} (bound {BOUND:g})"


ITEMS = {"tp_fp32": item_tp_fp32}

if __name__ == "__main__":
    app.main(ITEMS, "One rank of tensor parallelism checked against one device.")
