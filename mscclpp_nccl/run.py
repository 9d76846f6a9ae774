"""Launcher: `python -m mscclpp_nccl.run -n N [--mps | --share-gpus] [--timeout S] [--gpus LIST] -- CMD`.

Starts N processes of CMD on this host with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT, GROUP_RANK) and a unique id made by our library in this
process (its root service thread lives here, so the launcher stays alive until every rank has exited).
CUDA_VISIBLE_DEVICES is left as the user gave it (--gpus sets it, the same for every rank), so rank r uses
device LOCAL_RANK as under torchrun. Several ranks share a GPU only when asked (--mps, or --share-gpus
without MPS): the ranks then get consecutive devices in blocks (or round-robin with --assign), and
each finds its device index in MSCCLPP_NCCL_DEVICE, which every rank gets (it equals LOCAL_RANK when no
GPU is shared and no host is faked).
With --fake-hosts the ranks pose as several hosts (MSCCLPP_NCCL_HOST_ID), so that the library's
multi-host path can run on one machine (the library passes the same hosts to its private stock NCCL,
whose network transport then joins them); LOCAL_RANK then counts within each fake host, and the device is
MSCCLPP_NCCL_DEVICE. Works with no GPU for CPU-only commands.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import logging
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import IO, TypeVar

from ._cli import configure_logging, exit_with
from .gpus import visible_gpus

log = logging.getLogger("mscclpp_nccl.run")

TIMEOUT_EXIT = 124  # like coreutils timeout(1)


NOT_FOUND_EXIT = 127  # like a shell: the command was not found
NOT_EXECUTABLE_EXIT = 126  # like a shell: found, but it cannot be run

_T = TypeVar("_T")


class CommandError(ValueError):
    """A command that cannot be started; exit_code is what a shell would return for it (126 or 127)."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def guarded(logger: logging.Logger, run: Callable[[], _T]) -> _T | int:
    """run()'s result, or a command's exit code: 130 on Ctrl-C; on RuntimeError, ValueError or OSError,
    the reason logged as an error and 2 (or the CommandError's exit code)."""
    try:
        return run()
    except KeyboardInterrupt:
        return 130
    except (RuntimeError, ValueError, OSError) as e:
        logger.error("%s", e)
        return getattr(e, "exit_code", 2)


def check_command(cmd: Sequence[str], env: dict[str, str]) -> None:
    """CommandError (saying why, with a shell's exit code) unless cmd[0] names a program that can run: a
    path to an executable file, or a name found on env's PATH."""
    prog = cmd[0]
    if os.sep in prog:
        if not os.path.exists(prog):
            raise CommandError(f"{prog}: no such file", NOT_FOUND_EXIT)
        if os.path.isdir(prog) or not os.access(prog, os.X_OK):
            raise CommandError(f"{prog}: not an executable file", NOT_EXECUTABLE_EXIT)
        return
    if shutil.which(prog, path=env.get("PATH", os.defpath)) is None:
        raise CommandError(f"{prog}: command not found", NOT_FOUND_EXIT)


def assign_gpus(nranks: int, gpus: Sequence[str], mode: str = "blocked") -> list[str | None]:
    """The GPU of each rank: blocked puts consecutive ranks on one GPU, round-robin deals them out."""
    if not gpus:
        return [None] * nranks
    g = len(gpus)
    if mode == "round-robin":
        return [gpus[r % g] for r in range(nranks)]
    if mode != "blocked":
        raise ValueError(f"unknown assignment {mode!r}")
    # Spread as evenly as possible: the first (nranks % g) GPUs get one rank more.
    per, extra = divmod(nranks, g)
    out: list[str | None] = []
    for i, gpu in enumerate(gpus):
        out += [gpu] * (per + (1 if i < extra else 0))
    return out


FAKE_HOST_PREFIX = "fake-host-"


