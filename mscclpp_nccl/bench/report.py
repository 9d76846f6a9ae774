"""The benchmark's report in nccl-tests' format: the table's widths and units, the header and footer
lines, and the JSON results file."""

from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import numpy as np

from ..progress import PROGRESS_ENV
from .options import Options


def float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr: 2 decimals, fewer as the integer part grows, then exponent notation."""
    if not math.isfinite(value):
        return f"{value:{width}.2f}"
    power = 0
    v = 1
    while value >= v:
        power += 1
        v *= 10
    if power < width - 2:
        return f"{value:{width}.2f}"
    if power < width - 1:
        return f"{value:{width}.1f}"
    if power < width + 1:
        return f"{value:{width}.0f}"
    if width >= 7:
        return f"{value:{width}.1e}"
    return f"{value:{width}.0e}"


def header_lines(report_cputime: bool = False) -> list[str]:
    """The three header lines of the results table."""
    t = "cputime" if report_cputime else "time"
    lead = f"# {'':>10}  {'':>12}  {'':>8}  {'':>6}  {'':>6}"
    names = f"# {'size':>10}  {'count':>12}  {'type':>8}  {'redop':>6}  {'root':>6}"
    units = f"# {'(B)':>10}  {'(elements)':>12}  {'':>8}  {'':>6}  {'':>6}"
    per_place = f"  {t:>7}  {'algbw':>6}  {'busbw':>6}  {'#wrong':>6}"
    per_place_units = f"  {'(us)':>7}  {'(GB/s)':>6}  {'(GB/s)':>6}  {'':>6}"
    return [
        lead + "           out-of-place                       in-place          ",
        names + per_place * 2 + " ",
        units + per_place_units * 2 + " ",
    ]


def format_preamble(size: int, count: int, type_name: str, op_name: str, root: int) -> str:
    return f"{size:12d}  {count:12d}  {type_name:>8}  {op_name:>6}  {root:6d}"


def format_result(time_us: float, algbw: float, busbw: float, wrong: int | None) -> str:
    """One placement's columns; wrong None prints N/A (not checked)."""
    cols = f"  {float_str(time_us, 7):>7}  {float_str(algbw, 6):>6}  {float_str(busbw, 6):>6}"
    return cols + ("    N/A" if wrong is None else f"  {float(wrong):6g}")


def footer_lines(errors: int, avg_busbw: float, min_bw: float | None, program: str) -> list[str]:
    bw_status = "" if min_bw is None else ("FAILED" if avg_busbw < 0.9 * min_bw else "OK")
    return [
        f"# {'Out of bounds values':<20} : {errors} {'FAILED' if errors else 'OK'}",
        f"# {'Avg bus bandwidth':<20} : {avg_busbw:g} {bw_status}",
        "#",
        f"# Collective test concluded: {program}",
        "#",
    ]


def program_name(collective: str) -> str:
    return f"{collective}_perf"


def env_summary() -> dict[str, str]:
    """The NCCL_, MSCCLPP_, CUDA and NVIDIA variables of this process (not the unique id, nor how progress
    is shown)."""
    keep = ("NCCL_", "MSCCLPP_", "CUDA_VISIBLE_DEVICES", "CUDA_MPS_", "NVIDIA_")
    return {
        k: v
        for k, v in sorted(os.environ.items())
        if k.startswith(keep) and k not in ("MSCCLPP_NCCL_UNIQUE_ID", PROGRESS_ENV)
    }


def config_doc(opts: Options, nranks: int) -> dict[str, Any]:
    """The JSON file's config: the run's settings as nccl-tests names them."""
    return {
        "nranks": nranks,
        "minimum_bytes": opts.min_bytes,
        "maximum_bytes": opts.max_bytes,
        **({"step_factor": opts.step_factor} if opts.step_factor > 1 else {"step_bytes": opts.step_bytes}),
        "warmup_iters": opts.warmup_iters,
        "iterations": opts.iters,
        "aggregated_iterations": opts.agg_iters,
        "validation": opts.check,
        "graph": opts.graph_launches,
        "blocking_collectives": opts.blocking,
        "average": opts.average,
        "datatype": opts.type_spec,
        "op": opts.op_spec,
        "root": opts.root,
        "alloc": opts.alloc,
        "report_cputime": opts.report_cputime,
    }


def print_header(
    opts: Options, version: int, library: str, nranks: int, devices: list[dict[str, Any]], program: str
) -> None:
    """The lines before the table: the library, the run's settings and each rank's device."""
    from ..binding import version_tuple

    major, minor, patch = version_tuple(version)
    step = (opts.step_factor, "factor") if opts.step_factor > 1 else (opts.step_bytes, "bytes")
    lines = [
        f"# mscclpp_nccl.bench (nccl-tests format) nccl-library={version}"
        f" ({major}.{minor}.{patch}) {library}",
        f"# Collective test starting: {program}",
        f"# nThread 1 nGpus 1 minBytes {opts.min_bytes} maxBytes {opts.max_bytes} step: {step[0]}({step[1]})"
        f" warmup iters: {opts.warmup_iters} iters: {opts.iters} agg iters: {opts.agg_iters}"
        f" validation: {opts.check} graph: {opts.graph_launches} unalign: 0",
    ]
    if opts.blocking == 1:
        lines.append("# Blocking Enabled: wait for completion and barrier after each collective ")
    elif opts.blocking == 2:
        lines.append("# Blocking Enabled: wait for completion after each collective (no barrier) ")
    mps = "under MPS" if os.environ.get("CUDA_MPS_PIPE_DIRECTORY") else "no MPS"
    how = {
        0: "rank 0's",
        1: "the mean over ranks of",
        2: "the minimum over ranks of",
        3: "the maximum over ranks of",
    }
    lines += [
        f"# {nranks} ranks, one process each, {mps}; buffers from"
        f" {'ncclMemAlloc' if opts.alloc == 'ncclmem' else 'cudaMalloc'};"
        f" time: {how[opts.average]} host wall time per call",
        "#",
        "# Using devices",
    ]
    for d in devices:
        lines.append(
            f"#  Rank {d['rank']:2d} Group {d['group']:2d} Pid {d['pid']:6d} on {d['hostname']:>10}"
            f" device {d['device']:2d} [{d['device_hex']}] {d['device_info']}"
        )
    lines.append("#")
    lines += header_lines(opts.report_cputime)
    print("\n".join(lines), flush=True)


def write_json(path: str | None, doc: dict[str, Any]) -> None:
    """Writes doc (with its end time) to path atomically; nothing when path is None."""
    if not path:
        return
    doc = dict(doc)
    doc["end_time"] = time.strftime("%Y-%m-%d %H:%M:%S")
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1, default=_json_default)
        f.write("\n")
    os.replace(tmp, path)
    print(f"# Wrote JSON results to {path}", flush=True)


def _json_default(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")
