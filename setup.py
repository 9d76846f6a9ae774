"""Builds native/ + shim/ with nvcc into mscclpp_nccl/lib/libnccl.so.2 and installs the package.

The library is always built in place (mscclpp_nccl/lib), so editable installs and `pip install .`
share one incremental object cache in build/native/. Rebuild quickly without pip:

    python setup.py build_native            # incremental
    python setup.py build_native --force    # recompile everything

A wheel (`pip wheel .`, `python -m build --wheel`, and so `pip install .`) is tagged
py3-none-manylinux_2_X for the glibc the library needs and holds one copy of it, libnccl.so.2.

Environment: MSCCLPP_NCCL_CUDA_ARCHS (default "90" for every build; "80,90,100" for a wheel that A100s
and Blackwell GPUs load too, not yet run on them; PTX of the newest is always added), NVCC (path of
nvcc), MSCCLPP_NCCL_BUILD_JOBS (parallel compiles, default os.cpu_count()).

A kernel source that includes native/algorithms/type_shards.cuh is compiled once per type shard (an
element type, or some of its operators or its copies: kTypeShards compiles), so that its instantiations
build in parallel. The slowest compiles start first. Each
compile's seconds are kept in build/native*/compile_times.json; `python setup.py compile_report` prints
the slowest and fails above a budget.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

from setuptools import Command, Distribution, setup
from setuptools.command.build_py import build_py

try:  # setuptools >= 70.1 carries bdist_wheel; older ones take it from the wheel package
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # pragma: no cover
    try:
        from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]
    except ImportError:  # no wheel can be built here, but build_native and compile_report still run
        bdist_wheel = Command  # type: ignore[misc,assignment]

ROOT = Path(__file__).resolve().parent
LIB_DIR = ROOT / "mscclpp_nccl" / "lib"
OBJ_DIR = ROOT / "build" / "native"
SONAME = "libnccl.so.2"
EXPORTS_MAP = ROOT / "shim" / "exports.map"
HEADER_SUFFIXES = (".h", ".cuh", ".hpp", ".inc")
# The package's version, written once in mscclpp_nccl/__init__.py; the library's log banner shows it.
VERSION = next(
    line.split('"')[1]
    for line in (ROOT / "mscclpp_nccl" / "__init__.py").read_text().splitlines()
    if line.startswith("__version__")
)
# Given to every compile, read by the sources that include VERSION_HEADER: only those recompile when the
# version changes (-DMSCCLPP_NCCL_VERSION="x.y.z").
VERSION_DEFINE = "-DMSCCLPP_NCCL_VERSION"
VERSION_HEADER = ROOT / "native" / "common" / "version.h"
# A source that includes this header is compiled once per type shard, with SHARD_DEFINE=k.
TYPE_SHARDS_HEADER = ROOT / "native" / "algorithms" / "type_shards.cuh"
SHARD_DEFINE = "-DMSCCLPP_NCCL_TYPE_SHARD"
# The targets when MSCCLPP_NCCL_CUDA_ARCHS is unset: the GPUs everything is tested on. `pip install .`
# builds a wheel too, and three targets triple its compile time, so a wheel for more GPUs is asked for
# (MSCCLPP_NCCL_CUDA_ARCHS=80,90,100).
DEFAULT_ARCHS = "90"
# sm_100 and cudaGetDriverEntryPointByVersion need CUDA 12.8; 13.0 is what is tested.
MIN_NVCC = (12, 8)
COMPILE_TIMES = "compile_times.json"
# `python setup.py compile_report` fails above these, in seconds of one compile and of all of them.
# Generous on purpose (they catch a doubling, not noise; a busy machine took twice as long): at sm_90 on a
# 2-core machine like CI's, two compiles at a time, the slowest (allreduce_mapped.cu, type shard 9) took
# 12 s and all 207 of them 708 s.
FILE_BUDGET_S = 60.0
TOTAL_BUDGET_S = 2000.0


def _nvcc() -> str:
    candidates = [os.environ.get("NVCC", "")]
    for home in (os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")):
        if home:
            candidates.append(os.path.join(home, "bin", "nvcc"))
    candidates += [shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc"]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise SystemExit(
        f"error: nvcc not found. Building mscclpp-nccl compiles CUDA code and needs CUDA {_dotted(MIN_NVCC)}"
        " or newer: set NVCC or CUDA_HOME, or put nvcc on PATH. Nothing was compiled."
    )


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(map(str, version))


def _nvcc_release(version_text: str) -> tuple[int, int] | None:
    """(major, minor) from `nvcc --version` ("Cuda compilation tools, release 13.0, V13.0.88")."""
    m = re.search(r"release (\d+)\.(\d+)", version_text)
    return (int(m.group(1)), int(m.group(2))) if m else None


def check_nvcc(nvcc: str, archs: list[str]) -> None:
    """Stops the build, before anything is compiled, when nvcc is older than MIN_NVCC or cannot compile
    for one of `archs`."""
    try:
        r = _run([nvcc, "--version"])
    except OSError as e:
        raise SystemExit(f"error: cannot run {nvcc}: {e}") from None
    release = _nvcc_release(r.stdout)
    if r.returncode != 0 or release is None:
        raise SystemExit(f"error: `{nvcc} --version` did not say its release:\n{r.stdout}{r.stderr}")
    if release < MIN_NVCC:
        raise SystemExit(
            f"error: {nvcc} is CUDA {_dotted(release)}; mscclpp-nccl needs CUDA {_dotted(MIN_NVCC)} or newer"
            " (set NVCC or CUDA_HOME to a newer toolkit). Nothing was compiled."
        )
    listed = _run([nvcc, "--list-gpu-code"])
    if listed.returncode == 0 and listed.stdout.strip():
        codes = set(listed.stdout.split())
        unknown = [a for a in archs if f"sm_{re.sub(r'[^0-9].*$', '', a)}" not in codes]
        if unknown:
            names, known = ", ".join("sm_" + a for a in unknown), " ".join(sorted(codes))
            raise SystemExit(
                f"error: CUDA {_dotted(release)} cannot compile for {names} (MSCCLPP_NCCL_CUDA_ARCHS);"
                f" it knows {known}. Nothing was compiled."
            )


def object_dir(archs: list[str]) -> Path:
    """Where the objects of one set of targets live: build/native for the development default, so that
    switching between it and a wheel's targets relinks instead of recompiling."""
    if archs == _archs_from(DEFAULT_ARCHS):
        return OBJ_DIR
    return OBJ_DIR.with_name("native-sm" + "-".join(archs))


