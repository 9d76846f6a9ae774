"""CPU tests of the private stock NCCL loader (native/fallback/, through tests/stock_nccl_loader_driver.cc).

Stub libraries built here stand in for the real ones, all with the SONAME libnccl.so.2 and NCCL's
names: a "stock" one whose functions append "<label> <function>" to $STUB_LOG and, like stock NCCL,
call its own exported ncclGroupStart/ncclGroupEnd/ncclGetErrorString through the PLT; and an "ours"
one, preloaded into the driver, which also exports the marker the driver uses to name it as the library
never to pick. A fake libcuda.so.1 shows which copy of the CUDA driver library stock would see."""

from __future__ import annotations

import ctypes.util
import os
import random
import shutil
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from host_build import build_driver, driver_env
from stock_nccl import compiler, cuda_include_dir, stock_lib

SOURCES = [
    "tests/stock_nccl_loader_driver.cc",
    "native/fallback/stock_nccl.cc",
    "native/fallback/stock_search.cc",
    "native/fallback/library_identity.cc",
    "native/fallback/elf_probe.cc",
    "native/fallback/path_trust.cc",
    "native/fallback/ld_cache.cc",
    "native/common/logging.cc",
    "native/common/env.cc",
    "native/common/parameters.cc",
]
# AddressSanitizer aborts on the RTLD_DEEPBIND load and must come first among the preloads.
UBSAN = ["-fsanitize=undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer"]
# The loader's last place is the system's own search; a machine with a libnccl.so.2 there would answer it.
SYSTEM_NCCL = ctypes.util.find_library("nccl")

STUB = r"""
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef struct { char internal[128]; } ncclUniqueId;
typedef int ncclResult_t;

/* Runs on load, before dlopen returns: it shows that the loader let the file's code run. */
__attribute__((constructor)) static void loaded(void) {
  const char* path = getenv("STUB_MARKER");
  if (!path) return;
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd >= 0 && write(fd, LABEL "\n", sizeof(LABEL)) == (ssize_t)sizeof(LABEL)) close(fd);
}

#ifdef VERSION_TEXT
__attribute__((used)) static const char banner[] = VERSION_TEXT;
#endif

static void note(const char* what) {
  const char* path = getenv("STUB_LOG");
  if (!path) return;
  char line[256];
  int n = snprintf(line, sizeof line, "%s %s\n", LABEL, what);
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT, 0644);
  if (fd >= 0 && write(fd, line, n) == n) close(fd);
}

ncclResult_t ncclGroupStart(void) { note("ncclGroupStart"); return 0; }
ncclResult_t ncclGroupEnd(void) { note("ncclGroupEnd"); return 0; }
const char* ncclGetErrorString(ncclResult_t r) { note("ncclGetErrorString"); return LABEL " error string"; }
const char* ncclGetLastError(void* comm) { note("ncclGetLastError"); return ""; }
#ifndef NO_GET_VERSION
ncclResult_t ncclGetVersion(int* v) { note("ncclGetVersion"); *v = VERSION; return 0; }
#endif
ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  note("ncclGetUniqueId"); memset(id, 0, sizeof *id); return 0;
}
ncclResult_t ncclCommInitRank(void** comm, int n, ncclUniqueId id, int rank) {
  note("ncclCommInitRank");
  /* As stock NCCL's static CUDA runtime does: the driver library by name, never linked. */
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW);
  if (cuda) {
    char line[64];
    snprintf(line, sizeof line, "libcuda %p", dlsym(cuda, "cuInit"));
    note(line);
  }
  *comm = (void*)1;
  return 0;
}
ncclResult_t ncclCommInitRankConfig(void** comm, int n, ncclUniqueId id, int rank, void* config) {
  note("ncclCommInitRankConfig"); *comm = (void*)1; return 0;
}
ncclResult_t ncclCommSplit(void* comm, int color, int key, void** out, void* config) {
  note("ncclCommSplit"); *out = (void*)2; return 0;
}
ncclResult_t ncclCommFinalize(void* comm) { note("ncclCommFinalize"); return 0; }
ncclResult_t ncclCommDestroy(void* comm) { note("ncclCommDestroy"); return 0; }
ncclResult_t ncclCommAbort(void* comm) { note("ncclCommAbort"); return 0; }
ncclResult_t ncclCommGetAsyncError(void* comm, ncclResult_t* error) {
  note("ncclCommGetAsyncError"); *error = 0; ncclGetErrorString(0); return 0;
}
ncclResult_t ncclAllReduce(const void* s, void* r, size_t n, int t, int op, void* comm, void* stream) {
  note("ncclAllReduce"); ncclGroupStart(); ncclGroupEnd(); return 0;
}
ncclResult_t ncclAllGather(const void* s, void* r, size_t n, int t, void* comm, void* stream) {
  note("ncclAllGather"); return 0;
}
ncclResult_t ncclReduceScatter(const void* s, void* r, size_t n, int t, int op, void* comm, void* stream) {
  note("ncclReduceScatter"); return 0;
}
ncclResult_t ncclBroadcast(const void* s, void* r, size_t n, int t, int root, void* comm, void* stream) {
  note("ncclBroadcast"); return 0;
}
ncclResult_t ncclReduce(const void* s, void* r, size_t n, int t, int op, int root, void* comm, void* stream) {
  note("ncclReduce"); return 0;
}
#ifndef NO_SEND
ncclResult_t ncclSend(const void* s, size_t n, int t, int peer, void* comm, void* stream) {
  note("ncclSend"); return 0;
}
#endif
ncclResult_t ncclRecv(void* r, size_t n, int t, int peer, void* comm, void* stream) {
  note("ncclRecv"); return 0;
}
#ifdef OURS
void stubOursMarker(void) {}
#else
void stubStockMarker(void) {}
#endif
"""