def fake_host_names(spec: str, nranks: int) -> list[str]:
    """The fake host of each rank for --fake-hosts SPEC: an integer H splits the ranks into H hosts of
    consecutive ranks as evenly as assign_gpus's blocked mode (named 0..H-1); otherwise SPEC is a
    comma-separated list of one host name per rank, e.g. `a,b,a,b` for interleaved hosts."""
    text = spec.strip()
    try:
        nhosts = int(text)
    except ValueError:
        names = [name.strip() for name in text.split(",")]
        if len(names) != nranks:
            raise ValueError(
                f"--fake-hosts {spec!r}: {len(names)} host names for {nranks} ranks (give one per rank, "
                "or a number of hosts)"
            ) from None
        empty = [rank for rank, name in enumerate(names) if not name]
        if empty:
            raise ValueError(f"--fake-hosts {spec!r}: empty host name for rank(s) {empty}") from None
        return names
    if nhosts < 1:
        raise ValueError(f"--fake-hosts {spec!r}: the number of hosts must be at least 1")
    if nhosts > nranks:
        raise ValueError(f"--fake-hosts {spec!r}: more hosts than the {nranks} ranks")
    # The same split as the GPUs': the first nranks % H hosts get one rank more.
    hosts = assign_gpus(nranks, [str(h) for h in range(nhosts)])
    return [h for h in hosts if h is not None]  # none is None: the host list is not empty


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


DEVICE_ENV = "MSCCLPP_NCCL_DEVICE"  # the device index (among the visible GPUs) a rank uses


def rank_env(
    base: dict[str, str],
    rank: int,
    nranks: int,
    device: int | None,
    unique_id: str | None,
    master_port: int,
    mps_env: dict[str, str] | None = None,
    hosts: Sequence[str] | None = None,
    visible: str | None = None,
) -> dict[str, str]:
    """The environment of one rank: torchrun's variables, ours, and the device index of the rank among
    the visible GPUs (MSCCLPP_NCCL_DEVICE; none without a GPU). CUDA_VISIBLE_DEVICES is inherited, or
    `visible` for every rank. `hosts` (from fake_host_names) names every rank's fake host: the rank then
    gets MSCCLPP_NCCL_HOST_ID and its place in that host as its local rank, replacing any inherited
    MSCCLPP_NCCL_HOST_ID."""
    if hosts is not None and len(hosts) != nranks:
        raise ValueError(f"{len(hosts)} fake hosts given for {nranks} ranks")
    env = dict(base)
    local_rank, local_size, group_rank = rank, nranks, 0
    if hosts is not None:
        host = hosts[rank]
        # Local ranks count in rank order, as the library numbers a host's ranks; hosts in order of
        # their lowest rank.
        local_rank = sum(1 for h in hosts[:rank] if h == host)
        local_size = sum(1 for h in hosts if h == host)
        group_rank = list(dict.fromkeys(hosts)).index(host)
        env["MSCCLPP_NCCL_HOST_ID"] = FAKE_HOST_PREFIX + host
    env.update(
        {
            "MSCCLPP_NCCL_RANK": str(rank),
            "MSCCLPP_NCCL_WORLD_SIZE": str(nranks),
            "MSCCLPP_NCCL_LOCAL_RANK": str(local_rank),
            "RANK": str(rank),
            "WORLD_SIZE": str(nranks),
            "LOCAL_RANK": str(local_rank),
            "LOCAL_WORLD_SIZE": str(local_size),
            "GROUP_RANK": str(group_rank),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(master_port),
        }
    )
    if unique_id is not None:
        env["MSCCLPP_NCCL_UNIQUE_ID"] = unique_id
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    if device is not None:
        env[DEVICE_ENV] = str(device)
    else:
        env.pop(DEVICE_ENV, None)  # an inherited one would name another launch's device
    env.setdefault("NCCL_NVLS_ENABLE", "0")  # NVLink multicast can take shared GPUs out of service
    env.setdefault("PYTHONUNBUFFERED", "1")  # so that a rank's lines show up as they are printed
    if mps_env:
        env.update(mps_env)
    return env