def _archs() -> list[str]:
    return _archs_from(os.environ.get("MSCCLPP_NCCL_CUDA_ARCHS") or DEFAULT_ARCHS)


def _archs_from(raw: str) -> list[str]:
    archs = sorted({a.strip().replace("sm_", "").replace(".", "") for a in raw.replace(";", ",").split(",")})
    archs = [a for a in archs if a]
    if not archs:
        raise SystemExit(f"error: MSCCLPP_NCCL_CUDA_ARCHS={raw!r} names no architecture")
    return sorted(archs, key=lambda a: (int("".join(ch for ch in a if ch.isdigit()) or 0), a))


def _gencode(archs: list[str]) -> list[str]:
    flags = []
    for a in archs:
        flags += ["-gencode", f"arch=compute_{a},code=sm_{a}"]
    # PTX for the newest target so that later GPUs can JIT it.
    flags += ["-gencode", f"arch=compute_{archs[-1]},code=compute_{archs[-1]}"]
    return flags


def _compile_flags(archs: list[str]) -> list[str]:
    return [
        "-std=c++17",
        "-O3",
        f"-I{ROOT}",
        f"-I{ROOT / 'include'}",
        f'{VERSION_DEFINE}="{VERSION}"',
        "-Xcompiler",
        "-fPIC,-fvisibility=hidden,-Wall",
        "--expt-relaxed-constexpr",
        "-lineinfo",
        # nvcc compresses a module's code only above some size, and left type shards whole: a 219 MB
        # library instead of 24 MB. Compressed, they load as the single large modules did.
        "-Xfatbin",
        "-compress-all",
        *_gencode(archs),
    ]


def _sources() -> list[Path]:
    found = [*ROOT.glob("native/**/*.cc"), *ROOT.glob("native/**/*.cu"), *ROOT.glob("shim/*.cc")]
    return sorted(p for p in found if p.is_file())


