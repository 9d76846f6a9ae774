"""Helpers shared by the real-client GPU tests (tests/clients/*_worker.py and tests/test_*_client.py).

Worker side: which libnccl.so.2 is ours, whether it is mapped into this process, which object the
process-wide symbol lookup (the one that binds a client's undefined `nccl*` references) lands in,
PASS/FAIL lines, per-item deadlines and a small item runner.
Pytest side: launching N ranks of a worker under the launcher with our library in LD_PRELOAD, with a
hard timeout, and reading back which rank passed which item.

Only the standard library is imported here, so that pytest can load this module without torch or CuPy.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import faulthandler
import os
import re
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXPECT_LIB_ENV = "MSCCLPP_NCCL_EXPECT_LIB"
TIMEOUT_EXIT = 124

# Item names of each worker, in the order they run (pytest reads these without importing torch or CuPy).
# Every run also has the steps "init" (first) and "destroy" (last).
TORCH_ITEMS = (
    "library",
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "all_to_all_unequal",
    "broadcast",
    "send_recv",
    "barrier",
    "new_group",
    "graph",
)
CUPY_ITEMS = (
    "library",
    "comm_info",
    "all_reduce",
    "bcast",
    "broadcast",
    "reduce",
    "all_gather",
    "reduce_scatter",
    "send_recv",
    "init_all",
    "own_unique_id",
)

# Functions every client binds; where the process-wide lookup finds them is where the client's calls go.
CORE_SYMBOLS = (
    "ncclGetVersion",
    "ncclGetUniqueId",
    "ncclCommInitRank",
    "ncclCommInitRankConfig",
    "ncclCommInitAll",
    "ncclCommSplit",
    "ncclCommDestroy",
    "ncclCommAbort",
    "ncclCommGetAsyncError",
    "ncclCommCuDevice",
    "ncclCommUserRank",
    "ncclCommCount",
    "ncclAllReduce",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclBroadcast",
    "ncclBcast",
    "ncclReduce",
    "ncclSend",
    "ncclRecv",
    "ncclGroupStart",
    "ncclGroupEnd",
)


# --- which library -----------------------------------------------------------------------------------


def our_library() -> Path:
    """Resolved path of the libnccl.so.2 under test: $MSCCLPP_NCCL_EXPECT_LIB, else the package's."""
    env = os.environ.get(EXPECT_LIB_ENV)
    if env:
        return Path(env).resolve()
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from mscclpp_nccl._library import library_path

    return library_path().resolve()


def library_version(path: str | os.PathLike[str]) -> int:
    """ncclGetVersion of the library at `path` (loads it into this process)."""
    lib = ctypes.CDLL(os.fspath(path))
    version = ctypes.c_int(0)
    rc = lib.ncclGetVersion(ctypes.byref(version))
    if rc != 0:
        raise RuntimeError(f"ncclGetVersion of {path} returned {rc}")
    return version.value


def version_tuple(code: int) -> tuple[int, int, int]:
    """NCCL's version code as (major, minor, patch); codes from 2.9 on are X*10000 + Y*100 + Z."""
    if code < 2900:
        return code // 1000, (code % 1000) // 100, code % 100
    return code // 10000, (code % 10000) // 100, code % 100


# --- what this process has mapped and bound ----------------------------------------------------------


def mapped_files() -> dict[str, tuple[int, int]]:
    """Files mapped into this process (from /proc/self/maps): path -> (device, inode)."""
    out: dict[str, tuple[int, int]] = {}
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(maxsplit=5)
            if len(parts) < 6 or not parts[5].startswith("/"):
                continue
            path = parts[5].rstrip("\n")
            major, minor = (int(x, 16) for x in parts[3].split(":"))
            out[path] = (os.makedev(major, minor), int(parts[4]))
    return out


def is_mapped(lib: Path, maps: dict[str, tuple[int, int]] | None = None) -> bool:
    """Whether `lib` is mapped: by resolved path, else by (device, inode) (bind mounts, odd paths)."""
    maps = mapped_files() if maps is None else maps
    real = os.path.realpath(lib)
    if any(os.path.realpath(p) == real for p in maps):
        return True
    st = os.stat(lib)
    return (st.st_dev, st.st_ino) in maps.values()