# What one `calls` run of the driver logs, from the loader's version check to the last table call.
STOCK_CALLS = [
    "ncclGetVersion",  # the loader's version check
    "ncclGetErrorString",  # the driver's "error string" line
    "ncclGetVersion",
    "ncclGetUniqueId",
    "ncclCommInitRank",
    "ncclCommInitRankConfig",
    "ncclCommSplit",
    "ncclGroupStart",
    "ncclAllReduce",
    "ncclGroupStart",  # called by stock's ncclAllReduce through its PLT
    "ncclGroupEnd",
    "ncclAllGather",
    "ncclReduceScatter",
    "ncclBroadcast",
    "ncclReduce",
    "ncclSend",
    "ncclRecv",
    "ncclGroupEnd",
    "ncclCommGetAsyncError",
    "ncclGetErrorString",  # called by stock's ncclCommGetAsyncError
    "ncclGetLastError",
    "ncclCommFinalize",
    "ncclCommAbort",
    "ncclCommDestroy",
]


@pytest.fixture(scope="module")
def driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_loader_driver(tmp_path_factory.mktemp("stock_loader"), UBSAN)


def build_loader_driver(folder: Path, sanitizers: list[str] | None) -> Path:
    """The driver, built in `folder` with `sanitizers` (None: ASan and UBSan)."""
    include, why = cuda_include_dir()
    if include is None:
        pytest.skip(why)
    out = folder / "stock_nccl_loader_driver"
    return build_driver(out, SOURCES, [], 2, [f"-I{include}"], sanitizers=sanitizers)


StubMaker = Callable[..., Path]


@pytest.fixture(scope="module")
def stub_source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    source = tmp_path_factory.mktemp("stub_source") / "stub.c"
    source.write_text(STUB)
    return source


@pytest.fixture
def stub(stub_source: Path, tmp_path: Path) -> StubMaker:
    """Builds a stub libnccl.so.2 at tmp_path/<where>: `stub("a/lib", "stock-a", 22700, "NO_SEND")`; `soname`
    gives it another SONAME."""
    cc = compiler("c")
    if cc is None:
        pytest.skip("no C compiler")

    def make(
        where: str,
        label: str,
        version: int = 22700,
        *defines: str,
        name: str = "libnccl.so.2",
        soname: str | None = None,
    ) -> Path:
        out = tmp_path / where / name
        out.parent.mkdir(parents=True, exist_ok=True)
        flags = [f'-DLABEL="{label}"', f"-DVERSION={version}", *(f"-D{d}" for d in defines)]
        soname = soname or ("libcuda.so.1" if name == "libcuda.so.1" else "libnccl.so.2")
        cmd = [cc, "-shared", "-fPIC", "-O0", f"-Wl,-soname,{soname}", "-Wl,--build-id", *flags]
        subprocess.run([*cmd, str(stub_source), "-o", str(out), "-ldl"], check=True)
        return out

    return make


