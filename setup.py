"""Builds native/ + shim/ with nvcc into mscclpp_nccl/lib/libnccl.so.2 and installs the package.

The library is always built in place (mscclpp_nccl/lib), so editable installs and `pip install .`
share one incremental object cache in build/native/. Rebuild quickly without pip:

    python setup.py build_native            # incremental
    python setup.py build_native --force    # recompile everything

Environment: MSCCLPP_NCCL_CUDA_ARCHS (default "90", e.g. "80,90"), NVCC (path of nvcc),
MSCCLPP_NCCL_BUILD_JOBS (parallel compiles, default os.cpu_count()).
"""

from __future__ import annotations

import concurrent.futures
import datetime
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Command, Distribution, setup
from setuptools.command.build_py import build_py

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


def _nvcc() -> str:
    candidates = [os.environ.get("NVCC", "")]
    for home in (os.environ.get("CUDA_HOME", ""), os.environ.get("CUDA_PATH", "")):
        if home:
            candidates.append(os.path.join(home, "bin", "nvcc"))
    candidates += [shutil.which("nvcc") or "", "/usr/local/cuda/bin/nvcc", "/usr/local/bin/nvcc"]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise SystemExit("error: nvcc not found (set NVCC or CUDA_HOME, or put nvcc on PATH)")


def _archs() -> list[str]:
    raw = os.environ.get("MSCCLPP_NCCL_CUDA_ARCHS", "90")
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
        f'-DMSCCLPP_NCCL_VERSION="{VERSION}"',
        "-Xcompiler",
        "-fPIC,-fvisibility=hidden,-Wall",
        "--expt-relaxed-constexpr",
        "-lineinfo",
        *_gencode(archs),
    ]


def _sources() -> list[Path]:
    found = [*ROOT.glob("native/**/*.cc"), *ROOT.glob("native/**/*.cu"), *ROOT.glob("shim/*.cc")]
    return sorted(p for p in found if p.is_file())


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
    flags = _compile_flags(archs)
    sources = _sources()
    if not sources:
        raise SystemExit("error: no sources under native/ or shim/")
    OBJ_DIR.mkdir(parents=True, exist_ok=True)
    LIB_DIR.mkdir(parents=True, exist_ok=True)

    # A change of compiler or flags invalidates every object.
    stamp = OBJ_DIR / "flags.json"
    stamp_data = {"nvcc": nvcc, "flags": flags}
    if not stamp.exists() or json.loads(stamp.read_text() or "{}") != stamp_data:
        force = True
    newest_header = _newest_header()

    jobs: list[tuple[Path, Path]] = []
    objects: list[Path] = []
    for src in sources:
        rel = src.relative_to(ROOT)
        obj = OBJ_DIR / rel.parent / (rel.name + ".o")
        objects.append(obj)
        if force or _stale(src, obj, newest_header):
            jobs.append((src, obj))

    def compile_one(job: tuple[Path, Path]) -> tuple[Path, subprocess.CompletedProcess[str], list[str]]:
        src, obj = job
        obj.parent.mkdir(parents=True, exist_ok=True)
        tmp, deps = obj.with_suffix(".o.tmp"), obj.with_suffix(".d")
        # -MD lists the headers the source included, so that a header change rebuilds only its includers.
        cmd = [nvcc, *flags, "-c", str(src.relative_to(ROOT)), "-o", str(tmp), "-MD", "-MF", str(deps)]
        r = _run(cmd)
        if r.returncode == 0:
            os.replace(tmp, obj)  # never leave a half-written object that looks up to date
        return src, r, cmd

    failures = []
    if jobs:
        workers = int(os.environ.get("MSCCLPP_NCCL_BUILD_JOBS", "0")) or os.cpu_count() or 1
        print(f"mscclpp-nccl: compiling {len(jobs)} of {len(sources)} sources ({workers} jobs)", flush=True)
        with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
            for src, r, cmd in pool.map(compile_one, jobs):
                rel = src.relative_to(ROOT)
                if verbose:
                    print(" ".join(cmd), flush=True)
                if r.returncode != 0:
                    failures.append(rel)
                    print(f"mscclpp-nccl: FAILED {rel}\n{' '.join(cmd)}", file=sys.stderr)
                else:
                    print(f"  {rel}", flush=True)
                if r.stdout.strip() or r.stderr.strip():
                    print(r.stdout + r.stderr, file=sys.stderr, end="", flush=True)
    if failures:
        raise SystemExit(f"error: nvcc failed on {len(failures)} file(s): {', '.join(map(str, failures))}")
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
    link += ["-lpthread", "-ldl", "-lrt"]
    link_stamp = OBJ_DIR / "link.json"
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


class BuildPy(build_py):
    """Builds the library in place before the package files (and lib/) are copied or linked."""

    def run(self) -> None:
        self.run_command("build_native")
        super().run()


class BinaryDistribution(Distribution):
    """The wheel carries a native library, so it must be tagged for a platform."""

    def has_ext_modules(self) -> bool:
        return True


if __name__ == "__main__":  # setuptools runs this file as __main__; tests import its helpers
    setup(
        cmdclass={"build_native": BuildNative, "build_py": BuildPy},
        distclass=BinaryDistribution,
    )