def nccl_like_mapped(maps: dict[str, tuple[int, int]] | None = None) -> list[str]:
    """Every mapped file whose name starts with libnccl (ours, and any stock copy a client loaded)."""
    maps = mapped_files() if maps is None else maps
    return sorted(p for p in maps if os.path.basename(p).startswith("libnccl"))


class _DlInfo(ctypes.Structure):
    _fields_ = [
        ("dli_fname", ctypes.c_char_p),
        ("dli_fbase", ctypes.c_void_p),
        ("dli_sname", ctypes.c_char_p),
        ("dli_saddr", ctypes.c_void_p),
    ]


def _libdl() -> ctypes.CDLL:
    for name in (None, "libdl.so.2"):  # glibc 2.34+ has dlsym in libc; older ones in libdl
        with contextlib.suppress(OSError, AttributeError):
            lib = ctypes.CDLL(name)
            lib.dlsym  # noqa: B018 (probe)
            lib.dladdr  # noqa: B018 (probe)
            return lib
    raise RuntimeError("dlsym/dladdr not found")


def symbol_owner(name: str) -> str | None:
    """The file that defines `name` as the process-wide lookup (RTLD_DEFAULT) finds it, None if none.

    LD_PRELOAD objects come right after the executable in that lookup, before anything a client
    dlopen()s later, so this is the object a client's undefined `nccl*` references bind to.
    """
    dl = _libdl()
    dl.dlsym.restype = ctypes.c_void_p
    dl.dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    dl.dladdr.restype = ctypes.c_int
    dl.dladdr.argtypes = [ctypes.c_void_p, ctypes.POINTER(_DlInfo)]
    addr = dl.dlsym(None, name.encode())  # RTLD_DEFAULT is ((void*) 0) in glibc
    if not addr:
        return None
    info = _DlInfo()
    if not dl.dladdr(addr, ctypes.byref(info)) or not info.dli_fname:
        return "?"
    return os.path.realpath(info.dli_fname.decode())


def global_nccl_version() -> int:
    """ncclGetVersion as the process-wide lookup finds it (what a client without a handle calls)."""
    fn = ctypes.CDLL(None).ncclGetVersion
    version = ctypes.c_int(0)
    rc = fn(ctypes.byref(version))
    if rc != 0:
        raise RuntimeError(f"ncclGetVersion returned {rc}")
    return version.value


def check_our_library(symbols: Sequence[str] = CORE_SYMBOLS) -> str:
    """Asserts that our library is mapped and that every `symbols` entry binds to it; returns a summary."""
    ours = our_library()
    maps = mapped_files()
    if not is_mapped(ours, maps):
        raise AssertionError(
            f"our library {ours} is not mapped into this process; NCCL-like mappings: "
            f"{nccl_like_mapped(maps) or 'none'} (LD_PRELOAD={os.environ.get('LD_PRELOAD', '')!r})"
        )
    real = os.path.realpath(ours)
    elsewhere = {}
    for name in symbols:
        owner = symbol_owner(name)
        if owner != real:
            elsewhere[name] = owner
    if elsewhere:
        raise AssertionError(f"these symbols do not bind to {real}: {elsewhere}")
    version = global_nccl_version()
    expected = library_version(ours)  # the same object: dlopen of a loaded file returns it
    if version != expected:
        raise AssertionError(f"ncclGetVersion via the global lookup = {version}, ours reports {expected}")
    others = [p for p in nccl_like_mapped(maps) if os.path.realpath(p) != real]
    summary = f"{real} mapped, {len(symbols)} symbols bind to it, ncclGetVersion={version}"
    if others:
        summary += f"; also mapped (no symbol above binds to it): {', '.join(others)}"
    return summary


# --- worker side: items, deadlines, PASS lines --------------------------------------------------------


def passed(name: str, detail: str | None = None) -> None:
    print(f"PASS {name}" + (f": {detail}" if detail else ""), flush=True)


