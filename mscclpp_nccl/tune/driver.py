"""`python -m mscclpp_nccl.tune`: starts the tuning ranks through the launcher (ours, then a stock NCCL
for comparison), then writes the raw measurements, the merged table and the plot."""

from __future__ import annotations

import collections
import json
import logging
import os
import sys
import tempfile
from collections.abc import Sequence
from types import SimpleNamespace
from typing import Any

from ..bench.cli import default_ranks, launch_plan, unmet_need
from ..bench.options import run_command
from ..progress import launch_shown
from ..run import guarded
from .candidates import ALGO_ENV
from .options import TuneOptions, build_parser, parse_args
from .plot import plot_results
from .report import format_rules
from .results import load_raw, make_raw, read_run
from .rules import build_entries
from .table import TableError, load_table, merge_tables, write_atomic, write_table
from .worker import worker_main

PROG = "python -m mscclpp_nccl.tune"
log = logging.getLogger("mscclpp_nccl.tune")


def _launch_workers(
    cfg: TuneOptions,
    argv: Sequence[str],
    nranks: int,
    rpg: int,
    mps: bool,
    env: dict[str, str],
    results: str,
    stock: bool,
) -> int:
    cmd = [sys.executable, "-m", "mscclpp_nccl.tune", *argv, "--worker", "--results", results]
    cmd += ["--ranks-per-gpu", str(rpg)]
    if stock:
        assert cfg.stock_lib is not None
        cmd += ["--stock", "--stock-lib", os.path.abspath(cfg.stock_lib)]
    return launch_shown("stock NCCL" if stock else "tuning", nranks, cmd, mps, env, cfg.run_timeout)


def run_tuning(cfg: TuneOptions, argv: Sequence[str]) -> tuple[int, dict[str, Any] | None]:
    """Runs the workers (ours, then stock with --stock-lib); (exit code, raw results or None)."""
    from ..run import assign_gpus, visible_gpus

    gpus = visible_gpus()
    reason = unmet_need(gpus, "tune")
    if reason:
        log.error("%s", reason)
        return 2, None
    if cfg.stock_lib and not os.path.isfile(cfg.stock_lib):
        log.error("--stock-lib %s: no such file", cfg.stock_lib)
        return 2, None
    nranks = cfg.ranks if cfg.ranks is not None else default_ranks(len(gpus))
    placement = assign_gpus(nranks, gpus)
    rpg = max(collections.Counter(placement).values())
    mps = cfg.mps if cfg.mps is not None else nranks > len(gpus)
    env = dict(os.environ)
    # A kernel or a bootstrap waiting on a failed peer must give up in seconds, not minutes.
    env.setdefault("MSCCLPP_NCCL_WAIT_TIMEOUT", str(int(cfg.timeout)))
    env.setdefault("MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT", str(int(cfg.timeout)))
    env.pop(ALGO_ENV, None)  # each candidate's communicator sets its own
    print(
        f"# tuning {', '.join(cfg.collectives)}: {nranks} ranks on {len(gpus)} GPU(s), {rpg} per GPU"
        f"{', under MPS' if mps else ''}; sizes {cfg.min_bytes}..{cfg.max_bytes} B x{cfg.step_factor},"
        f" {cfg.dtype.name}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="mscclpp-nccl-tune-") as tmp:
        ours_path = os.path.join(tmp, "ours.json")
        rc = _launch_workers(cfg, argv, nranks, rpg, mps, env, ours_path, stock=False)
        ours = read_run(ours_path)
        if rc != 0:
            print(f"# error: the tuning run failed (exit {rc})", flush=True)
        stock = None
        if cfg.stock_lib and ours is not None:
            opts = SimpleNamespace(ranks=nranks, mps=mps, lib=cfg.stock_lib)
            _, _, extra, notes = launch_plan(opts, len(gpus), env)  # type: ignore[arg-type]
            for note in notes:
                print(f"# note: {note}", flush=True)
            print(f"# timing stock NCCL {cfg.stock_lib} the same way", flush=True)
            stock_path = os.path.join(tmp, "stock.json")
            code = _launch_workers(cfg, argv, nranks, rpg, mps, {**env, **extra}, stock_path, stock=True)
            stock = read_run(stock_path)
            if code != 0:
                print(
                    f"# warning: the stock NCCL run failed (exit {code}); plotting what it measured",
                    flush=True,
                )
    if ours is None:
        return rc or 3, None
    return rc, make_raw(ours, stock)


def finish(cfg: TuneOptions, raw: dict[str, Any], rc: int) -> int:
    """Writes the raw file, the merged table and the plot from a run's results; the exit code."""
    if cfg.raw:
        write_atomic(cfg.raw, json.dumps(raw, indent=1) + "\n")
        print(f"# wrote the measurements to {cfg.raw}", flush=True)
    ours = raw.get("ours")
    entries, notes = build_entries(ours) if ours else ([], ["no results"])
    for note in notes:
        print(f"# note: {note}", flush=True)
    if entries:
        existing = None
        if os.path.exists(cfg.out):
            try:
                existing = load_table(cfg.out)
            except (TableError, OSError) as e:
                log.error("cannot merge into %s: %s", cfg.out, e)
                return 2
        table = merge_tables(existing, entries)
        write_table(cfg.out, table)
        for e in entries:
            print("\n".join(f"# {line}" for line in format_rules(e)), flush=True)
        verb = "merged into" if existing else "wrote"
        print(f"# {verb} {cfg.out}: {len(entries)} entr{'y' if len(entries) == 1 else 'ies'}", flush=True)
    else:
        print("# no table entry to write", flush=True)
        rc = rc or 1
    if cfg.plot:
        plot_results(raw, cfg.plot)
    return rc


def main(argv: Sequence[str] | None = None) -> int:
    """The command: `python -m mscclpp_nccl.tune` (a rank of it with --worker); its exit code."""
    return run_command(PROG, argv, parse_args, build_parser, lambda cfg, _: worker_main(cfg), tune)


def tune(cfg: TuneOptions, argv: list[str]) -> int:
    """Tunes (or, with --from-raw, rebuilds from measurements) and writes the table; the exit code."""
    for flag, path in (("--out", cfg.out), ("--raw", cfg.raw), ("--plot", cfg.plot)):
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            log.error("%s %s: no such directory", flag, path)
            return 2
    if cfg.from_raw:
        try:
            raw = load_raw(cfg.from_raw)
        except (OSError, ValueError) as e:
            log.error("--from-raw: %s", e)
            return 2
        try:
            return finish(cfg, raw, 0)
        except (AttributeError, KeyError, TypeError, ValueError) as e:
            # A file of the right format whose contents are not what a tuning run writes.
            log.error("--from-raw: %s holds malformed results (%r)", cfg.from_raw, e)
            return 2
    outcome = guarded(log, lambda: run_tuning(cfg, argv))
    if isinstance(outcome, int):
        return outcome
    rc, raw = outcome
    if raw is None:
        return rc or 3
    return finish(cfg, raw, rc)