@pytest.fixture
def fake_cuda(tmp_path: Path) -> Path:
    """A directory holding a libcuda.so.1 that exports cuInit."""
    cc = compiler("c")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "cuda").mkdir()
    source = tmp_path / "cuda" / "cuda.c"
    source.write_text("int cuInit(unsigned flags) { return 0; }\n")
    out = tmp_path / "cuda" / "libcuda.so.1"
    subprocess.run(
        [cc, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", str(source), "-o", str(out)], check=True
    )
    return out.parent


def make_site(site: Path, package: str | None, lib: Path | None) -> Path:
    """A fake site-packages: `package`'s dist-info (e.g. "nvidia_nccl_cu13") and `lib` as its NCCL."""
    site.mkdir(parents=True, exist_ok=True)
    if package:
        (site / f"{package}-2.30.7.dist-info").mkdir()
    if lib:
        (site / "nvidia" / "nccl" / "lib").mkdir(parents=True)
        shutil.copy(lib, site / "nvidia" / "nccl" / "lib" / "libnccl.so.2")
    return site


@dataclass
class Run:
    rc: int
    out: dict[str, str]  # first word of each stdout line -> the rest
    text: str
    log: list[str]
    constructors: list[str]  # the label of each stub whose constructor ran, in order
    stderr: str


def run(
    driver: Path,
    tmp_path: Path,
    *args: str,
    preload: Path | None = None,
    library_path: list[Path] | None = None,
    exe: Path | None = None,
    cwd: Path | None = None,
    raw_library_path: str | None = None,
    **variables: str,
) -> Run:
    """Runs the driver with only the given variables (MSCCLPP_NCCL_FALLBACK_LIB=..., etc.) set."""
    env = driver_env()
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("LD_PRELOAD", None)
    env.update(variables)
    log = tmp_path / "calls.log"
    log.unlink(missing_ok=True)
    env["STUB_LOG"] = str(log)
    marker = tmp_path / "constructors.log"
    marker.unlink(missing_ok=True)
    env["STUB_MARKER"] = str(marker)
    if preload:
        env["LD_PRELOAD"] = str(preload)
    if library_path is not None:
        env["LD_LIBRARY_PATH"] = ":".join(map(str, library_path))
    if raw_library_path is not None:
        env["LD_LIBRARY_PATH"] = raw_library_path
    done = subprocess.run(
        [str(exe or driver), *args], capture_output=True, text=True, env=env, check=False, timeout=60, cwd=cwd
    )
    assert done.returncode in (0, 1), done.stderr
    out = {}
    for line in done.stdout.splitlines():
        key, _, rest = line.partition(" ")
        out.setdefault(key, rest)
    log_lines = log.read_text().splitlines() if log.exists() else []
    ran = marker.read_text().splitlines() if marker.exists() else []
    return Run(done.returncode, out, done.stdout, log_lines, ran, done.stderr)


def loaded(result: Run) -> str:
    assert result.rc == 0, result.text
    return result.out["loaded"]


def error(result: Run) -> str:
    assert result.rc == 1, result.text
    return result.out["error"]


def searched(text: str) -> list[str]:
    """The places an error names, one item each."""
    head = "no usable stock NCCL (2.27 or newer); searched: "
    assert text.startswith(head), text
    return text.removeprefix(head).split("; ")


needs_clean_system = pytest.mark.skipif(
    SYSTEM_NCCL is not None, reason=f"the system's loader finds {SYSTEM_NCCL}, which would answer the search"
)


def test_calls_reach_stock_and_never_come_back_into_ours(
    driver: Path, stub: StubMaker, tmp_path: Path
) -> None:
    stock = stub("stock", "stock")
    ours = stub("ours", "ours", 23203, "OURS")
    got = run(driver, tmp_path, "calls", preload=ours, MSCCLPP_NCCL_FALLBACK_LIB=str(stock))
    assert loaded(got) == str(stock)
    assert got.out["error_string"] == "stock error string"
    got.log = [line for line in got.log if not line.startswith("stock libcuda ")]  # a GPU machine's driver
    # Every table call lands in stock, and stock's own calls to its exported names stay in stock.
    assert got.log[: len(STOCK_CALLS)] == [f"stock {name}" for name in STOCK_CALLS]
    # Ours keeps its names: the global ncclAllReduce is ours, and stock's symbols did not become global.
    assert got.log[len(STOCK_CALLS) :] == ["ours ncclAllReduce", "ours ncclGroupStart", "ours ncclGroupEnd"]
    assert got.out["stock"] == "symbols global no"


def test_without_deepbind_stock_would_call_into_ours(driver: Path, stub: StubMaker, tmp_path: Path) -> None:
    """The hazard the loader avoids, shown on the same stubs: a plain RTLD_LOCAL load binds stock's calls
    to its own exported names to the preloaded ours."""
    stock = stub("stock", "stock")
    ours = stub("ours", "ours", 23203, "OURS")
    got = run(driver, tmp_path, "plain", str(stock), preload=ours)
    assert got.rc == 0, got.text
    assert got.log == ["stock ncclAllReduce", "ours ncclGroupStart", "ours ncclGroupEnd"]


def test_stock_sees_the_process_cuda_driver(
    driver: Path, stub: StubMaker, fake_cuda: Path, tmp_path: Path
) -> None:
    stock = stub("stock", "stock")
    got = run(driver, tmp_path, "calls", library_path=[fake_cuda], MSCCLPP_NCCL_FALLBACK_LIB=str(stock))
    assert loaded(got) == str(stock)
    assert f"stock libcuda {got.out['driver'].split()[1]}" in got.log
    # A link-map namespace of its own (dlmopen) would load a second libcuda: the reason it is not used.
    control = run(driver, tmp_path, "namespace", str(stock), library_path=[fake_cuda])
    assert control.rc == 0, control.text
    seen = [line for line in control.log if line.startswith("stock libcuda ")]
    assert seen and seen[0] != f"stock libcuda {control.out['driver'].split()[1]}"


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        ({"env", "cu13", "cu12", "bare", "path"}, "env"),
        ({"cu13", "cu12", "bare", "path"}, "cu13"),
        ({"cu12", "bare", "path"}, "cu12"),
        ({"bare", "path"}, "bare"),
        ({"path"}, "path"),
    ],
)
def test_search_order(
    driver: Path, stub: StubMaker, tmp_path: Path, present: set[str], expected: str
) -> None:
    """The variable beats the packages, cu13 beats cu12 (even in a later site directory), a package beats a
    lib without a package record, and the packages beat LD_LIBRARY_PATH."""
    libs = {label: stub(f"build/{label}", label) for label in ("env", "cu13", "cu12", "bare", "path")}
    variables = {"MSCCLPP_NCCL_FALLBACK_LIB": str(libs["env"])} if "env" in present else {}

    def site(name: str, label: str, package: str | None) -> Path:
        return (
            make_site(tmp_path / name, package, libs[label])
            if label in present
            else make_site(tmp_path / name, None, None)
        )

    sites = [
        site("site12", "cu12", "nvidia_nccl_cu12"),
        site("site13", "cu13", "nvidia_nccl_cu13"),
        site("site_bare", "bare", None),
    ]
    variables["MSCCLPP_NCCL_PYTHON_SITE"] = ":".join(map(str, sites))
    empty = tmp_path / "empty"
    empty.mkdir()
    path = [empty, libs["path"].parent] if "path" in present else [empty]
    got = run(driver, tmp_path, "find", library_path=path, **variables)
    loaded(got)
    assert got.out["error_string"] == f"{expected} error string"
    where = {
        "env": "MSCCLPP_NCCL_FALLBACK_LIB",
        "cu13": f"nvidia-nccl-cu13 in {sites[1]}",
        "cu12": f"nvidia-nccl-cu12 in {sites[0]}",
        "bare": f"nvidia/nccl/lib without a package record in {sites[2]}",
        "path": f"LD_LIBRARY_PATH entry {libs['path'].parent}",
    }
    assert got.out["where"] == where[expected]


