"""One rank of the benchmark: nccl-tests' timing and checking of each size, type, op and root, and the
rank's exit code."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import sys
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from .._cli import configure_logging
from ..progress import Progress, for_rank
from .calls import make_issuer
from .collectives import (
    OP_COLUMN,
    OP_MIN_VERSION,
    REDUCING,
    ROOTED,
    UNCHECKED_IN_PLACE,
    DType,
    Layout,
    bandwidth,
    combine_times,
    layout,
    rough_call_seconds,
)
from .data import data_kind, expected_output, seed_key, show_value, wrong_mask
from .options import Options
from .process import BenchError, RankInfo
from .rank import Rank
from .report import (
    config_doc,
    env_summary,
    footer_lines,
    format_preamble,
    format_result,
    print_header,
    program_name,
    write_json,
)

log = logging.getLogger("mscclpp_nccl.bench")
ROW_OVERHEAD_S = 0.005  # per size and placement: copies, host exchanges (a guess, for progress)


class Worker(Rank):
    """One rank of the benchmark: the rank's hold on the GPU, and nccl-tests' loop over sizes."""

    def __init__(self, opts: Options, where: RankInfo, cupy: Any = None, nccl: Any = None) -> None:
        super().__init__(opts, where, cupy, nccl)
        self.results: list[dict[str, Any]] = []
        self.local_errors = 0  # (size, placement) results wrong on this rank
        self.bw_sum = 0.0
        self.bw_count = 0
        self.algo = os.environ.get("NCCL_ALGO")
        self.progress = Progress(0.0)

    def bench_time(
        self, lay: Layout, dt: DType, op: str | None, root: int, in_place: bool, size_index: int
    ) -> dict[str, Any]:
        """Time and check one size in one placement; every rank returns the same numbers."""
        from ..binding import NcclError

        place = "in-place" if in_place else "out-of-place"
        what = f"{self.opts.collective} {lay.size} B {dt.name} {op or 'none'} root {root} {place}"
        try:
            return self._bench_time(lay, dt, op, root, in_place, size_index, what)
        except NcclError as e:
            raise BenchError(f"{what}: {e}") from None

    def _bench_time(
        self, lay: Layout, dt: DType, op: str | None, root: int, in_place: bool, size_index: int, what: str
    ) -> dict[str, Any]:
        o = self.opts
        coll = o.collective
        kind = data_kind(coll, op)
        calls = o.iters * o.agg_iters
        issue = make_issuer(self, lay, dt, op, root, in_place, max(calls, o.warmup_iters, 1))

        with self.watchdog.phase(o.timeout, f"{what}: warm-up"):
            if o.check:
                self.init_data(lay, dt, kind, root, in_place, seed_key(99, size_index))
            for i in range(max(o.warmup_iters, 1)):
                issue.single(i)
            self.wait(f"{what}: warm-up")
        self.group.barrier()

        # Enqueueing blocks once the launch queue is full, so the timed phase may take as long as the GPU
        # work: allow -T per thousand calls.
        launches = calls * max(o.graph_launches, 1)
        with self.watchdog.phase(o.timeout * (1 + launches // 1000), f"{what}: timing"):
            graph = None
            if o.graph_launches:
                graph = self.capture(
                    lambda: [issue.timed(i) for i in range(o.iters)], "streamCaptureModeThreadLocal"
                )
                self.group.barrier()
                t0 = time.perf_counter()
                for _ in range(o.graph_launches):
                    graph.launch(self.stream)
            elif issue.direct is not None:
                prepared, fail = issue.direct, issue.check
                t0 = time.perf_counter()
                for seq in prepared:
                    for fn, args in seq:
                        rc = fn(*args)
                        if rc:
                            fail(rc)
            else:
                t0 = time.perf_counter()
                for i in range(o.iters):
                    issue.timed(i)
            cpu = (time.perf_counter() - t0) / calls
            self.wait(f"{what}: timed iterations")
            elapsed = (time.perf_counter() - t0) / calls
            if o.graph_launches:
                elapsed /= o.graph_launches
            del graph
        times = self.group.allgather([elapsed, cpu])
        seconds = combine_times([t[1] if o.report_cputime else t[0] for t in times], o.average)

        report = bool(o.check) and not (in_place and coll in UNCHECKED_IN_PLACE)
        wrong_total: int | None = None
        if report:
            wrong_total = 0
            for c in range(o.check):
                seed = seed_key(1000 + c, size_index, root)
                with self.watchdog.phase(o.timeout, f"{what}: check"):
                    self.init_data(lay, dt, kind, root, in_place, seed)
                    if o.graph_launches:
                        g = self.capture(lambda: issue.single(0), "streamCaptureModeGlobal")
                        g.launch(self.stream)
                        self.wait(f"{what}: checked call")
                        del g
                    else:
                        issue.single(0)
                        self.wait(f"{what}: checked call")
                    assert self.recv is not None
                    region = self.recv.ptr + (lay.recv_inplace * dt.size * self.rank if in_place else 0)
                    got = self.read(region, lay.recvcount, dt)
                expected, tolerance = expected_output(
                    coll, dt, kind, self.nranks, self.rank, root, in_place, lay, seed
                )
                wrong = 0
                if expected is not None:
                    mask = wrong_mask(got, expected, dt, tolerance)
                    wrong = int(np.count_nonzero(mask))
                    if wrong:
                        self.local_errors += 1
                        i = int(np.argmax(mask))
                        log.warning(
                            "rank %d: %s: %d of %d elements wrong; first at %d: got %s, expected %s",
                            self.rank,
                            what,
                            wrong,
                            got.size,
                            i,
                            show_value(got[i], dt),
                            show_value(expected[i], dt),
                        )
                wrong_total = int(sum(self.group.allgather(wrong)))
                if wrong_total:
                    break
        algbw, busbw = bandwidth(coll, lay.count, dt.size, seconds, self.nranks, self.algo)
        self.bw_sum += busbw
        self.bw_count += 1
        return {"time": seconds * 1e6, "alg_bw": algbw, "bus_bw": busbw, "nwrong": wrong_total}

    def time_test(self, dt: DType, op: str | None, root: int, sizes: list[int]) -> None:
        """The sizes' rows, -N times over (forever with -N 0), as nccl-tests' TimeTest."""
        cycle = 0
        while self.opts.run_cycles == 0 or cycle < self.opts.run_cycles:
            self.time_sizes(dt, op, root, sizes)
            cycle += 1

    def time_sizes(self, dt: DType, op: str | None, root: int, sizes: list[int]) -> None:
        coll = self.opts.collective
        op_name = op if op is not None else "none"
        for index, nbytes in enumerate(sizes):
            lay = layout(coll, nbytes, dt.size, self.nranks)
            self.progress.begin(f"{dt.name} {op_name}{f' root {root}' if root >= 0 else ''} {lay.size} B")
            out = self.bench_time(lay, dt, op, root, False, index)
            inp = self.bench_time(lay, dt, op, root, True, index)
            row = {
                "size": lay.size,
                "count": lay.count,
                "type": dt.name,
                "redop": op_name,
                "root": root,
                "out_of_place": out,
                "in_place": inp,
            }
            self.results.append(row)
            if self.rank == 0:
                line = format_preamble(lay.size, lay.count, dt.name, op_name, root)
                for res in (out, inp):
                    line += format_result(res["time"], res["alg_bw"], res["bus_bw"], res["nwrong"])
                print(line, flush=True)
            self.progress.advance(2 * row_seconds(self.opts, nbytes))


def row_seconds(opts: Options, nbytes: int) -> float:
    """A rough guess of the seconds one size takes in one placement (the weight of its progress)."""
    calls = max(opts.warmup_iters, 1) + opts.iters * opts.agg_iters * max(opts.graph_launches, 1) + opts.check
    return ROW_OVERHEAD_S + calls * rough_call_seconds(nbytes)


def _run_types(opts: Options, version: int, cc: int) -> list[DType]:
    """-d all keeps the types this library and GPU support, as nccl-tests does (fp8 needs sm_90)."""
    if opts.type_spec.strip().lower() != "all":
        return opts.types
    return [t for t in opts.types if version >= t.min_version and not (t.name.startswith("f8") and cc < 90)]


def _run_ops(opts: Options, version: int) -> list[str | None]:
    if opts.collective not in OP_COLUMN:
        return [None]
    if opts.op_spec.strip().lower() != "all":
        return list(opts.ops)
    return [op for op in opts.ops if version >= OP_MIN_VERSION.get(op, 0)]


def worker_main(
    opts: Options, argv: Sequence[str], where: RankInfo | None = None, cupy: Any = None, nccl: Any = None
) -> int:
    """One rank. Exit codes: 0 all good, 1 wrong results or bandwidth under NCCL_TESTS_MIN_BW, 3 an error."""
    configure_logging()
    start_time = time.strftime("%Y-%m-%d %H:%M:%S")
    w: Worker | None = None
    rank = where.rank if where is not None else int(os.environ.get("MSCCLPP_NCCL_RANK", "0"))
    doc: dict[str, Any] = {}
    try:
        w = Worker(opts, where or RankInfo.from_env(), cupy, nccl)
        rank = w.rank
        w.init_comm()
        devices = w.group.allgather(w.device_line())
        min_cc = min(d["cc"] for d in devices)
        types = _run_types(opts, w.version, min_cc)
        ops = _run_ops(opts, w.version)
        roots = [-1]
        if opts.collective in ROOTED:
            if opts.root >= w.nranks:
                raise BenchError(f"root {opts.root} is not a rank of {w.nranks}")
            roots = list(range(w.nranks)) if opts.root == -1 else [opts.root]
        for op in ops:
            if op == "mulsum" and opts.collective in REDUCING and w.version < 21100:
                raise BenchError("mulsum needs NCCL 2.11 or later")
        sizes = opts.sizes()
        cycles = max(opts.run_cycles, 1)  # -N 0 (forever): the progress of the first sweep
        total = cycles * len(types) * len(ops) * len(roots) * sum(2 * row_seconds(opts, n) for n in sizes)
        w.progress = for_rank(rank, total)
        program = program_name(opts.collective)
        doc = {
            "version": 2,
            "benchmark": "mscclpp_nccl.bench",
            "collective": opts.collective,
            "start_time": start_time,
            "args": list(argv),
            "nccl_version": w.version,
            "library": w.nccl.path,
            "config": config_doc(opts, w.nranks),
            "environment": {
                "hostname": socket.gethostname(),
                "python": sys.version.split()[0],
                "numpy": np.__version__,
                "cupy": getattr(w.cp, "__version__", "?"),
                "ranks": w.nranks,
                "mps": bool(os.environ.get("CUDA_MPS_PIPE_DIRECTORY")),
                "env": env_summary(),
            },
            "devices": devices,
            "results": w.results,
        }
        if rank == 0:
            print_header(opts, w.version, w.nccl.path, w.nranks, devices, program)
        w.alloc()
        for dt in types:
            for op in ops:
                for root in roots:
                    w.time_test(dt, op, root, sizes)
        errors = int(sum(w.group.allgather(w.local_errors)))
        avg_bw = w.bw_sum / w.bw_count if w.bw_count else 0.0
        min_bw_env = os.environ.get("NCCL_TESTS_MIN_BW")
        min_bw = float(min_bw_env) if min_bw_env else None
        w.teardown()
        if rank == 0:
            print("\n".join(footer_lines(errors, avg_bw, min_bw, program)), flush=True)
            print("", flush=True)
            doc["out_of_bounds"] = {"count": errors, "okay": errors == 0}
            doc["average_bus_bandwidth"] = {
                "bandwidth": avg_bw,
                "okay": "unchecked" if min_bw is None else avg_bw >= 0.9 * min_bw,
            }
            doc["errors"] = []
            write_json(opts.json_path, doc)
        bad_bw = min_bw is not None and avg_bw < 0.9 * min_bw
        return 1 if errors or bad_bw else 0
    except Exception as e:  # every failure: say what, abort the communicator, exit non-zero
        message = f"{type(e).__name__}: {e}" if not isinstance(e, BenchError) else str(e)
        log.error("rank %d: %s", rank, message)
        if rank == 0:
            print(f"# error: {message}", flush=True)
            if doc:
                doc["errors"] = [message]
                with contextlib.suppress(Exception):
                    write_json(opts.json_path, doc)
        if w is not None:
            w.abort()
            w.group.close()
        return 3