def failed(name: str, error: BaseException) -> None:
    print(f"FAIL {name}: {type(error).__name__}: {error}", flush=True)
    traceback.print_exception(error, file=sys.stderr)
    sys.stderr.flush()


@contextlib.contextmanager
def deadline(name: str, seconds: float) -> Iterator[None]:
    """Ends the process (exit code 124) with a TIMEOUT line and every thread's stack when the body runs
    longer than `seconds`. A Python timer prints the line; faulthandler, which needs no GIL, backs it up
    a little later in case the main thread holds the GIL inside a stuck call."""

    def fire() -> None:
        print(f"TIMEOUT {name}: no result after {seconds:g} s", flush=True)
        with contextlib.suppress(Exception):
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
            sys.stderr.flush()
        os._exit(TIMEOUT_EXIT)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()
    faulthandler.dump_traceback_later(seconds + 15, exit=True)
    try:
        yield
    finally:
        timer.cancel()
        faulthandler.cancel_dump_traceback_later()


def world() -> tuple[int, int]:
    """(rank, world size) from the launcher's environment."""
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])


def device_index() -> int:
    """The CUDA device this rank uses: the launcher's MSCCLPP_NCCL_DEVICE (LOCAL_RANK unless ranks share
    GPUs), as mscclpp_nccl.local_device reads it."""
    from mscclpp_nccl.gpus import local_device

    return local_device()


def parse_args(
    items: Sequence[str], description: str, argv: Sequence[str] | None = None
) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    known = ", ".join(items)
    parser.add_argument("items", nargs="*", help=f"items to run, in any order (default: all): {known}")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds allowed per item (default 120)")
    parser.add_argument("--keep-going", action="store_true", help="run the next items after a failure")
    parser.add_argument("--list", action="store_true", help="print the item names and exit")
    args = parser.parse_args(argv)
    if args.list:
        print("\n".join(items))
        sys.exit(0)
    args.items = chosen_items(parser, args.items, items)
    return args


def chosen_items(
    parser: argparse.ArgumentParser, requested: Sequence[str], items: Sequence[str]
) -> list[str]:
    """The items named in `requested` (comma-separated words allowed), all by default, in the canonical
    order of `items`, so that every rank runs the same collectives in the same order."""
    chosen = [s for a in requested for s in a.split(",") if s]
    unknown = sorted(set(chosen) - set(items))
    if unknown:
        parser.error(f"unknown items {unknown}; known: {', '.join(items)}")
    return [i for i in items if i in chosen] if chosen else list(items)


def run_step(name: str, fn: Callable[[], str | None], timeout: float) -> bool:
    """Runs one step under a deadline; prints PASS or FAIL; returns whether it passed."""
    with deadline(name, timeout):
        try:
            detail = fn()
        except Exception as e:
            failed(name, e)
            return False
    passed(name, detail)
    return True


def run_items(
    items: dict[str, Callable[[], str | None]], selected: Sequence[str], timeout: float, keep_going: bool
) -> bool:
    ok = True
    for name in selected:
        if not run_step(name, items[name], timeout):
            ok = False
            if not keep_going:
                break
    return ok


