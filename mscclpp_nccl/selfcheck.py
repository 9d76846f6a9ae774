"""`python -m mscclpp_nccl selfcheck`: checks and times all-reduce on this machine's GPUs.

Without a GPU, CuPy or a loadable library it says so, shows what was built, and exits 3 (nothing
checked). With GPUs it starts N ranks through the launcher (under MPS when they share a GPU); each checks
float32 and bfloat16 sum all-reduce against a float64 NumPy reference, then times out-of-place all-reduce
as nccl-tests does. Rank 0 prints the table.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ._cli import configure_logging, exit_with
from .info import describe

MIB = 1 << 20
log = logging.getLogger("mscclpp_nccl.selfcheck")


def sizes(min_bytes: int, max_bytes: int) -> list[int]:
    """min_bytes, x4, ... up to max_bytes, always ending at max_bytes."""
    out = []
    s = min_bytes
    while s < max_bytes:
        out.append(s)
        s *= 4
    out.append(max_bytes)
    return out


# --- bfloat16 on the host (NumPy has none): ml_dtypes', round-to-nearest-even from float32 --------------


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return x.astype(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)


def from_bf16_bits(b: np.ndarray) -> np.ndarray:
    import ml_dtypes

    return b.astype(np.uint16).view(ml_dtypes.bfloat16).astype(np.float32)


def rank_input(rank: int, nbytes: int, dtype: str) -> np.ndarray:
    """Rank's input as it lies in GPU memory (bf16 as uint16 bits); every rank can rebuild any rank's."""
    rng = np.random.default_rng([rank, nbytes, 1 if dtype == "bfloat16" else 0])
    if dtype == "float32":
        return rng.uniform(-1.0, 1.0, nbytes // 4).astype(np.float32)
    return to_bf16_bits(rng.uniform(-1.0, 1.0, nbytes // 2).astype(np.float32))


def as_float64(data: np.ndarray, dtype: str) -> np.ndarray:
    return (from_bf16_bits(data) if dtype == "bfloat16" else data).astype(np.float64)


def tolerance(dtype: str, nranks: int) -> float:
    """Allowed error relative to sum(|x_r|): the rounding of n-1 additions in the element type."""
    return 1e-5 * nranks if dtype == "float32" else 1e-2


def reference(nranks: int, nbytes: int, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(sum of every rank's input, sum of their magnitudes), in float64."""
    ref = mag = None
    for r in range(nranks):
        x = as_float64(rank_input(r, nbytes, dtype), dtype)
        ref = x.copy() if ref is None else ref + x
        mag = np.abs(x) if mag is None else mag + np.abs(x)
    assert ref is not None and mag is not None
    return ref, mag


def compare(got: np.ndarray, ref: np.ndarray, mag: np.ndarray, dtype: str, nranks: int) -> str | None:
    """None when got matches the reference within tolerance, else a description."""
    err = np.abs(as_float64(got, dtype) - ref)
    bad = err > tolerance(dtype, nranks) * mag + 1e-30
    if not bad.any():
        return None
    i = int(np.argmax(bad))
    return (
        f"{int(bad.sum())} of {got.size} elements wrong; first at {i}: "
        f"got {as_float64(got[i : i + 1], dtype)[0]!r}, expected {ref[i]!r}"
    )


# --- the per-rank worker -------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> int:
    from .communicator import Communicator, world_from_env

    rank, nranks, uid = world_from_env()
    try:
        import cupy as cp
    except ImportError as e:
        log.error("nothing checked: %s", e)
        return EXIT_UNCHECKED
    failures = 0
    rows: list[tuple[int, str, float, str]] = []
    with Communicator(nranks, rank, uid) as comm, cp.cuda.Device(comm.device):
        stream = cp.cuda.Stream(non_blocking=True)
        # Every CuPy copy, fill and allocation below is ordered on this stream too: a non-blocking
        # stream does not wait for the legacy default stream, so filling there would race the kernels.
        stream.use()
        for dtype in args.dtypes:
            for nbytes in sizes(args.min_bytes, args.max_bytes):
                host = rank_input(rank, nbytes, dtype)
                ref, mag = reference(nranks, nbytes, dtype)
                send = cp.asarray(host)
                recv = cp.zeros_like(send)
                status = "ok"
                for mode in ("out-of-place", "in-place"):
                    buf = send if mode == "out-of-place" else cp.asarray(host)
                    out = recv if mode == "out-of-place" else buf
                    comm.all_reduce(buf, out, "sum", stream=stream, dtype=dtype)
                    stream.synchronize()
                    problem = compare(cp.asnumpy(out), ref, mag, dtype, nranks)
                    if problem:
                        failures += 1
                        status = "WRONG"
                        print(f"rank {rank}: {dtype} {nbytes} B {mode}: {problem}", flush=True)
                us = time_all_reduce(comm, send, recv, dtype, stream, args.warmup, args.iters)
                rows.append((nbytes, dtype, us, status))
                del send, recv
        # Every rank learns the total count of failures and the mean time per size (as nccl-tests does).
        stats = cp.asarray([float(failures)] + [r[2] for r in rows], dtype=cp.float32)
        comm.all_reduce(stats, op="sum", stream=stream)
        stream.synchronize()
        totals = cp.asnumpy(stats)
    total_failures = int(totals[0])
    if rank == 0:
        print_table(rows, [t / nranks for t in totals[1:]], nranks)
        verdict = "all results correct" if total_failures == 0 else f"{total_failures} wrong results"
        print(f"selfcheck: {nranks} ranks, {verdict}", flush=True)
    return 0 if failures == 0 and total_failures == 0 else 1