def type_shards() -> int:
    """How many compiles a sharded source takes: kTypeShards of TYPE_SHARDS_HEADER."""
    m = re.search(r"constexpr int kTypeShards = (\d+);", TYPE_SHARDS_HEADER.read_text())
    if not m:
        raise SystemExit(f"error: {TYPE_SHARDS_HEADER.relative_to(ROOT)} does not define kTypeShards")
    return int(m.group(1))


class Compile(NamedTuple):
    """One nvcc run: a source, or one type shard of a sharded source."""

    src: Path
    shard: int | None = None

    @property
    def name(self) -> str:
        """How compile_times.json and the build's output name it."""
        rel = str(self.src.relative_to(ROOT))
        return rel if self.shard is None else f"{rel} [type shard {self.shard}]"

    def object(self, obj_dir: Path) -> Path:
        rel = self.src.relative_to(ROOT)
        suffix = ".o" if self.shard is None else f".shard{self.shard}.o"
        return obj_dir / rel.parent / (rel.name + suffix)

    def flags(self) -> list[str]:
        return [] if self.shard is None else [f"{SHARD_DEFINE}={self.shard}"]


def compiles(sources: list[Path]) -> list[Compile]:
    """Every compile of `sources`: one for each, or one per type shard where the source includes
    TYPE_SHARDS_HEADER."""
    include = f'#include "{TYPE_SHARDS_HEADER.relative_to(ROOT)}"'
    shards = type_shards()
    out: list[Compile] = []
    for src in sources:
        if src.suffix == ".cu" and include in src.read_text():
            out += [Compile(src, k) for k in range(shards)]
        else:
            out.append(Compile(src))
    return out


def _slowest_first(jobs: list[Compile], obj_dir: Path) -> list[Compile]:
    """`jobs` in the order to start them: the slowest at their last compile first, unknown ones before
    all, so that a long compile does not start last and hold the build alone."""
    try:
        files = json.loads((obj_dir / COMPILE_TIMES).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        files = {}

    def last(job: Compile) -> float:
        entry = files.get(job.name)
        return float(entry["seconds"]) if isinstance(entry, dict) and "seconds" in entry else float("inf")

    return sorted(jobs, key=lambda job: -last(job))


def _newest_header() -> float:
    newest = 0.0
    for top in ("native", "shim"):
        for p in (ROOT / top).rglob("*"):
            if p.suffix in HEADER_SUFFIXES and p.is_file():
                newest = max(newest, p.stat().st_mtime)
    return newest


def _dependencies(dep_file: Path) -> list[Path] | None:
    """The files an object was built from, as nvcc listed them (make syntax); None if never listed."""
    try:
        text = dep_file.read_text()
    except OSError:
        return None
    _, _, listed = text.replace("\\\n", " ").partition(":")
    return [ROOT / name for name in listed.split()]


def _unversioned(flags: list[str]) -> list[str]:
    """The flags without the version define, which only sources including VERSION_HEADER read."""
    return [f for f in flags if not f.startswith(VERSION_DEFINE + "=")]


def _includes(obj: Path, header: Path) -> bool:
    """Whether the source of `obj` included `header` when it was last compiled (True if not listed)."""
    deps = _dependencies(obj.with_suffix(".d"))
    return deps is None or header in deps


def _stale(src: Path, obj: Path, newest_header: float) -> bool:
    """Whether `obj` is older than anything it was built from. Objects built before nvcc listed their
    headers fall back to the newest header of the tree."""
    if not obj.exists():
        return True
    built = obj.stat().st_mtime
    deps = _dependencies(obj.with_suffix(".d"))
    if deps is None:
        return built < max(src.stat().st_mtime, newest_header)
    return any(not d.exists() or d.stat().st_mtime > built for d in [src, *deps])


def _run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)


def _nvcc_version(nvcc: str) -> str:
    out = _run([nvcc, "--version"]).stdout.strip().splitlines()
    return out[-2] if len(out) >= 2 and out[-1].startswith("Build") else (out[-1] if out else "unknown")


def _git_commit() -> str | None:
    try:
        r = _run(["git", "rev-parse", "HEAD"])
    except OSError:
        return None
    if r.returncode != 0:
        return None
    dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"]).stdout.strip()
    return r.stdout.strip() + ("-dirty" if dirty else "")


