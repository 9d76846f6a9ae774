"""Building the C++ test drivers (tests/*_driver.cc) with the host compiler: one compiler process per
source, with AddressSanitizer and UBSan where the toolchain can run them (so that "never crashes" is
checked, not hoped), else optimised. Plain module: the tests put tests/ on sys.path."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SANITIZERS = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"]


def driver_env() -> dict[str, str]:
    """The environment to run a driver in: no NCCL_/MSCCLPP_ settings of the caller leak in."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("NCCL_") and not k.startswith("MSCCLPP_")}
    # LeakSanitizer needs ptrace, which some sandboxes refuse; memory errors are still caught.
    env["ASAN_OPTIONS"] = "detect_leaks=0"
    return env


def _compile(compiler: str, out: Path, sources: list[str], flags: list[str]) -> bool:
    """Compiles the sources in parallel and links them into `out`."""
    base = [compiler, "-std=c++17", "-Wall", "-Wextra", f"-I{REPO}", f"-I{REPO / 'include'}", *flags]
    objects = [out.parent / f"{Path(s).stem}.o" for s in sources]
    procs = [
        subprocess.Popen([*base, "-c", str(REPO / s), "-o", str(o)], stderr=subprocess.PIPE, text=True)
        for s, o in zip(sources, objects, strict=True)
    ]
    ok = True
    for proc in procs:
        _, errors = proc.communicate(timeout=300)
        if proc.returncode != 0:
            ok = False
            print(errors)  # shown by pytest when the build fails
    if not ok:
        return False
    link = subprocess.run(
        [*base, *map(str, objects), "-ldl", "-o", str(out)], capture_output=True, text=True, check=False
    )
    print(link.stderr)
    return link.returncode == 0


def build_driver(
    out: Path,
    sources: list[str],
    probe: list[str],
    probe_rc: int,
    flags: list[str] | None = None,
    sanitizers: list[str] | None = None,
) -> Path:
    """Builds `out` from `sources`, sanitized if running `out` with the `probe` arguments (and empty stdin)
    exits with `probe_rc` under the sanitizers, else with -O2. `sanitizers` replaces the default set for
    a driver that cannot run under all of them. Skips without g++."""
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("g++ is not installed")
    extra = flags or []
    checks = SANITIZERS if sanitizers is None else sanitizers
    if _compile(compiler, out, sources, ["-O0", "-g", *checks, *extra]):
        run = subprocess.run(
            [str(out), *probe], input=b"", capture_output=True, env=driver_env(), check=False
        )
        if run.returncode == probe_rc:
            return out
    assert _compile(compiler, out, sources, ["-O2", *extra]), (
        f"{out.name} does not build (see the captured output)"
    )
    return out
