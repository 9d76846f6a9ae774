"""One rank of a tuning run: the plan (sizes and candidates per collective), each collective tuned size by
size, the progress lines and the results file; and the rank's exit code."""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import json
import logging
import os
import time
from typing import Any

from .._cli import configure_logging
from ..bench.collectives import COLLECTIVES, Layout
from ..bench.data import data_kind, seed_key
from ..bench.process import BenchError, RankInfo
from ..progress import Progress, for_rank, format_duration
from .candidates import Candidate, block_cap
from .comms import Live
from .measure import ROOT, MeasuringRank, Outcome, reference
from .options import TuneOptions, candidates_for, tuned_points
from .policy import EST_COMM_INIT_S, estimate_point_seconds, estimate_run_seconds
from .report import format_bytes, format_point_line
from .results import RAW_FORMAT, RAW_VERSION, point_times
from .rules import pick_winner
from .table import write_atomic

log = logging.getLogger("mscclpp_nccl.tune")


class TuneWorker(MeasuringRank):
    """One rank of a tuning run: one communicator per candidate, measured size by size."""

    def __init__(self, cfg: TuneOptions, where: RankInfo, cupy: Any = None, nccl: Any = None) -> None:
        super().__init__(cfg, where, cupy, nccl)
        self.doc: dict[str, Any] = {}
        self.start = time.monotonic()
        self.progress = Progress(0.0, start=self.start)

    def gpu_facts(self) -> dict[str, Any]:
        line = self.device_line()
        props = self.cp.cuda.runtime.getDeviceProperties(self.device)
        line["sm_count"] = int(props.get("multiProcessorCount", 0))
        return line

    def say0(self, text: str) -> None:
        if self.rank == 0:
            print(text, flush=True)

    def write_results(self) -> None:
        if self.rank == 0 and self.cfg.results:
            write_atomic(self.cfg.results, json.dumps(self.doc, indent=1) + "\n")

    def run(self) -> None:
        cfg = self.cfg
        dt = cfg.dtype
        devices = self.group.allgather(self.gpu_facts())
        names = sorted({d["device_info"] for d in devices})
        if len(names) > 1:
            self.say0(
                f"# warning: the ranks see different GPUs ({', '.join(names)}); the table names rank 0's"
            )
        gpu = devices[0]["device_info"]
        arch = f"sm_{devices[0]['cc']}"
        per_device = collections.Counter((d["hostname"], d["device_hex"], d["visible"]) for d in devices)
        rpg = cfg.ranks_per_gpu or max(per_device.values())
        max_blocks = min(block_cap(d["sm_count"], rpg) for d in devices)
        sizes = cfg.sizes()
        plan = []
        for coll in cfg.collectives:
            cands = candidates_for(cfg, coll, max_blocks)
            points = tuned_points(coll, sizes, dt.size, self.nranks)
            plan.append((coll, cands, points))
        estimate_plan = [(len(c), [lay.size for _, lay in p]) for _, c, p in plan]
        total_estimate = estimate_run_seconds(
            estimate_plan, cfg.calls_per_graph, cfg.replays, cfg.time_per_point
        )
        self.doc = {
            "format": RAW_FORMAT,
            "version": RAW_VERSION,
            "library": self.nccl.path,
            "nccl_version": self.version,
            "stock": cfg.stock,
            "gpu": gpu,
            "gpu_arch": arch,
            "nranks": self.nranks,
            "ranks_per_gpu": rpg,
            "max_blocks": max_blocks,
            "dtype": dt.name,
            "dtype_bytes": dt.size,
            "calls_per_graph": cfg.calls_per_graph,
            "replays": cfg.replays,
            "time_per_point": cfg.time_per_point,
            "alloc": cfg.alloc,
            "start_time": time.strftime("%Y-%m-%d %H:%M:%S"),
            "collectives": [],
        }
        what_lib = f"stock NCCL {self.version} ({self.nccl.path})" if cfg.stock else f"{self.nccl.path}"
        self.say0(
            f"# mscclpp_nccl.tune: {self.nranks} ranks ({rpg} per GPU) on {gpu}, {dt.name}, {what_lib};"
            f" grid cap {max_blocks} blocks; {cfg.calls_per_graph} calls per graph,"
            f" up to {cfg.replays} replays"
        )
        npoints = sum(len(p) for _, _, p in plan)
        nmeasure = sum(len(c) * len(p) for _, c, p in plan)
        self.say0(
            f"# {len(plan)} collective(s), {npoints} sizes, {nmeasure} measurements:"
            f" estimated {format_duration(total_estimate)} (rough; refined as sizes finish)"
        )
        self.alloc()
        self.progress = for_rank(self.rank, total_estimate, start=self.start)
        for coll, cands, points in plan:
            self.tune_collective(coll, cands, points)
        self.doc["end_time"] = time.strftime("%Y-%m-%d %H:%M:%S")
        self.doc["seconds"] = round(time.monotonic() - self.start, 3)
        self.write_results()
        self.say0(f"# done in {format_duration(time.monotonic() - self.start)}")

    def tune_collective(
        self,
        coll: str,
        cands: list[Candidate],
        points: list[tuple[int, Layout]],
    ) -> None:
        cfg = self.cfg
        dt = cfg.dtype
        self.opts = dataclasses.replace(self.base_opts, collective=coll)
        coll_doc: dict[str, Any] = {
            "collective": coll,
            "candidates": [c.to_doc() for c in cands],
            "excluded": {},
            "points": [],
            "complete": False,
        }
        self.doc["collectives"].append(coll_doc)
        excluded: dict[str, str] = coll_doc["excluded"]
        self.say0(
            f"## {coll}: {len(cands)} candidates ({', '.join(c.label for c in cands)}), {len(points)} sizes"
        )
        self.lives = [Live(c, i) for i, c in enumerate(cands)]
        self.progress.begin(f"{coll}: creating {len(cands)} communicators")
        for live in self.lives:
            live.comm, err = self.create_comm(live.cand)
            if err:
                excluded[live.cand.spec] = f"communicator init failed: {err}"
                self.say0(f"# {coll}: excluded {live.cand.label}: {excluded[live.cand.spec]}")
        self.progress.advance(len(cands) * EST_COMM_INIT_S)
        kind = data_kind(coll, "sum")
        coll_index = COLLECTIVES.index(coll)
        for pi, (size, lay) in enumerate(points):
            nbytes = lay.count * dt.size
            seed = seed_key(0x7E, coll_index, size)
            self.progress.begin(f"{coll} {format_bytes(size)}")
            with self.watchdog.phase(cfg.timeout * 4 + 600, f"{coll} {size} B: preparing data"):
                self.init_data(lay, dt, kind, ROOT, False, seed)
                expected, tol = reference(coll, dt, kind, self.nranks, self.rank, ROOT, lay, seed)
            outcomes: dict[str, Outcome] = {}
            # The fastest so far first, so that slow candidates can be cut short.
            order = sorted(
                (lv for lv in self.lives if lv.cand.spec not in excluded and lv.comm is not None),
                key=lambda lv: (lv.last_us is None, lv.last_us or 0.0, lv.index),
            )
            best_us: float | None = None
            for live in order:
                what = f"{coll} {size} B {live.cand.label}"
                out = self.measure(live, lay, dt, expected, tol, best_us, what)
                outcomes[live.cand.spec] = out
                if out.status == "ok":
                    live.last_us = out.time_us
                    if best_us is None or (out.time_us is not None and out.time_us < best_us):
                        best_us = out.time_us
                elif out.status == "pruned":
                    live.last_us = out.time_us
                else:
                    excluded[live.cand.spec] = f"{out.status} at {size} B: {out.message}"
                    self.say0(f"# {coll}: excluded {live.cand.label}: {excluded[live.cand.spec]}")
            del expected
            point = {
                "size": size,
                "bytes": nbytes,
                "count": lay.count,
                "results": {spec: o.to_doc() for spec, o in outcomes.items()},
            }
            coll_doc["points"].append(point)
            self.progress.advance(
                estimate_point_seconds(
                    lay.size, len(cands), cfg.calls_per_graph, cfg.replays, cfg.time_per_point
                )
            )
            if self.rank == 0:
                elapsed, eta = self.progress.clock()
                times = point_times(point)
                spec = pick_winner(times, [lv.cand.spec for lv in self.lives], set(excluded))
                by_spec = {lv.cand.spec: lv.cand for lv in self.lives}
                winner = (by_spec[spec].label, times[spec]) if spec is not None else None
                cells = [
                    (lv.cand.label, outcomes[lv.cand.spec].status, outcomes[lv.cand.spec].time_us)
                    for lv in self.lives
                    if lv.cand.spec in outcomes
                ]
                line = format_point_line(coll, size, nbytes, cells, winner, pi + 1, len(points), elapsed, eta)
                print(line, flush=True)
        for live in self.lives:
            self.destroy(live)
        self.lives = []
        coll_doc["complete"] = True
        self.write_results()

    def finish(self) -> None:
        self.comm = None
        self.teardown()


def worker_main(cfg: TuneOptions, where: RankInfo | None = None, cupy: Any = None, nccl: Any = None) -> int:
    """One rank. 0: done; 3: an error stopped the run (collectives finished before it are in the results)."""
    configure_logging()
    rank = where.rank if where is not None else int(os.environ.get("MSCCLPP_NCCL_RANK", "0"))
    w: TuneWorker | None = None
    try:
        w = TuneWorker(cfg, where or RankInfo.from_env(), cupy, nccl)
        w.run()
        w.finish()
        return 0
    except Exception as e:
        message = str(e) if isinstance(e, BenchError) else f"{type(e).__name__}: {e}"
        log.error("rank %d: %s", rank, message)
        if w is not None:
            if rank == 0 and w.doc:
                w.doc["error"] = message
                with contextlib.suppress(Exception):
                    w.write_results()
            w.abort_all()
            w.group.close()
        return 3
