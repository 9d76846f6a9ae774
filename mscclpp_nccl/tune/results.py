"""The tuner's raw results: what each rank-0 run measured per collective, size and candidate (the --raw
file), read and written."""

from __future__ import annotations

import json
from typing import Any

from .candidates import Candidate

RAW_FORMAT = "mscclpp-nccl-tune-raw"
RAW_VERSION = 1


def run_candidates(coll_doc: dict[str, Any]) -> list[Candidate]:
    """The candidates one collective of a run measured, in their order."""
    return [Candidate.from_doc(coll_doc["collective"], c) for c in coll_doc["candidates"]]


def point_times(point: dict[str, Any]) -> dict[str, float | None]:
    """spec -> time in us of the candidates that ran correctly at this point (pruned ones included)."""
    return {
        spec: r.get("time_us") if r.get("status") in ("ok", "pruned") else None
        for spec, r in point["results"].items()
    }


def load_raw(path: str) -> dict[str, Any]:
    """A --raw file (ValueError when it is not one, OSError when it cannot be read)."""
    with open(path) as f:
        raw = json.load(f)
    if not isinstance(raw, dict) or raw.get("format") != RAW_FORMAT or "ours" not in raw:
        raise ValueError(f"{path} is not a {RAW_FORMAT} file")
    return raw


def make_raw(ours: dict[str, Any] | None, stock: dict[str, Any] | None) -> dict[str, Any]:
    """The --raw document of our run and the stock run (either may be missing)."""
    return {"format": RAW_FORMAT, "version": RAW_VERSION, "ours": ours, "stock": stock}


def read_run(path: str) -> dict[str, Any] | None:
    """One run's results as a worker wrote them; None when absent or unreadable."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None