def build_native(force: bool = False, verbose: bool = False) -> Path:
    """Compiles every changed source in parallel, links libnccl.so.2 and writes build_info.json."""
    nvcc = _nvcc()
    archs = _archs()
    check_nvcc(nvcc, archs)
    flags = _compile_flags(archs)
    sources = _sources()
    if not sources:
        raise SystemExit("error: no sources under native/ or shim/")
    obj_dir = object_dir(archs)
    obj_dir.mkdir(parents=True, exist_ok=True)
    LIB_DIR.mkdir(parents=True, exist_ok=True)

    # A change of compiler or flags invalidates every object; a new version only those that include
    # version.h (every compile is given it, so an object that starts to include it is built with it).
    stamp = obj_dir / "flags.json"
    stamp_data = {"nvcc": nvcc, "flags": flags}
    try:
        old_stamp = json.loads(stamp.read_text() or "{}")
    except (OSError, ValueError):
        old_stamp = {}
    if old_stamp.get("nvcc") != nvcc or _unversioned(old_stamp.get("flags", [])) != _unversioned(flags):
        force = True
    version_changed = old_stamp.get("flags") != flags
    newest_header = _newest_header()

    jobs: list[Compile] = []
    objects: list[Path] = []
    for job in compiles(sources):
        obj = job.object(obj_dir)
        objects.append(obj)
        if (
            force
            or _stale(job.src, obj, newest_header)
            or (version_changed and _includes(obj, VERSION_HEADER))
        ):
            jobs.append(job)

    def compile_one(job: Compile) -> tuple[Compile, subprocess.CompletedProcess[str], list[str], float]:
        obj = job.object(obj_dir)
        obj.parent.mkdir(parents=True, exist_ok=True)
        tmp, deps = obj.with_suffix(".o.tmp"), obj.with_suffix(".d")
        # -MD lists the headers the source included, so that a header change rebuilds only its includers.
        src = str(job.src.relative_to(ROOT))
        cmd = [nvcc, *flags, *job.flags(), "-c", src, "-o", str(tmp), "-MD", "-MF", str(deps)]
        start = time.monotonic()
        r = _run(cmd)
        seconds = time.monotonic() - start
        if r.returncode == 0:
            os.replace(tmp, obj)  # never leave a half-written object that looks up to date
        return job, r, cmd, seconds

    failures = []
    if jobs:
        workers = int(os.environ.get("MSCCLPP_NCCL_BUILD_JOBS", "0")) or os.cpu_count() or 1
        print(
            f"mscclpp-nccl: {len(jobs)} of {len(objects)} compiles ({len(sources)} sources), {workers} jobs",
            flush=True,
        )
        timed: dict[str, float] = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            running = [pool.submit(compile_one, job) for job in _slowest_first(jobs, obj_dir)]
            for done in concurrent.futures.as_completed(running):
                job, r, cmd, seconds = done.result()
                if verbose:
                    print(" ".join(cmd), flush=True)
                if r.returncode != 0:
                    failures.append(job.name)
                    print(f"mscclpp-nccl: FAILED {job.name}\n{' '.join(cmd)}", file=sys.stderr)
                else:
                    timed[job.name] = seconds
                    print(f"  {job.name} ({seconds:.1f} s)", flush=True)
                if r.stdout.strip() or r.stderr.strip():
                    print(r.stdout + r.stderr, file=sys.stderr, end="", flush=True)
        record_compile_times(obj_dir, timed, archs=archs, jobs=workers)
    if failures:
        raise SystemExit(f"error: nvcc failed on {len(failures)} compile(s): {', '.join(failures)}")
    stamp.write_text(json.dumps(stamp_data))

    lib = LIB_DIR / SONAME
    link = [nvcc, "-shared", "--cudart", "static", "-o", str(lib) + ".tmp", *map(str, objects)]
    link += ["-Xlinker", f"-soname,{SONAME}"]
    if EXPORTS_MAP.exists():
        link += ["-Xlinker", f"--version-script={EXPORTS_MAP}"]
    else:
        print("mscclpp-nccl: warning: shim/exports.map missing; exporting every visible symbol", flush=True)
    # Never unmapped by dlclose: the library runs threads of its own (each rank's bootstrap receiver, a
    # rendezvous root waiting for late ranks), and a loader that closes it at exit (cffi, when its
    # handle is collected) would leave them running in unmapped code.
    link += ["-Xlinker", "-z", "-Xlinker", "nodelete"]
    # Every symbol resolved here: a type shard that was not compiled or linked (type_shards.cuh) fails the
    # build instead of the first call on that type.
    link += ["-Xlinker", "-z", "-Xlinker", "defs"]
    link += ["-lpthread", "-ldl", "-lrt"]
    link_stamp = obj_dir / "link.json"
    inputs = [*objects, *([EXPORTS_MAP] if EXPORTS_MAP.exists() else [])]
    up_to_date = (
        not force
        and not jobs
        and lib.exists()
        and link_stamp.exists()
        and json.loads(link_stamp.read_text() or "{}") == {"cmd": link}
        and all(p.stat().st_mtime <= lib.stat().st_mtime for p in inputs)
    )
    if not up_to_date:
        print(f"mscclpp-nccl: linking {lib.relative_to(ROOT)}", flush=True)
        r = _run(link)
        if r.returncode != 0:
            print(" ".join(link) + "\n" + r.stdout + r.stderr, file=sys.stderr, flush=True)
            raise SystemExit("error: linking libnccl.so.2 failed")
        if r.stdout.strip() or r.stderr.strip():
            print(r.stdout + r.stderr, file=sys.stderr, end="", flush=True)
        os.replace(str(lib) + ".tmp", lib)
        link_stamp.write_text(json.dumps({"cmd": link}))

    # libnccl.so -> libnccl.so.2, for linkers (-lnccl) and tools that look for the unversioned name.
    dev_link = LIB_DIR / "libnccl.so"
    if dev_link.is_symlink() or dev_link.exists():
        if not (dev_link.is_symlink() and os.readlink(dev_link) == SONAME):
            dev_link.unlink()
    if not dev_link.is_symlink():
        dev_link.symlink_to(SONAME)

    info_path = LIB_DIR / "build_info.json"
    if not up_to_date or not info_path.exists():
        info = {
            "archs": archs,
            "nvcc": _nvcc_version(nvcc),
            "git_commit": _git_commit(),
            "build_date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "sources": len(sources),
        }
        info_path.write_text(json.dumps(info, indent=2) + "\n")
    return lib