def assign_devices(nranks: int, ngpus: int, mode: str = "blocked") -> list[int | None]:
    """The device index of each rank among ngpus visible GPUs (assign_gpus's rule); None without GPUs."""
    return [None if g is None else int(g) for g in assign_gpus(nranks, [str(i) for i in range(ngpus)], mode)]


def sharing_refusal(nranks: int, ngpus: int) -> str | None:
    """Why N ranks cannot run one per GPU, for a launch that did not ask to share GPUs; None when they can."""
    if ngpus == 0 or nranks <= ngpus:
        return None
    return (
        f"{nranks} ranks but {ngpus} GPU(s) visible: ranks would share GPUs. Pass --mps (ranks share GPUs"
        " under MPS) or --share-gpus (without MPS); each rank then finds its device index in"
        f" {DEVICE_ENV}, not in LOCAL_RANK"
    )


# --- MPS ---------------------------------------------------------------------------------------------


# An MPS client gets 2 hardware work queues unless CUDA_DEVICE_MAX_CONNECTIONS asks for more; a context
# without MPS gets 8. A process's streams take the queues in turn, and streams on one queue run as one,
# so with ranks' calls on more streams than queues a call waiting for its peers holds back another
# stream's call that those peers need first (perf/mps_stream_probe.cu: with 8 clients the kernel of a
# third stream never started behind two blocked ones). The clients of one GPU share one pool of queues:
# 8 clients of 12 each all started, 8 of 16 did not (one H100).
DEFAULT_QUEUES = 8
MPS_QUEUE_POOL = 96