def test_sites_of_a_pip_installed_library(driver: Path, stub: StubMaker, tmp_path: Path) -> None:
    """Without MSCCLPP_NCCL_PYTHON_SITE, the site-packages our own library was loaded from is searched (a
    virtual environment's included), as is a python executable's prefix."""
    venv_site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    ours = stub("venv/lib/python3.11/site-packages/mscclpp_nccl/lib", "ours", 23203, "OURS")
    make_site(venv_site, "nvidia_nccl_cu13", stub("build/cu13", "venv-cu13"))
    got = run(driver, tmp_path, "find", preload=ours)
    assert got.out["where"] == f"nvidia-nccl-cu13 in {venv_site}"
    assert got.out["error_string"] == "venv-cu13 error string"

    prefix_site = tmp_path / "prefix" / "lib" / "python3.12" / "site-packages"
    make_site(prefix_site, "nvidia_nccl_cu12", stub("build/cu12", "prefix-cu12"))
    (tmp_path / "prefix" / "bin").mkdir()
    python = shutil.copy(driver, tmp_path / "prefix" / "bin" / "python3.12")
    got = run(driver, tmp_path, "find", exe=Path(python))
    assert got.out["where"] == f"nvidia-nccl-cu12 in {prefix_site}"


def test_a_set_variable_is_the_only_place(driver: Path, stub: StubMaker, tmp_path: Path) -> None:
    other = stub("path", "path")
    missing = tmp_path / "nowhere" / "libnccl.so.2"
    text = error(
        run(driver, tmp_path, "find", library_path=[other.parent], MSCCLPP_NCCL_FALLBACK_LIB=str(missing))
    )
    assert text == (
        f"no usable stock NCCL (2.27 or newer); searched: MSCCLPP_NCCL_FALLBACK_LIB: {missing} "
        "No such file or directory"
    )


