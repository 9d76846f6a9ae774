"""Every exported function called with NULL, garbage (pointers to 1 KiB of random bytes) and
out-of-range values, each call in a process of its own: none may crash (a signal) or hang, and every
ncclResult_t function returns an error except where stock NCCL 2.32.3 returns success too.

The signatures come from the NCCL_API and NCCL_CALL_API definitions in shim/*.cc, checked against the
library's dynamic symbols, so a new export is covered without editing this file. One runner process
loads the library and forks a child per call (fast on 2 cores, and a crash takes down only that
child). This module is also the runner: `python tests/test_bad_input.py LIB` reads cases from stdin
and prints results.
"""

from __future__ import annotations

import ctypes
import json
import os
import random
import re
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("null", "garbage", "extreme")
CALL_TIMEOUT_S = 10.0

# (function, kind) pairs where stock NCCL 2.32.3 returns ncclSuccess without a GPU, measured with
# test_stock_agrees_with_the_table below (stock crashes in 49 of the 288 calls and exit()s in 15);
# every other ncclResult_t call must return an error.
STOCK_SUCCEEDS = {
    ("ncclCommAbort", "null"),
    ("ncclCommDestroy", "null"),
    ("ncclCommFinalize", "null"),
    ("ncclCommRevoke", "null"),
    ("ncclGetUniqueId", "extreme"),
    ("ncclGetUniqueId", "garbage"),
    ("ncclGetVersion", "extreme"),
    ("ncclGetVersion", "garbage"),
    ("ncclGinBarrierCreateRequirement", "extreme"),
    ("ncclGinBarrierCreateRequirement", "garbage"),
    ("ncclGinInboxA2ACreateRequirement", "extreme"),
    ("ncclGinInboxA2ACreateRequirement", "garbage"),
    ("ncclGinOutboxCreateRequirement", "extreme"),
    ("ncclGinOutboxCreateRequirement", "garbage"),
    ("ncclGroupStart", "extreme"),
    ("ncclGroupStart", "garbage"),
    ("ncclGroupStart", "null"),
    ("ncclLLA2ACreateRequirement", "extreme"),
    ("ncclLLA2ACreateRequirement", "garbage"),
    ("ncclLsaBarrierCreateRequirement", "extreme"),
    ("ncclLsaBarrierCreateRequirement", "garbage"),
    ("ncclParamGetAllParameterKeys", "extreme"),
    ("ncclParamGetAllParameterKeys", "garbage"),
    ("ncclSetEncryption", "null"),
}

# Where we succeed although stock (without a GPU) fails, and why that is fine.
OURS_MAY_SUCCEED = {("ncclMemFree", "null")}  # freeing NULL is a no-op, like free(NULL)

_POINTER_TYPEDEFS = {"ncclComm_t", "ncclWindow_t", "cudaStream_t", "ncclParamHandle_t"}
_INT_TYPES = {
    "int",
    "CftTeamMode",
    "ncclDataType_t",
    "ncclRedOp_t",
    "ncclResult_t",
    "ncclCommMemStat_t",
    "ncclScalarResidence_t",
}


class UniqueId(ctypes.Structure):
    _fields_ = [("internal", ctypes.c_char * 128)]


class Team(ctypes.Structure):
    _fields_ = [("nRanks", ctypes.c_int), ("rank", ctypes.c_int), ("stride", ctypes.c_int)]


class MultimemHandle(ctypes.Structure):
    _fields_ = [("mcBasePtr", ctypes.c_void_p)]


_STRUCTS = {"ncclUniqueId": UniqueId, "Team": Team, "MultimemHandle": MultimemHandle}


def signatures() -> dict[str, tuple[str, list[str]]]:
    """name -> (return type, parameter types) of every NCCL_API (or NCCL_GROUP_API, NCCL_CALL_API) definition
    in shim/*.cc."""
    found: dict[str, tuple[str, list[str]]] = {}
    patterns = [
        re.compile(r"^NCCL_(?:CALL_|GROUP_)?API\(\s*([^,]+?),\s*(\w+),\s*\(([^)]*)\)", re.M),
        re.compile(r'^extern "C" __attribute__\(\(visibility\("default"\)\)\) (\w+) (\w+)\(([^)]*)\)', re.M),
    ]
    for source in sorted((ROOT / "shim").glob("*.cc")):
        for ret, name, params in [m for p in patterns for m in p.findall(source.read_text())]:
            types = []
            for param in " ".join(params.split()).split(","):
                param = param.strip()
                if param and param != "void":
                    type_name = re.sub(r"\s*\b\w+$", "", param).replace(" *", "*").strip()
                    types.append(type_name.removeprefix("const ") if "*" not in type_name else type_name)
            found[name] = (ret.strip(), types)
    return found


