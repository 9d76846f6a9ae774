"""The tuner's plot: time against size per collective, the chosen candidate bold, the others thin, stock
NCCL dashed (matplotlib, optional)."""

from __future__ import annotations

import os
from typing import Any

from .candidates import STOCK
from .results import point_times, run_candidates
from .rules import winners


def plot_series(run: dict[str, Any], coll_doc: dict[str, Any]) -> dict[str, Any]:
    """What the plot of one collective draws: sizes (nccl-tests' size column), each candidate's time per
    size (None where it failed or was excluded), and the chosen candidate's time and label per size."""
    cands = run_candidates(coll_doc)
    excluded = set(coll_doc.get("excluded", {}))
    points = coll_doc["points"]
    series = {}
    for c in cands:
        if c.spec in excluded:
            continue
        series[c.label] = [point_times(p).get(c.spec) for p in points]
    chosen: list[float | None] = []
    labels: list[str | None] = []
    for point, w in winners(run, coll_doc):
        chosen.append(point_times(point)[w.spec] if w else None)
        labels.append(w.label if w else None)
    return {
        "sizes": [p["size"] for p in points],
        "candidates": series,
        "chosen": chosen,
        "chosen_labels": labels,
    }


def stock_series(stock: dict[str, Any] | None, collective: str) -> tuple[list[int], list[float | None]]:
    if not stock:
        return [], []
    for coll_doc in stock.get("collectives", []):
        if coll_doc["collective"] == collective:
            pts = coll_doc["points"]
            return [p["size"] for p in pts], [point_times(p).get(STOCK) for p in pts]
    return [], []


def plot_results(raw: dict[str, Any], path: str) -> bool:
    """Time (us, log) against size (bytes, log2) per collective: the chosen candidate bold, the others
    thin, stock NCCL dashed. False (with a message) when matplotlib is missing or nothing was tuned."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"# plot: matplotlib is not installed (pip install matplotlib); skipped {path}", flush=True)
        return False
    ours = raw.get("ours") or {}
    colls = [c for c in ours.get("collectives", []) if c.get("points")]
    if not colls:
        print(f"# plot: nothing was tuned; skipped {path}", flush=True)
        return False
    ncols = min(3, len(colls))
    nrows = -(-len(colls) // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(6.4 * ncols, 4.8 * nrows), squeeze=False)
    for ax in axes.flat[len(colls) :]:
        ax.set_visible(False)
    for ax, coll_doc in zip(axes.flat, colls, strict=False):
        coll = coll_doc["collective"]
        data = plot_series(ours, coll_doc)
        sizes = data["sizes"]
        cmap = plt.get_cmap("tab20")
        for i, (label, times) in enumerate(data["candidates"].items()):
            xs = [s for s, t in zip(sizes, times, strict=True) if t is not None]
            ys = [t for t in times if t is not None]
            if xs:
                ax.plot(xs, ys, lw=0.8, alpha=0.6, color=cmap(i % 20), marker=".", ms=3, label=label)
        xs = [s for s, t in zip(sizes, data["chosen"], strict=True) if t is not None]
        ys = [t for t in data["chosen"] if t is not None]
        if xs:
            ax.plot(xs, ys, lw=2.8, color="black", label="chosen (tuned table)")
        previous = None
        for size, time_us, label in zip(sizes, data["chosen"], data["chosen_labels"], strict=True):
            if label is not None and label != previous and time_us is not None:
                ax.annotate(label, (size, time_us), xytext=(0, 8), textcoords="offset points", fontsize=6)
            previous = label or previous
        sx, sy = stock_series(raw.get("stock"), coll)
        pts = [(s, t) for s, t in zip(sx, sy, strict=True) if t is not None]
        if pts:
            ax.plot(*zip(*pts, strict=True), lw=1.8, ls="--", color="tab:red", label="stock NCCL")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("size (bytes, nccl-tests convention)")
        ax.set_ylabel("time per call (us)")
        ax.set_title(
            f"{coll}: {ours['nranks']} ranks ({ours['ranks_per_gpu']}/GPU), {ours['dtype']}, {ours['gpu']}",
            fontsize=9,
        )
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    print(f"# plot: wrote {path}", flush=True)
    return True