def test_too_old_is_refused(driver: Path, stub: StubMaker, tmp_path: Path) -> None:
    old = stub("old", "old", 22605)
    text = error(run(driver, tmp_path, "find", MSCCLPP_NCCL_FALLBACK_LIB=str(old)))
    assert text.endswith(
        f"MSCCLPP_NCCL_FALLBACK_LIB: {old} version 2.26.5 (code 22605) is older than 2.27.0 (code 22700)"
    )
    # An old package is passed over for a newer library further on; 2.27.0 itself is accepted.
    site = make_site(tmp_path / "site", "nvidia_nccl_cu12", old)
    newer = stub("newer", "newer", 22700)
    got = run(driver, tmp_path, "find", library_path=[newer.parent], MSCCLPP_NCCL_PYTHON_SITE=str(site))
    assert loaded(got) == str(newer)
    assert got.out["version"] == "22700"


def test_ours_is_never_picked(driver: Path, stub: StubMaker, tmp_path: Path) -> None:
    """Ours first on the path (the preloaded file itself, a symbolic link to it, a copy of it) is refused
    and the search goes on to stock."""
    ours = stub("ours", "ours", 23203, "OURS")
    (tmp_path / "link").mkdir()
    (tmp_path / "link" / "libnccl.so.2").symlink_to(ours)
    (tmp_path / "copy").mkdir()
    shutil.copy(ours, tmp_path / "copy" / "libnccl.so.2")
    stock = stub("stock", "stock")
    dirs = [ours.parent, tmp_path / "link", tmp_path / "copy", stock.parent]
    got = run(driver, tmp_path, "find", preload=ours, library_path=dirs)
    assert loaded(got) == str(stock)
    assert got.out["error_string"] == "stock error string"

    text = error(run(driver, tmp_path, "find", preload=ours, library_path=dirs[:3]))
    assert f"LD_LIBRARY_PATH entry {ours.parent}: {ours} is this library ({ours})" in text
    assert f"{tmp_path / 'link' / 'libnccl.so.2'} is this library ({ours})" in text
    assert f"{tmp_path / 'copy' / 'libnccl.so.2'} a copy of this library ({ours}, same build id)" in text
    # Nothing of ours was run as if it were stock.
    assert not [
        line for line in run(driver, tmp_path, "find", preload=ours, library_path=dirs).log if "ours" in line
    ]

    text = error(run(driver, tmp_path, "find", preload=ours, MSCCLPP_NCCL_FALLBACK_LIB=str(ours)))
    assert text.endswith(f"MSCCLPP_NCCL_FALLBACK_LIB: {ours} is this library ({ours})")


@needs_clean_system
def test_the_error_names_every_place(driver: Path, stub: StubMaker, tmp_path: Path) -> None:
    empty_site = make_site(tmp_path / "site_empty", None, None)
    broken_site = make_site(tmp_path / "site_broken", "nvidia_nccl_cu12", None)
    not_nccl = stub("notnccl", "notnccl", 22700, "NO_SEND")
    empty = [tmp_path / "a", tmp_path / "b"]
    for d in empty:
        d.mkdir()
    sites = f"{empty_site}:{broken_site}"
    text = error(
        run(driver, tmp_path, "find", library_path=[*empty, not_nccl.parent], MSCCLPP_NCCL_PYTHON_SITE=sites)
    )
    missing_lib = f"{broken_site}/nvidia/nccl/lib/libnccl.so.2"
    assert searched(text) == [
        "MSCCLPP_NCCL_FALLBACK_LIB: not set",
        f"nvidia-nccl-cu12 in {broken_site}: installed, but {missing_lib} is missing",
        f"{empty_site}: neither nvidia-nccl-cu13 nor nvidia-nccl-cu12 installed",
        f"LD_LIBRARY_PATH entry {not_nccl.parent}: {not_nccl} has no ncclSend (not NCCL, or too old)",
        f"LD_LIBRARY_PATH: no libnccl.so.2 in {empty[0]}, {empty[1]}",
        # The loader's own search path (LD_LIBRARY_PATH at start-up first) finds the entry again.
        f"the loader's search path entry {not_nccl.parent}: {not_nccl} same file as "
        f"LD_LIBRARY_PATH entry {not_nccl.parent}, refused above",
        *searched(text)[6:],
    ]
    assert searched(text)[-1].startswith(
        f"the loader's search for libnccl.so.2: not in {empty[0]}, {empty[1]}, "
    )
    assert searched(text)[-1].endswith(", /etc/ld.so.cache")

    nothing = searched(error(run(driver, tmp_path, "find")))
    assert nothing[:3] == [
        "MSCCLPP_NCCL_FALLBACK_LIB: not set",
        "Python packages: no site-packages directory found in the running process (loaded objects, "
        "/proc/self/exe)",
        "LD_LIBRARY_PATH: not set",
    ]
    assert len(nothing) == 4 and nothing[3].startswith("the loader's search for libnccl.so.2: not in ")


