"""One rank of DistributedDataParallel training for 20 steps, checked against the same model trained on
one device over the global batch, without any communication: the loss (mean over ranks) within 1e-4
relative at every step, and the final parameters within 1e-4 of each tensor's largest value.

Small gradient buckets make DDP overlap several all_reduces with the backward pass. See app_common.py
for how to run it.
"""

from __future__ import annotations

import copy

import app_common as app
from app_common import ctx
from torch.nn.parallel import DistributedDataParallel

BOUND = 1e-4


def item_ddp_fp32() -> str:
    model = app.new_transformer()
    ref = copy.deepcopy(model)
    ref_losses = app.train_reference(ref)

    ddp = DistributedDataParallel(
        model,
        device_ids=None if ctx.cpu else [ctx.device.index],
        bucket_cap_mb=0.05,  # ~13k floats per bucket: several all_reduces per step
    )
    got = app.train_distributed(ddp)
    param_diff = app.max_param_diff(model, ref)
    diff = app.rel_loss_diff(got, ref_losses)
    app.result("ddp", "fp32", max_rel_loss_diff=diff, max_rel_param_diff=param_diff)
    table = app.loss_table(got, ref_losses)
    app.require("max relative loss difference", diff, BOUND, f"step: ddp/reference: {table}")
    app.require("max relative parameter difference", param_diff, BOUND)
    return (
        f"losses {got[0]:.4f} -> {got[-1]:.4f} over {app.STEPS} steps; max relative loss difference "
        f"{diff:.3g}, final parameters {param_diff:.3g} (bound {BOUND:g})"
    )


ITEMS = {"ddp_fp32": item_ddp_fp32}

if __name__ == "__main__":
    app.main(ITEMS, "One rank of DDP training checked against one-device training.")