def record_compile_times(obj_dir: Path, timed: dict[str, float], archs: list[str], jobs: int) -> None:
    """Merges this build's seconds per source into obj_dir/compile_times.json (a source keeps the time
    of its last compile), with the targets and the number of parallel compiles they were measured at."""
    path = obj_dir / COMPILE_TIMES
    try:
        old = json.loads(path.read_text())
        files = old["files"] if isinstance(old, dict) and isinstance(old.get("files"), dict) else {}
    except (OSError, ValueError):
        files = {}
    when = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    for rel, seconds in timed.items():
        files[rel] = {"seconds": round(seconds, 2), "jobs": jobs, "when": when}
    data = {"archs": archs, "cpus": os.cpu_count(), "files": dict(sorted(files.items()))}
    path.write_text(json.dumps(data, indent=1) + "\n")


def compile_report(
    obj_dir: Path, top: int = 10, file_budget_s: float = FILE_BUDGET_S, total_budget_s: float = TOTAL_BUDGET_S
) -> tuple[list[str], list[str]]:
    """(lines to print, budgets exceeded) from obj_dir/compile_times.json, for the compiles that exist: the
    slowest compiles, then the sources whose type shards took longest together."""
    path = obj_dir / COMPILE_TIMES
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        return [f"no compile times in {path} ({e})"], []
    current = {job.name: job for job in compiles(_sources())}
    timed = {name: float(v["seconds"]) for name, v in data.get("files", {}).items() if name in current}
    total = sum(timed.values())
    archs = ", ".join(f"sm_{a}" for a in data.get("archs", []))
    lines = [
        f"compile times ({path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}; {archs};"
        f" {data.get('cpus', '?')} CPUs): {len(timed)} of {len(current)} compiles, {total:.0f} s in all"
        f" (budget {total_budget_s:.0f} s), slowest (budget {file_budget_s:.0f} s each):"
    ]
    ranked = sorted(timed.items(), key=lambda kv: -kv[1])
    lines += [f"  {seconds:8.1f} s  {name}" for name, seconds in ranked[:top]]
    by_source: dict[str, list[float]] = {}
    for name, seconds in timed.items():
        if current[name].shard is not None:
            by_source.setdefault(str(current[name].src.relative_to(ROOT)), []).append(seconds)
    if by_source:
        lines.append("sharded sources, all their shards together:")
        for rel, times in sorted(by_source.items(), key=lambda kv: -sum(kv[1])):
            lines.append(f"  {sum(times):8.1f} s  {rel} ({len(times)} shards, slowest {max(times):.1f} s)")
    over = [
        f"{name}: {seconds:.0f} s > {file_budget_s:.0f} s"
        for name, seconds in ranked
        if seconds > file_budget_s
    ]
    if total > total_budget_s:
        over.append(f"all compiles: {total:.0f} s > {total_budget_s:.0f} s")
    return lines, over


