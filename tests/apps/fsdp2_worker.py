"""One rank of FSDP2 training (fully_shard per transformer block and on the root) for 20 steps, checked
against the same model trained on one device over the global batch, without any communication.

Items: fp32 (loss within 1e-4 relative at every step, final parameters within 1e-4 of each tensor's
largest value) and bf16 (MixedPrecisionPolicy with bf16 parameters and fp32 gradient reduction, against
the same fp32 reference; bound below). See app_common.py for how to run it.
"""

from __future__ import annotations

import copy

import app_common as app
import torch
from app_common import ctx
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor

FP32_BOUND = 1e-4
# bf16 keeps 8 significant bits: every rounding of a parameter or an activation is off by up to 2^-8
# relative (half that on average). The loss goes through ~10 rounded matmul outputs per block and the
# gradients, hence the updates, carry errors of the same order, which 20 steps of momentum accumulate.
# We allow 8 * 2^-8 ~ 3.1e-2 relative; observed (H200, stock NCCL 2.30.7, 2-8 ranks): 0.9e-3 to 1.6e-3,
# printed in the RESULT line so that the margin can be quoted. A wrong reduction moves the loss by far
# more: it falls from ~4.1 to ~1.3 over these 20 steps, and a sum where a mean is due (N times the
# learning rate) changes it by tens of percent within a few steps (3x: 40% lower at step 6, on the CPU).
BF16_BOUND = 8 * 2.0**-8


def train(mixed: bool) -> tuple[list[float], list[float], float]:
    """FSDP2's losses (the mean over ranks of each rank's loss on its own batch, which is the loss of the
    global batch), the reference's, and the final parameters' largest relative difference."""
    model = app.new_transformer()
    ref = copy.deepcopy(model)
    ref_losses = app.train_reference(ref)

    mesh = init_device_mesh(ctx.device.type, (ctx.size,))
    policy = (
        MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
        if mixed
        else MixedPrecisionPolicy()
    )
    for block in model.blocks:
        fully_shard(block, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    got = app.train_distributed(model)
    param_diff = app.max_param_diff(model, ref, lambda p: p.full_tensor() if isinstance(p, DTensor) else p)
    return got, ref_losses, param_diff


def check(variant: str, mixed: bool, bound: float) -> str:
    losses, ref_losses, param_diff = train(mixed)
    diff = app.rel_loss_diff(losses, ref_losses)
    app.result("fsdp2", variant, max_rel_loss_diff=diff, max_rel_param_diff=param_diff)
    table = app.loss_table(losses, ref_losses)
    app.require("max relative loss difference", diff, bound, f"step: fsdp2/reference: {table}")
    if not mixed:
        app.require("max relative parameter difference", param_diff, FP32_BOUND)
    return (
        f"losses {losses[0]:.4f} -> {losses[-1]:.4f} over {app.STEPS} steps; max relative loss difference "
        f"{diff:.3g} (bound {bound:.3g}), final parameters {param_diff:.3g}"
    )


def item_fp32() -> str:
    return check("fp32", mixed=False, bound=FP32_BOUND)


def item_bf16() -> str:
    return check("bf16", mixed=True, bound=BF16_BOUND)


ITEMS = {"fsdp2_fp32": item_fp32, "fsdp2_bf16": item_bf16}

if __name__ == "__main__":
    app.main(ITEMS, "One rank of FSDP2 training checked against one-device training.")