def _ctype(type_name: str) -> type:
    if "*" in type_name or type_name in _POINTER_TYPEDEFS:
        return ctypes.c_void_p
    if type_name in _INT_TYPES:
        return ctypes.c_int
    if type_name == "size_t":
        return ctypes.c_size_t
    if type_name == "unsigned int":
        return ctypes.c_uint
    if type_name in _STRUCTS:
        return _STRUCTS[type_name]
    raise AssertionError(f"no ctypes mapping for parameter type {type_name!r}: add one")


def _restype(type_name: str) -> type | None:
    return None if type_name == "void" else (ctypes.c_void_p if "*" in type_name else _ctype(type_name))


def _argument(type_name: str, kind: str, rng: random.Random, keep: list[object]) -> object:
    ctype = _ctype(type_name)
    if ctype is ctypes.c_void_p:
        if kind == "null":
            return None
        buffer = ctypes.create_string_buffer(rng.randbytes(1024), 1024)  # readable, writable, meaningless
        keep.append(buffer)
        return ctypes.addressof(buffer)
    if ctype in _STRUCTS.values():
        value = ctype()
        if kind != "null":
            ctypes.memmove(ctypes.addressof(value), rng.randbytes(ctypes.sizeof(ctype)), ctypes.sizeof(ctype))
        return value
    bits = 8 * ctypes.sizeof(ctype)
    signed = ctype is ctypes.c_int
    return {
        "null": 0,
        "garbage": -1 if signed else 2**bits - 1,
        "extreme": 2 ** (bits - 1) - 1 if signed else 2 ** (bits - 1),
    }[kind]


def _call(lib: ctypes.CDLL, name: str, kind: str) -> int | None:
    """Calls `name` with arguments of `kind`; its ncclResult_t or int result, else None."""
    ret, params = signatures()[name]
    fn = getattr(lib, name)
    fn.restype = _restype(ret)
    fn.argtypes = [_ctype(p) for p in params]
    rng = random.Random(f"{name}/{kind}")
    keep: list[object] = []
    result = fn(*[_argument(p, kind, rng, keep) for p in params])
    return result if isinstance(result, int) and ret in ("ncclResult_t", "int") else None