def hard_exit(code: int) -> None:
    """Exits without interpreter teardown (after a failure, a library's destructors could hang)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


# --- pytest side ---------------------------------------------------------------------------------------

_RESULT = re.compile(r"^\[(\d+)\] (PASS|FAIL|TIMEOUT) ([A-Za-z0-9_]+)(?::|$)")


def preload_value(lib: Path, env: dict[str, str]) -> str:
    """LD_PRELOAD with our library first (any preload already asked for stays after it)."""
    old = env.get("LD_PRELOAD", "")
    return f"{lib}:{old}" if old else str(lib)


def run_launcher(cmd: Sequence[str], env: dict[str, str], limit: float) -> tuple[int, str]:
    """Runs the launcher command `cmd` for at most `limit` seconds; returns (exit code, stdout + stderr).
    A launcher still running then is sent SIGTERM (it stops every rank, each in its own session) and
    then SIGKILL; the exit code is then TIMEOUT_EXIT."""
    proc = subprocess.Popen(
        cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    try:
        out, _ = proc.communicate(timeout=limit)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        text = out.decode(errors="replace")
        return TIMEOUT_EXIT, text + f"\n[test] the launcher outlived {limit:g} s and was stopped\n"
    return proc.returncode, out.decode(errors="replace")


def launch_client(
    nranks: int,
    worker: Path,
    worker_args: Sequence[str],
    lib: Path,
    *,
    timeout: float = 300.0,
    extra_env: dict[str, str] | None = None,
) -> tuple[int, str]:
    """Runs `python -m mscclpp_nccl.run -n N --mps --timeout T -- env LD_PRELOAD=<lib> python WORKER ...`.

    LD_PRELOAD is set in the ranks only (through env(1)), not in the launcher and not in the MPS daemon it
    starts. Returns (exit code, stdout + stderr). A launcher that outlives its own timeout is sent SIGTERM
    (it then stops every rank) and then SIGKILL.
    """
    env = dict(os.environ)
    env.setdefault("MSCCLPP_NCCL_WAIT_TIMEOUT", "60")  # a deadlock costs a minute, not the whole run
    env.setdefault("MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT", "60")
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env[EXPECT_LIB_ENV] = str(lib)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra_env or {})
    rank_cmd = ["env", f"LD_PRELOAD={preload_value(lib, env)}", sys.executable, str(worker), *worker_args]
    cmd = [sys.executable, "-m", "mscclpp_nccl.run", "-n", str(nranks), "--mps", "--timeout", f"{timeout:g}"]
    cmd += ["--", *rank_cmd]
    return run_launcher(cmd, env, timeout + 60)


def results(output: str) -> dict[str, dict[int, str]]:
    """item -> {rank: PASS/FAIL/TIMEOUT} from the launcher's [rank]-prefixed output."""
    out: dict[str, dict[int, str]] = {}
    for line in output.splitlines():
        m = _RESULT.match(line)
        if m:
            rank, verdict, item = int(m.group(1)), m.group(2), m.group(3)
            # A FAIL or TIMEOUT is never overwritten by a later PASS of the same item.
            if out.setdefault(item, {}).get(rank) in (None, "PASS"):
                out[item][rank] = verdict
    return out


def tail(output: str, lines: int = 120) -> str:
    return "\n".join(output.splitlines()[-lines:])


def problems(lines: Sequence[str]) -> str:
    """The FAIL/TIMEOUT lines and the launcher's own notes, for an assertion message."""
    keep = [ln for ln in lines if " FAIL " in ln or " TIMEOUT " in ln or ln.startswith("mscclpp_nccl.run: ")]
    return "\n".join(keep[:60])


def assert_all_passed(output: str, rc: int, nranks: int, steps: Sequence[str]) -> None:
    """Every rank printed PASS for every step, and the launcher exited 0."""
    got = results(output)
    missing = {}
    for step in steps:
        ranks = got.get(step, {})
        bad = [r for r in range(nranks) if ranks.get(r) != "PASS"]
        if bad:
            missing[step] = {r: ranks.get(r, "no result") for r in bad}
    if missing or rc != 0:
        raise AssertionError(
            f"launcher exit code {rc}; steps not passed by every rank: {missing or 'none'}\n"
            f"--- failures ---\n{problems(output.splitlines())}\n--- last lines ---\n{tail(output)}"
        )


def selected_items(env_name: str, items: Sequence[str], always: Sequence[str] = ()) -> list[str]:
    """Items from $env_name (comma-separated; all when unset or empty), plus `always`, in canonical order."""
    raw = os.environ.get(env_name, "").strip()
    chosen = set(items) if not raw else {s.strip() for s in raw.split(",") if s.strip()}
    unknown = sorted(chosen - set(items))
    if unknown:
        raise ValueError(f"{env_name}: unknown items {unknown}; known: {', '.join(items)}")
    chosen |= set(always)
    return [i for i in items if i in chosen]


def elapsed(start: float) -> str:
    return f"{time.monotonic() - start:.1f} s"