class BuildNative(Command):
    """`python setup.py build_native [--force] [--verbose-commands]`: rebuild the library in place."""

    description = "compile native/ and shim/ into mscclpp_nccl/lib/libnccl.so.2 (in place, incremental)"
    user_options = [  # noqa: RUF012 (setuptools reads this class attribute)
        ("force", "f", "recompile every source"),
        ("verbose-commands", None, "print each nvcc command"),
    ]
    boolean_options = ["force", "verbose-commands"]  # noqa: RUF012

    def initialize_options(self) -> None:
        self.force = False
        self.verbose_commands = False

    def finalize_options(self) -> None:
        pass

    def run(self) -> None:
        build_native(force=bool(self.force), verbose=bool(self.verbose_commands))


class CompileReport(Command):
    """`python setup.py compile_report [--top N] [--file-budget S] [--total-budget S]`: the slowest
    sources of the last builds, failing when one compile or all of them took longer than the budget."""

    description = "print the slowest sources from build/native*/compile_times.json; fail above a budget"
    user_options = [  # noqa: RUF012 (setuptools reads this class attribute)
        ("top=", None, "how many sources to list (default 10)"),
        ("file-budget=", None, f"seconds allowed for one source (default {FILE_BUDGET_S:.0f})"),
        ("total-budget=", None, f"seconds allowed for all sources (default {TOTAL_BUDGET_S:.0f})"),
    ]

    def initialize_options(self) -> None:
        self.top: str | int = 10
        self.file_budget: str | float = FILE_BUDGET_S
        self.total_budget: str | float = TOTAL_BUDGET_S

    def finalize_options(self) -> None:
        self.top = int(self.top)
        self.file_budget = float(self.file_budget)
        self.total_budget = float(self.total_budget)

    def run(self) -> None:
        lines, over = compile_report(
            object_dir(_archs()), int(self.top), float(self.file_budget), float(self.total_budget)
        )
        print("\n".join(lines), flush=True)
        if over:
            raise SystemExit("error: compile time over budget: " + "; ".join(over))


class BuildPy(build_py):
    """Builds the library in place before the package files (and lib/) are copied or linked."""

    def run(self) -> None:
        self.run_command("build_native")
        if not self.editable_mode:
            # build/lib is copied whole into a wheel: drop what earlier builds left there (a library
            # name no longer shipped, a module since removed).
            shutil.rmtree(Path(self.build_lib) / "mscclpp_nccl", ignore_errors=True)
        super().run()


# What a manylinux library may need from the system (PEP 600, auditwheel's policy): glibc's libraries and
# the C++ runtime, whose symbol versions raise the glibc of the tag (MANYLINUX_FLOORS).
SYSTEM_LIBRARIES = {
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "libpthread.so.0",
    "librt.so.1",
    "libstdc++.so.6",
    "libgcc_s.so.1",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}