def _run_case(lib: ctypes.CDLL, name: str, kind: str) -> dict[str, object]:
    """Runs one call in a forked child: its result, or the signal that killed it, or a timeout."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: call, report, and leave without running Python's exit handlers
        os.close(read_end)
        try:
            rc = _call(lib, name, kind)
            os.write(write_end, json.dumps({"rc": rc}).encode())
        except BaseException as e:  # a harness error: reported as a call that gave no result
            os.write(2, f"{name} ({kind}): {e!r}\n".encode())
        finally:
            os._exit(0)
    os.close(write_end)
    deadline = time.monotonic() + CALL_TIMEOUT_S
    data = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([read_end], [], [], max(0.0, deadline - time.monotonic()))
        chunk = os.read(read_end, 4096) if ready else b""
        if not chunk:
            break
        data += chunk
    os.close(read_end)
    finished, status = os.waitpid(pid, os.WNOHANG)
    if not finished and time.monotonic() >= deadline:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return {"name": name, "kind": kind, "outcome": "timeout"}
    if not finished:
        _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return {"name": name, "kind": kind, "outcome": f"signal {os.WTERMSIG(status)}"}
    if not data:
        return {
            "name": name,
            "kind": kind,
            "outcome": f"exit {os.waitstatus_to_exitcode(status)} without a result",
        }
    return {"name": name, "kind": kind, "outcome": "returned", "rc": json.loads(data)["rc"]}


def run_cases(lib_path: Path, cases: list[tuple[str, str]], timeout: float = 600) -> list[dict[str, object]]:
    """Runs the cases in a fresh runner process (the library is never loaded into pytest); results go
    through a file, since libraries may print on stdout."""
    read_end, write_end = os.pipe()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "MSCCLPP_"))}
    env["MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT"] = "2"  # a random unique id with a GPU: give up quickly
    proc = subprocess.run(
        [sys.executable, __file__, str(lib_path), str(write_end)],
        input=json.dumps(cases),
        capture_output=True,
        pass_fds=(write_end,),
        text=True,
        env=env,
        timeout=timeout,
        check=False,
    )
    os.close(write_end)
    with os.fdopen(read_end) as results:
        text = results.read()
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(text)


def exported_functions(lib_path: Path) -> set[str]:
    from stock_nccl import defined_dynamic_symbols

    return {n for n in defined_dynamic_symbols(lib_path) if n.startswith("nccl")}


def test_every_export_has_a_signature(nccl_lib: Path) -> None:
    assert exported_functions(nccl_lib) == set(signatures())


def test_bad_input_neither_crashes_nor_hangs_and_fails(nccl_lib: Path) -> None:
    cases = [(name, kind) for name in sorted(signatures()) for kind in KINDS]
    problems = []
    for result in run_cases(nccl_lib, cases):
        name, kind = result["name"], result["kind"]
        if result["outcome"] != "returned":
            problems.append(f"{name} ({kind}): {result['outcome']}")
        elif (
            signatures()[name][0] == "ncclResult_t"
            and result["rc"] == 0
            and (name, kind) not in STOCK_SUCCEEDS | OURS_MAY_SUCCEED
        ):
            problems.append(f"{name} ({kind}): returned ncclSuccess where stock NCCL returns an error")
    assert not problems, "\n".join(problems)


@pytest.mark.skipif(
    os.environ.get("MSCCLPP_NCCL_STOCK_TABLE") != "1", reason="set MSCCLPP_NCCL_STOCK_TABLE=1"
)
def test_stock_agrees_with_the_table() -> None:
    """Re-measures STOCK_SUCCEEDS (stock crashes on many garbage handles, so only its successes count)."""
    from stock_nccl import stock_lib

    path, why = stock_lib()
    if path is None:
        pytest.skip(why)
    names = sorted(signatures().keys() & exported_functions(path))
    results = run_cases(path, [(n, k) for n in names for k in KINDS])
    succeeded = {
        (r["name"], r["kind"])
        for r in results
        if r["outcome"] == "returned" and r.get("rc") == 0 and signatures()[r["name"]][0] == "ncclResult_t"
    }
    assert succeeded == STOCK_SUCCEEDS


@pytest.fixture(scope="module")
def failing_alloc_driver(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from stock_nccl import compiler

    cxx = compiler("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    out = tmp_path_factory.mktemp("failing_alloc") / "failing_alloc_driver"
    # No sanitizers: they replace operator new, which the driver replaces itself. -rdynamic exports the
    # replacements to the library also where the compiler links libstdc++ statically.
    source = ROOT / "tests" / "failing_alloc_driver.cc"
    subprocess.run(
        [cxx, "-std=c++17", "-O1", "-rdynamic", "-o", str(out), str(source), "-ldl", "-lpthread"], check=True
    )
    return out


@pytest.mark.parametrize("refused", ["new", "thread"])
def test_exceptions_become_errors(nccl_lib: Path, failing_alloc_driver: Path, refused: str) -> None:
    """std::bad_alloc and std::system_error (no thread under `ulimit -u`) never leave the C API: each call
    returns ncclSystemError naming the cause (or fails earlier for lack of a GPU), and the process lives."""
    from host_build import driver_env

    env = driver_env()
    env["MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT"] = "2"
    proc = subprocess.run(
        [str(failing_alloc_driver), str(nccl_lib), refused],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    results = {line.split()[0]: line.split(maxsplit=2)[1:] for line in proc.stdout.splitlines()}
    assert len(results) == 7, proc.stdout
    causes = ("out of memory", "bad_alloc") if refused == "new" else ("Resource temporarily unavailable",)
    for rc, *message in results.values():
        if int(rc) == 2:  # ncclSystemError
            assert message and any(c in message[0] for c in causes), proc.stdout
    # The calls that reach the refused allocation or thread before any CUDA call, with or without a GPU.
    for name in ("ncclGetUniqueId", "ncclMemAlloc") if refused == "new" else ("ncclGetUniqueId",):
        assert results[name][0] == "2", f"{name}: {proc.stdout}"


def run_gpu_worker(scenario: str, **env: str) -> None:
    worker = ROOT / "tests" / "gpu" / "bad_input_worker.py"
    full_env = {k: v for k, v in os.environ.items() if not k.startswith(("NCCL_", "MSCCLPP_"))}
    full_env.update(env, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run(
        [sys.executable, str(worker), scenario], capture_output=True, text=True, env=full_env, timeout=120
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0 and f"PASS {scenario}" in output, output[-6000:]


@pytest.mark.gpu
def test_destroyed_comm_is_an_error_everywhere() -> None:
    run_gpu_worker("destroyed")


@pytest.mark.gpu
def test_unknown_registration_handles_are_refused() -> None:
    run_gpu_worker("deregister")


@pytest.mark.gpu
def test_abort_and_destroy_at_once() -> None:
    run_gpu_worker("race", MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT="1")


@pytest.mark.gpu
def test_a_comm_still_initializing_is_refused_at_once() -> None:
    run_gpu_worker("initializing")


@pytest.mark.gpu
def test_shrink_refuses_what_stock_refuses() -> None:
    run_gpu_worker("shrink_arguments")


@pytest.mark.gpu
def test_too_many_rounds_fail_instead_of_doing_nothing() -> None:
    run_gpu_worker("rounds", MSCCLPP_NCCL_ALGO="all_reduce=allreduce_one_shot_packet/1/32/8")


def _runner(lib_path: str, results_fd: int) -> None:
    lib = ctypes.CDLL(lib_path, mode=os.RTLD_LOCAL)
    cases = json.loads(sys.stdin.read())
    results = [_run_case(lib, name, kind) for name, kind in cases]
    with os.fdopen(results_fd, "w") as out:
        json.dump(results, out)


if __name__ == "__main__":
    _runner(sys.argv[1], int(sys.argv[2]))