def test_the_process_library_is_searched_once(driver: Path, stub: StubMaker, tmp_path: Path) -> None:
    stock = stub("stock", "stock")
    got = run(driver, tmp_path, "once", MSCCLPP_NCCL_FALLBACK_LIB=str(stock))
    assert got.rc == 0 and got.out["loaded"] == f"{stock}, same yes", got.text
    assert got.log == ["stock ncclGetVersion"]
    got = run(driver, tmp_path, "once", MSCCLPP_NCCL_FALLBACK_LIB=str(tmp_path / "none"))
    assert got.rc == 0 and got.out["error"].startswith("twice, same yes: no usable stock NCCL"), got.text


def test_real_stock_wheel(driver: Path, tmp_path: Path) -> None:
    """The nvidia-nccl-cu13 wheel (350 MB, its own libstdc++ and libc dependencies) loads this way on a
    machine without a GPU, and answers through the table."""
    lib, why = stock_lib()
    if lib is None:
        pytest.skip(why)
    if lib.parts[-4:] != ("nvidia", "nccl", "lib", "libnccl.so.2"):
        pytest.skip(f"{lib} is not installed by the wheel")
    site = lib.parents[3]
    got = run(driver, tmp_path, "find", MSCCLPP_NCCL_PYTHON_SITE=str(site))
    assert got.out["where"] == f"nvidia-nccl-cu13 in {site}"
    assert int(got.out["version"]) >= 22700
    assert got.out["error_string"].startswith("invalid usage")