# The oldest manylinux_2_X whose C++ runtime has each symbol version (auditwheel's policy, x86_64): a
# library built with GCC 12 needs GLIBCXX_3.4.30, which manylinux_2_35 (Ubuntu 22.04) is the first to have.
MANYLINUX_FLOORS = {
    "GLIBCXX": [
        ((3, 4, 19), 17),
        ((3, 4, 22), 24),
        ((3, 4, 24), 27),
        ((3, 4, 28), 31),
        ((3, 4, 29), 34),
        ((3, 4, 30), 35),
        ((3, 4, 33), 39),
    ],
    "GCC": [((4, 8, 0), 17), ((7, 0, 0), 27), ((12, 0, 0), 35), ((14, 0, 0), 39)],
}


def symbol_versions(lib: Path) -> dict[str, tuple[int, ...]]:
    """The newest version `lib` needs of each versioned library ("GLIBC": (2, 34), "GLIBCXX": (3, 4, 30),
    ...), from objdump -T, or from a scan of its bytes without objdump (the names are in .dynstr; a scan
    may find one too many, never one too few)."""
    objdump = shutil.which("objdump")
    r = _run([objdump, "-T", str(lib)]) if objdump else None
    text = r.stdout if r is not None and r.returncode == 0 else lib.read_bytes().decode("latin-1")
    newest: dict[str, tuple[int, ...]] = {}
    for name, number in re.findall(r"\b(GLIBCXX|GLIBC|GCC|CXXABI)_(\d+(?:\.\d+)*)", text):
        version = tuple(int(x) for x in number.split("."))
        newest[name] = max(newest.get(name, version), version)
    return newest


def needed_libraries(lib: Path) -> list[str] | None:
    """The DT_NEEDED entries of `lib` (objdump -p), or None without objdump."""
    objdump = shutil.which("objdump")
    if not objdump:
        return None
    r = _run([objdump, "-p", str(lib)])
    if r.returncode != 0:
        return None
    return re.findall(r"^\s*NEEDED\s+(\S+)", r.stdout, flags=re.MULTILINE)


def manylinux_glibc(lib: Path) -> tuple[int, int] | None:
    """The oldest glibc (2, X) of a manylinux_2_X that has everything `lib` needs; None when it needs a
    C++ runtime newer than any policy knows, or nothing from glibc can be read."""
    versions = symbol_versions(lib)
    if "GLIBC" not in versions:
        return None
    minor = versions["GLIBC"][1] if len(versions["GLIBC"]) > 1 else 0
    for name, floors in MANYLINUX_FLOORS.items():
        if name in versions:
            fitting = [glibc for newest, glibc in floors if versions[name] <= newest]
            if not fitting:
                return None
            minor = max(minor, fitting[0])
    return (2, minor)


def wheel_platform(lib: Path) -> str:
    """manylinux_2_X_<machine> for what `lib` needs of the system; linux_<machine> when it cannot be told."""
    machine = platform.machine()
    glibc = manylinux_glibc(lib) if lib.is_file() else None
    if glibc is None:
        return f"linux_{machine}"
    return f"manylinux_{glibc[0]}_{glibc[1]}_{machine}"


class BdistWheel(bdist_wheel):
    """A wheel for every CPython 3: the library is loaded with ffi.dlopen, no extension module is built.
    Tagged py3-none-manylinux_2_X for the glibc it needs."""

    def get_tag(self) -> tuple[str, str, str]:
        lib = LIB_DIR / SONAME
        needed = needed_libraries(lib) if lib.is_file() else None
        foreign = sorted(set(needed or []) - SYSTEM_LIBRARIES)
        if foreign:  # a wheel for every Linux cannot count on them (cudart is linked in)
            raise SystemExit(f"error: {SONAME} needs {', '.join(foreign)}, which a manylinux wheel may not")
        if self.plat_name_supplied and self.plat_name:
            plat = self.plat_name.replace("-", "_").replace(".", "_")
        else:
            plat = wheel_platform(LIB_DIR / SONAME)
        return "py3", "none", plat


class BinaryDistribution(Distribution):
    """The wheel carries a native library: installed as platform files, tagged for a platform."""

    def has_ext_modules(self) -> bool:
        return True


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import its helpers
    setup(
        cmdclass={
            "build_native": BuildNative,
            "build_py": BuildPy,
            "bdist_wheel": BdistWheel,
            "compile_report": CompileReport,
        },
        distclass=BinaryDistribution,
    )