def time_all_reduce(
    comm: Any, send: Any, recv: Any, dtype: str, stream: Any, warmup: int, iters: int
) -> float:
    """Microseconds per out-of-place call: host wall time over `iters` back-to-back calls, then sync."""
    for _ in range(warmup):
        comm.all_reduce(send, recv, "sum", stream=stream, dtype=dtype)
    stream.synchronize()
    comm.barrier()  # start together, or the first rank's time includes the others' lateness
    t0 = time.perf_counter()
    for _ in range(iters):
        comm.all_reduce(send, recv, "sum", stream=stream, dtype=dtype)
    stream.synchronize()
    return (time.perf_counter() - t0) / iters * 1e6


def print_table(rows: list[tuple[int, str, float, str]], times: list[float], nranks: int) -> None:
    print(
        f"\nall_reduce, sum, out-of-place, {nranks} ranks (time: mean over ranks of host wall time per call)"
    )
    print(
        f"{'size (B)':>12} {'count':>12} {'type':>9} {'time (us)':>10} {'algbw GB/s':>11} {'busbw GB/s':>11}"
        f" {'check':>6}"
    )
    for (nbytes, dtype, _own, status), us in zip(rows, times, strict=True):
        elem = 4 if dtype == "float32" else 2
        algbw = nbytes / (us * 1e-6) / 1e9
        busbw = algbw * 2 * (nranks - 1) / nranks
        cols = f"{nbytes:>12} {nbytes // elem:>12} {dtype:>9} {us:>10.2f}"
        print(f"{cols} {algbw:>11.2f} {busbw:>11.2f} {status:>6}")
    sys.stdout.flush()


# --- the command ---------------------------------------------------------------------------------------


EXIT_WRONG = 1  # a rank failed or a result was wrong
EXIT_USAGE = 2  # a mistake on the command line
EXIT_UNCHECKED = 3  # nothing could be checked: no GPU, no CuPy, or no loadable library

EPILOG = (
    f"exit codes: 0 every result correct, {EXIT_WRONG} a wrong result or a failed rank, {EXIT_USAGE} a"
    f" command-line mistake, {EXIT_UNCHECKED} nothing checked (no GPU, no CuPy or no loadable library),"
    " 124 timeout"
)


def _size(text: str) -> int:
    from .bench.options import parse_size

    try:
        return parse_size(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _count(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid integer {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, not {value}")
        return value

    return parse


def build_parser() -> argparse.ArgumentParser:
    from .run import seconds

    parser = argparse.ArgumentParser(
        prog="python -m mscclpp_nccl selfcheck", description=__doc__.split("\n")[0], epilog=EPILOG
    )
    parser.add_argument(
        "-n", "--nranks", type=_count(1), default=4, help="ranks to start (default 4; they share GPUs)"
    )
    parser.add_argument("--timeout", type=seconds, default=600, help="seconds before every rank is killed")
    parser.add_argument(
        "--min-bytes", type=_size, default=8, help="smallest size (K/M/G suffixes; default 8)"
    )
    parser.add_argument("--max-bytes", type=_size, default=64 * MIB, help="largest size (default 64M)")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="comma-separated: float32, bfloat16")
    parser.add_argument("--warmup", type=_count(0), default=5, help="untimed calls per size (default 5)")
    parser.add_argument("--iters", type=_count(1), default=20, help="timed calls per size (default 20)")
    parser.add_argument("--no-mps", action="store_true", help="do not use MPS even when ranks share a GPU")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    parser = build_parser()
    args = parser.parse_args(argv)
    args.dtypes = [d.strip() for d in args.dtypes.split(",") if d.strip()]
    if not args.dtypes:
        parser.error("--dtypes names no data type")
    for d in args.dtypes:
        if d not in ("float32", "bfloat16"):
            parser.error(f"unsupported dtype {d!r} (float32 or bfloat16)")
    if args.min_bytes < 4:
        parser.error(f"--min-bytes must be at least 4 (one float32), not {args.min_bytes}")
    if args.min_bytes > args.max_bytes:
        parser.error(f"--min-bytes {args.min_bytes} is more than --max-bytes {args.max_bytes}")
    if args.worker:
        from .run import guarded

        return guarded(log, lambda: worker(args))

    import importlib.util

    from .run import guarded, launch, visible_gpus

    lines, loadable = describe()
    gpus = visible_gpus()
    print("\n".join(lines), flush=True)
    unchecked = None
    if not gpus:
        unchecked = "no NVIDIA GPU visible"
    elif not loadable:
        unchecked = "the library does not load (see version above)"
    elif importlib.util.find_spec("cupy") is None:
        unchecked = "CuPy is not installed (pip install cupy-cuda13x, or cupy-cuda12x on CUDA 12)"
    if unchecked:
        log.error("nothing checked: %s", unchecked)
        return EXIT_UNCHECKED
    shared = args.nranks > len(gpus)
    print(
        f"selfcheck: {args.nranks} ranks on {len(gpus)} GPU(s){' (shared, MPS)' if shared else ''}",
        flush=True,
    )
    cmd = [sys.executable, "-m", "mscclpp_nccl.selfcheck", "--worker", "--dtypes", ",".join(args.dtypes)]
    cmd += ["--min-bytes", str(args.min_bytes), "--max-bytes", str(args.max_bytes)]
    cmd += ["--warmup", str(args.warmup), "--iters", str(args.iters)]
    return guarded(
        log,
        lambda: launch(args.nranks, cmd, mps=shared and not args.no_mps, share=True, timeout=args.timeout),
    )


if __name__ == "__main__":
    exit_with(main)