def test_a_sanitizer_runtime_gets_an_error_not_an_abort(tmp_path: Path) -> None:
    include, why = cuda_include_dir()
    cxx = shutil.which("g++")
    if include is None or cxx is None:
        pytest.skip(why or "g++ is not installed")
    root = Path(__file__).resolve().parent.parent
    exe = tmp_path / "asan_driver"
    cmd = [
        cxx,
        "-std=c++17",
        "-fsanitize=address",
        f"-I{root}",
        f"-I{root / 'include'}",
        f"-I{include}",
        *(str(root / s) for s in SOURCES),
    ]
    if subprocess.run([*cmd, "-ldl", "-o", str(exe)], capture_output=True, check=False).returncode != 0:
        pytest.skip("AddressSanitizer is not available")
    env = {**driver_env(), "MSCCLPP_NCCL_FALLBACK_LIB": "/nonexistent/libnccl.so.2"}
    done = subprocess.run([str(exe), "find"], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "not loaded under AddressSanitizer" in done.stdout


def refusals(result: Run) -> dict[str, str]:
    """What the NCCL_DEBUG=INFO lines say of each refused candidate: path -> "(where) refused: why"."""
    head = "stock NCCL candidate "
    found = {}
    for line in result.stderr.splitlines():
        _, _, rest = line.partition(head)
        if rest:
            path, _, why = rest.partition(" ")
            found.setdefault(path, why)
    return found


def test_loader_no_run_refuses_before_loading(driver: Path, stub: StubMaker, tmp_path: Path) -> None:
    """No candidate that fails a check runs any code: each stub's constructor, which runs inside dlopen
    before the loader could look at a symbol, appends its label to a marker file. Refused here: a wrong
    SONAME in a site-packages folder inferred from the preloaded library, a relative LD_LIBRARY_PATH
    entry (ld.so's search path repeats it), no ncclGetVersion, a version string older than 2.27, a
    world-writable directory (sticky or not), a file owned by another user, a file that is not ELF.
    Each reason is in the error and in an NCCL_DEBUG=INFO line naming the candidate."""
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    ours = stub("venv/lib/python3.11/site-packages/mscclpp_nccl/lib", "ours", 23203, "OURS")
    make_site(site, "nvidia_nccl_cu13", stub("build/soname", "soname", soname="libnotnccl.so.1"))
    stub("rel", "relative", 22700, "NO_GET_VERSION")
    no_version = stub("no_version", "no-version", 22700, "NO_GET_VERSION")
    old = stub("old", "old", 22605, 'VERSION_TEXT="NCCL version 2.26.5+cuda12.9"')
    open_dir = stub("open", "open").parent
    open_dir.chmod(0o777)
    sticky_dir = stub("sticky", "sticky").parent
    sticky_dir.chmod(0o1777)
    (tmp_path / "notelf").mkdir()
    (tmp_path / "notelf" / "libnccl.so.2").write_text("not a library\n" * 10)
    dirs = [no_version.parent, old.parent, open_dir, sticky_dir, tmp_path / "notelf"]
    site_lib = site / "nvidia" / "nccl" / "lib" / "libnccl.so.2"
    expected = {
        site_lib: f"(nvidia-nccl-cu13 in {site}) refused: has the SONAME libnotnccl.so.1, not libnccl.so.2",
        no_version: f"(LD_LIBRARY_PATH entry {no_version.parent}) refused: has no ncclGetVersion "
        "(not NCCL, or too old)",
        old: f"(LD_LIBRARY_PATH entry {old.parent}) refused: version 2.26.5 (code 22605) is older than "
        "2.27.0 (code 22700) (read from the file)",
        open_dir / "libnccl.so.2": f"(LD_LIBRARY_PATH entry {open_dir}) refused: lies in a world-writable "
        f"directory ({open_dir})",
        sticky_dir / "libnccl.so.2": f"(LD_LIBRARY_PATH entry {sticky_dir}) refused: lies in a "
        f"world-writable directory ({sticky_dir})",
        tmp_path / "notelf" / "libnccl.so.2": f"(LD_LIBRARY_PATH entry {tmp_path / 'notelf'}) refused: "
        "is not an ELF file",
    }
    if os.geteuid() == 0:  # only root can give a file away
        foreign = stub("foreign", "foreign")
        os.chown(foreign, 65534, 65534)
        dirs.append(foreign.parent)
        expected[foreign] = (
            f"(LD_LIBRARY_PATH entry {foreign.parent}) refused: is owned by uid 65534, "
            "neither root nor this user"
        )
    path = ":".join(["rel", *map(str, dirs)])
    got = run(driver, tmp_path, "find", preload=ours, cwd=tmp_path, raw_library_path=path, NCCL_DEBUG="INFO")
    assert got.constructors == ["ours"]  # the preload; no candidate ran
    text = error(got)
    assert "LD_LIBRARY_PATH entry rel: relative directory, skipped" in searched(text)
    assert "the loader's search path entry rel: relative directory, skipped" in searched(text)
    for lib, why in expected.items():
        assert f"{lib} {why.partition(' refused: ')[2]}" in text
    assert {Path(p): why for p, why in refusals(got).items() if Path(p) in expected} == expected
    assert "stock NCCL search, LD_LIBRARY_PATH entry rel: relative directory, skipped" in got.stderr

    # A good library after them is loaded, and once: its constructor runs a single time.
    good = stub("good", "good")
    got = run(driver, tmp_path, "find", preload=ours, cwd=tmp_path, raw_library_path=f"{path}:{good.parent}")
    assert loaded(got) == str(good)
    assert got.constructors == ["ours", "good"]
    assert got.log == ["good ncclGetVersion", "good ncclGetErrorString"]


def test_loader_no_run_by_the_loader_search(driver: Path, stub: StubMaker, tmp_path: Path) -> None:
    """The last place, the dynamic loader's own search, is read from its search path, not probed by loading
    the name (a probe ran a refused file's constructor a second time): a refused file runs nothing, and a
    file found only there is loaded once. `find-later` unsets LD_LIBRARY_PATH first, as a process that
    changed it after start-up, so that only ld.so's copy names the directory."""
    bad = stub("bad", "bad", 22700, "NO_SEND")
    got = run(driver, tmp_path, "find", library_path=[bad.parent])
    assert got.constructors == []
    assert f"the loader's search path entry {bad.parent}: {bad} same file as" in error(got)
    got = run(driver, tmp_path, "find-later", library_path=[bad.parent])
    assert got.constructors == []
    assert f"the loader's search path entry {bad.parent}: {bad} has no ncclSend" in error(got)

    good = stub("good", "good")
    got = run(driver, tmp_path, "find-later", library_path=[good.parent])
    assert loaded(got) == str(good)
    assert got.out["where"] == f"the loader's search path entry {good.parent}"
    assert got.constructors == ["good"]


def tool_lines(elf_driver: Path, *args: str) -> list[str]:
    """The lines a mode of the driver that loads nothing prints, starting with that mode's name."""
    done = subprocess.run(
        [str(elf_driver), *args],
        capture_output=True,
        text=True,
        errors="replace",
        env=driver_env(),
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith(f"{args[0]} ")]


def elf_driver_output(elf_driver: Path, paths: list[Path]) -> list[str]:
    return tool_lines(elf_driver, "elf", *map(str, paths))


@pytest.fixture(scope="module")
def elf_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The driver under AddressSanitizer too; its elf and cache modes load nothing, so it may."""
    return build_loader_driver(tmp_path_factory.mktemp("elf_driver"), None)


def test_loader_no_run_reads_hostile_elf_safely(elf_driver: Path, stub: StubMaker, tmp_path: Path) -> None:
    """The reader of candidates treats them as hostile: every truncation of a real library and thousands of
    corrupted headers and tables are refused with a reason (or read), never crash, under ASan and UBSan."""
    lib = stub("stock", "stock")
    data = lib.read_bytes()
    assert elf_driver_output(elf_driver, [lib]) == ["elf ok libnccl.so.2 21"]  # NCCL's 20 and the marker
    cases = tmp_path / "cases"
    cases.mkdir()
    paths = []

    def case(name: str, content: bytes) -> None:
        path = cases / name
        path.write_bytes(content)
        paths.append(path)

    step = max(1, len(data) // 400)
    for n in [*range(0, 128), *range(128, len(data), step)]:
        case(f"cut{n}", data[:n])
    rng = random.Random(7)
    for i in range(3000):
        mutated = bytearray(data)
        for _ in range(rng.randint(1, 8)):
            # Mostly the headers and tables the reader trusts least; sometimes anywhere.
            where = rng.randrange(64) if rng.random() < 0.3 else rng.randrange(len(mutated))
            mutated[where] = rng.randrange(256)
        if rng.random() < 0.5:  # a field set to an extreme value
            at = rng.randrange(0, len(mutated) - 8)
            mutated[at : at + 8] = rng.choice([b"\xff" * 8, b"\x00" * 8, b"\xff\xff\xff\x7f\x00\x00\x00\x00"])
        case(f"mutated{i}", bytes(mutated))
    lines = elf_driver_output(elf_driver, paths)
    assert len(lines) == len(paths)
    assert all(line.startswith(("elf ok ", "elf refused ")) for line in lines)
    assert lines[0] == "elf refused is not an ELF file (shorter than its header)"

    wrong = bytearray(data)
    wrong[4] = 1  # ELFCLASS32
    case("class32", bytes(wrong))
    wrong = bytearray(data)
    wrong[5] = 2  # big-endian
    case("big", bytes(wrong))
    wrong = bytearray(data)
    wrong[18:20] = (183).to_bytes(2, "little") if data[18] != 183 else (62).to_bytes(2, "little")
    case("machine", bytes(wrong))
    assert elf_driver_output(elf_driver, paths[-3:]) == [
        "elf refused is not 64-bit ELF",
        "elf refused is not little-endian ELF",
        f"elf refused is for another machine (ELF machine {int.from_bytes(wrong[18:20], 'little')})",
    ]


def ld_cache(entries: list[tuple[str, str]]) -> bytes:
    """An ld.so.cache in glibc's current format with these (name, path) entries."""
    head_size, entry_size = 48, 24
    strings = b""
    offsets = []
    base = head_size + entry_size * len(entries)
    for name, path in entries:
        offsets.append((base + len(strings), base + len(strings) + len(name) + 1))
        strings += name.encode() + b"\0" + path.encode() + b"\0"
    head = b"glibc-ld.so.cache1.1" + struct.pack("<IIB3xI12x", len(entries), len(strings), 2, 0)
    body = b"".join(struct.pack("<iIIIQ", 0x303, key, value, 0, 0) for key, value in offsets)
    return head + body + strings


def test_loader_no_run_reads_ld_cache_safely(elf_driver: Path, tmp_path: Path) -> None:
    """The loader's cache is read as a file: names match exactly, and a corrupted cache is refused or
    read within its bounds (ASan and UBSan)."""

    def paths(content: bytes, name: str = "libnccl.so.2") -> list[str]:
        cache = tmp_path / "ld.so.cache"
        cache.write_bytes(content)
        return tool_lines(elf_driver, "cache", str(cache), name)

    good = ld_cache([("libz.so.1", "/lib/libz.so.1"), ("libnccl.so.2", "/opt/nccl/libnccl.so.2")])
    assert paths(good) == ["cache /opt/nccl/libnccl.so.2"]
    assert paths(good, "libnccl.so") == []
    huge = bytearray(good)
    huge[20:24] = b"\xff\xff\xff\xff"
    assert paths(bytes(huge))[0].endswith("more entries than the file holds")
    assert paths(b"ld.so-1.7.0" + good)[0].endswith("not in the format glibc 2.32+ writes")
    rng = random.Random(3)
    for n in range(len(good)):
        paths(good[:n])
    for _ in range(100):
        mutated = bytearray(good)
        mutated[rng.randrange(len(good))] = rng.randrange(256)
        paths(bytes(mutated))