def mps_queues(ranks_per_gpu: int) -> int:
    """CUDA_DEVICE_MAX_CONNECTIONS for each of `ranks_per_gpu` MPS clients of one GPU: what a process has
    without MPS, as far as the GPU's pool allows."""
    return max(2, min(DEFAULT_QUEUES, MPS_QUEUE_POOL // max(1, ranks_per_gpu)))


def _mps_control(env: dict[str, str], command: str, timeout: float = 10.0) -> bool:
    ctl = shutil.which("nvidia-cuda-mps-control")
    if not ctl:
        return False
    try:
        r = subprocess.run(
            [ctl], input=command + "\n", env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0


@contextlib.contextmanager
def mps_daemon(base_env: dict[str, str]) -> Iterator[dict[str, str]]:
    """Yields the MPS variables the ranks need. Reuses a daemon reachable with the inherited pipe
    directory (and leaves it running); else starts a private one and always stops it on the way out."""
    if _mps_control(base_env, "get_server_list"):
        log.info("using the running MPS daemon")
        names = ("CUDA_MPS_PIPE_DIRECTORY", "CUDA_MPS_LOG_DIRECTORY")
        yield {k: base_env[k] for k in names if k in base_env}
        return
    if not shutil.which("nvidia-cuda-mps-control"):
        raise RuntimeError("--mps: nvidia-cuda-mps-control not found")
    top = tempfile.mkdtemp(prefix="mscclpp-nccl-mps-")
    mps = {
        "CUDA_MPS_PIPE_DIRECTORY": os.path.join(top, "pipe"),
        "CUDA_MPS_LOG_DIRECTORY": os.path.join(top, "log"),
    }
    for d in mps.values():
        os.makedirs(d)
    env = {**base_env, **mps}
    try:
        # Output to a file, not a pipe: the daemon may keep inherited descriptors open, and reading a
        # pipe until it closes would then wait for the daemon's end.
        out_path = os.path.join(top, "control.out")
        with open(out_path, "w") as out:
            r = subprocess.run(
                ["nvidia-cuda-mps-control", "-d"], env=env, stdout=out, stderr=subprocess.STDOUT
            )
        if r.returncode != 0:
            with open(out_path) as f:
                raise RuntimeError(f"nvidia-cuda-mps-control -d failed: {f.read().strip()}")
        # Wait until the daemon answers so that no rank starts before MPS is up (and runs without it).
        deadline = time.monotonic() + 10
        while not _mps_control(env, "get_server_list", timeout=5):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the MPS daemon did not come up; see {mps['CUDA_MPS_LOG_DIRECTORY']}")
            time.sleep(0.1)
        log.info("started a private MPS daemon in %s", top)
        yield mps
    finally:
        _mps_control(env, "quit")
        # The daemon removes its pipe files on quit; give it a moment before removing the directories.
        for _ in range(50):
            if not os.path.exists(os.path.join(mps["CUDA_MPS_PIPE_DIRECTORY"], "control")):
                break
            time.sleep(0.1)
        shutil.rmtree(top, ignore_errors=True)


# --- processes ---------------------------------------------------------------------------------------


# Where a command wants its ranks' lines: (rank, whether from stderr, the line).
OutputSink = Callable[[int, bool, bytes], None]


def _pump(stream: IO[bytes], write: Callable[[bytes], None], prefix: bytes, lock: threading.Lock) -> None:
    for line in iter(stream.readline, b""):
        if not line.endswith(b"\n"):
            line += b"\n"
        with lock:
            write(prefix + line)
    stream.close()


def _writer(out: IO[bytes]) -> Callable[[bytes], None]:
    def write(data: bytes) -> None:
        out.write(data)
        out.flush()

    return write


def _kill_group(proc: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, sig)


def _stop_all(procs: list[subprocess.Popen[bytes]], wait: float = 3.0) -> None:
    """SIGTERM every rank's process group, then SIGKILL what is left after `wait` seconds."""
    live = [p for p in procs if p.poll() is None]
    for p in live:
        _kill_group(p, signal.SIGTERM)
    deadline = time.monotonic() + wait
    for p in live:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=max(0.0, deadline - time.monotonic()))
    for p in procs:
        # Also the group of a rank that exited, in case it left children behind.
        _kill_group(p, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=5)


def _exit_code(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode


class _Terminated(Exception):
    pass


def _on_sigterm(signum: int, frame: object) -> None:
    raise _Terminated()


def make_unique_id() -> str | None:
    """A unique id from our library, as hex; None (with a warning) when the library cannot be loaded."""
    try:
        from .binding import Nccl, unique_id_to_hex

        return unique_id_to_hex(Nccl.load().get_unique_id())
    except Exception as e:
        log.warning("no NCCL unique id for the ranks (%s)", e)
        return None


def launch(
    nranks: int,
    cmd: Sequence[str],
    *,
    mps: bool = False,
    timeout: float | None = None,
    gpus: Sequence[str] | None = None,
    assign: str = "blocked",
    prefix: bool = True,
    grace: float = 3.0,
    unique_id: bool = True,
    env: dict[str, str] | None = None,
    output: OutputSink | None = None,
    fake_hosts: str | None = None,
    share: bool | None = None,
) -> int:
    """Runs the ranks to the end; returns 0, the first failing rank's exit code, or 124 on timeout.

    The ranks' lines go to this process's stdout and stderr as they come, or to output where given.
    gpus replaces CUDA_VISIBLE_DEVICES for every rank. More ranks than GPUs need share (None: as mps
    says): ValueError otherwise. fake_hosts is a --fake-hosts SPEC (fake_host_names); it overrides an
    inherited MSCCLPP_NCCL_HOST_ID."""
    if nranks < 1:
        raise ValueError("nranks must be at least 1")
    if not cmd:
        raise ValueError("no command to run")
    base = dict(os.environ if env is None else env)
    check_command(cmd, base)
    # Checked before anything starts, so that a bad spec costs no MPS daemon or unique id.
    hosts = fake_host_names(fake_hosts, nranks) if fake_hosts is not None else None
    visible = ",".join(gpus) if gpus is not None else None
    gpu_list = list(gpus) if gpus is not None else visible_gpus(base)
    shared = len(gpu_list) > 0 and nranks > len(gpu_list)
    if not (mps if share is None else share):
        refusal = sharing_refusal(nranks, len(gpu_list))
        if refusal:
            raise ValueError(refusal)
    if hosts is not None:
        log.info("fake hosts: %s", _describe_hosts(hosts))
    devices = assign_devices(nranks, len(gpu_list), assign)
    uid = make_unique_id() if unique_id else None
    port = free_port()

    with contextlib.ExitStack() as stack:
        mps_env: dict[str, str] | None = None
        if mps and shared:
            mps_env = dict(stack.enter_context(mps_daemon(base)))
            if "CUDA_DEVICE_MAX_CONNECTIONS" not in base:
                per_gpu = max(devices.count(d) for d in set(devices))
                mps_env["CUDA_DEVICE_MAX_CONNECTIONS"] = str(mps_queues(per_gpu))
        elif mps:
            log.info("--mps: no GPU is shared by several ranks; not using MPS")
        envs = [
            rank_env(base, r, nranks, devices[r], uid, port, mps_env, hosts, visible) for r in range(nranks)
        ]
        rc = _run_ranks(cmd, envs, timeout, prefix, grace, output)
    return rc


def _describe_hosts(hosts: Sequence[str]) -> str:
    """`fake-host-a: ranks 0,2; fake-host-b: ranks 1,3`, hosts in order of their lowest rank."""
    ranks: dict[str, list[int]] = {}
    for rank, host in enumerate(hosts):
        ranks.setdefault(host, []).append(rank)
    return "; ".join(f"{FAKE_HOST_PREFIX}{h}: ranks {','.join(map(str, r))}" for h, r in ranks.items())


def _run_ranks(
    cmd: Sequence[str],
    envs: list[dict[str, str]],
    timeout: float | None,
    prefix: bool,
    grace: float,
    output: OutputSink | None,
) -> int:
    nranks = len(envs)
    lock = threading.Lock()
    procs: list[subprocess.Popen[bytes]] = []
    pumps: list[threading.Thread] = []
    old_term = signal.signal(signal.SIGTERM, _on_sigterm) if _main_thread() else None
    start = time.monotonic()
    first_fail: tuple[int, int] | None = None  # (rank, exit code)
    fail_time = 0.0
    try:
        for rank in range(nranks):
            try:
                p = subprocess.Popen(
                    list(cmd),
                    env=envs[rank],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    start_new_session=True,  # a process group per rank, so a kill reaches its children too
                )
            except OSError as e:  # checked before, but the file may have changed since
                _note(lock, logging.ERROR, f"cannot start rank {rank}: {cmd[0]}: {e.strerror or e}")
                _stop_all(procs)
                return NOT_FOUND_EXIT if isinstance(e, FileNotFoundError) else NOT_EXECUTABLE_EXIT
            procs.append(p)
            tag = f"[{rank}] ".encode() if prefix else b""
            assert p.stdout is not None and p.stderr is not None
            for stream, is_err in ((p.stdout, False), (p.stderr, True)):
                if output is None:
                    write = _writer(sys.stderr.buffer if is_err else sys.stdout.buffer)
                else:
                    write = functools.partial(output, rank, is_err)
                t = threading.Thread(target=_pump, args=(stream, write, tag, lock), daemon=True)
                t.start()
                pumps.append(t)
        while True:
            running = False
            for rank, p in enumerate(procs):
                rc = p.poll()
                if rc is None:
                    running = True
                elif rc != 0 and first_fail is None:
                    first_fail = (rank, _exit_code(rc))
                    fail_time = time.monotonic()
                    _note(lock, logging.ERROR, f"rank {rank} exited with code {first_fail[1]}")
            if not running:
                break
            if first_fail is not None and time.monotonic() - fail_time > grace:
                _note(lock, logging.INFO, "stopping the other ranks")
                _stop_all(procs)
                break
            if timeout is not None and time.monotonic() - start > timeout:
                _note(lock, logging.ERROR, f"timeout after {timeout:g} s; stopping every rank")
                _stop_all(procs)
                first_fail = first_fail or (-1, TIMEOUT_EXIT)
                break
            time.sleep(0.02)
    except (KeyboardInterrupt, _Terminated):
        _note(lock, logging.WARNING, "interrupted; stopping every rank")
        _stop_all(procs)
        return 130
    finally:
        _stop_all([p for p in procs if p.poll() is None], wait=1.0)
        for t in pumps:
            t.join(timeout=2)
        if old_term is not None:
            signal.signal(signal.SIGTERM, old_term)
    return first_fail[1] if first_fail else 0


def _main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


def _note(lock: threading.Lock, level: int, text: str) -> None:
    """A line of the launcher's own, never inside a line of a rank's (the pumps hold the lock per line)."""
    with lock:
        log.log(level, "%s", text)


def seconds(text: str) -> float:
    """A positive, finite number of seconds (an argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, not {text!r}")
    return value


def main(argv: Sequence[str] | None = None) -> int:
    configure_logging()
    parser = argparse.ArgumentParser(
        prog="python -m mscclpp_nccl.run",
        description="Run N ranks of a command on this host, with torchrun's variables: rank r uses device"
        " LOCAL_RANK of CUDA_VISIBLE_DEVICES, which is left as given. More ranks than GPUs need --mps or"
        " --share-gpus; each rank's device index is then MSCCLPP_NCCL_DEVICE (set for every rank).",
        epilog="exit codes: 0 every rank succeeded; else the first failing rank's code, 124 on timeout,"
        " 126/127 when the command cannot run, 2 for a mistake on this command line, 130 when interrupted",
    )
    parser.add_argument("-n", "--nranks", type=int, required=True, help="number of ranks")
    parser.add_argument(
        "--mps",
        action="store_true",
        help="let ranks share GPUs, under MPS (a private daemon, or the one CUDA_MPS_PIPE_DIRECTORY names)",
    )
    parser.add_argument(
        "--share-gpus",
        action="store_true",
        help="let ranks share GPUs without MPS (time-sliced: slow, for functional runs)",
    )
    parser.add_argument("--timeout", type=seconds, default=None, help="kill every rank after SECONDS")
    parser.add_argument(
        "--gpus",
        default=None,
        help="comma-separated GPUs (indices or UUIDs) to use: the ranks' CUDA_VISIBLE_DEVICES (default: as"
        " inherited)",
    )
    parser.add_argument(
        "--assign",
        choices=["blocked", "round-robin"],
        default="blocked",
        help="how shared GPUs are dealt: consecutive ranks on one GPU (blocked, the default) or in turn",
    )
    parser.add_argument("--no-prefix", action="store_true", help="do not prefix output lines with [rank]")
    parser.add_argument(
        "--grace",
        type=seconds,
        default=3.0,
        help="seconds the other ranks may run on after one fails (default 3)",
    )
    parser.add_argument(
        "--fake-hosts",
        metavar="SPEC",
        default=None,
        help="pose as several hosts: a number H (H hosts of consecutive ranks) or one host name per rank, "
        "comma-separated (e.g. a,b,a,b); sets MSCCLPP_NCCL_HOST_ID (over an inherited one) and the local "
        "ranks",
    )
    parser.add_argument("cmd", nargs=argparse.REMAINDER, help="-- CMD ...")
    args = parser.parse_args(argv)
    cmd = args.cmd[1:] if args.cmd[:1] == ["--"] else args.cmd
    if not cmd:
        parser.error("no command given (put it after --)")
    gpus = [g.strip() for g in args.gpus.split(",") if g.strip()] if args.gpus is not None else None
    if gpus is not None and not gpus:
        parser.error(f"--gpus {args.gpus!r} names no GPU")
    return guarded(
        log,
        lambda: launch(
            args.nranks,
            cmd,
            mps=args.mps,
            timeout=args.timeout,
            gpus=gpus,
            assign=args.assign,
            prefix=not args.no_prefix,
            grace=args.grace,
            fake_hosts=args.fake_hosts,
            share=args.mps or args.share_gpus,
        ),
    )


if __name__ == "__main__":
    exit_with(main)
