"""Argument checks of every entry point that can be reached without a GPU: bad input returns
ncclInvalidArgument or ncclInvalidUsage with a message in ncclGetLastError, and never crashes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import cffi
import pytest

from mscclpp_nccl import binding

INVALID_ARGUMENT, INVALID_USAGE = 4, 5

# Every pointer is void* here: these tests pass NULLs and fakes on purpose.
CDEF = """
typedef struct { char internal[128]; } ncclUniqueId;
typedef struct { size_t size; unsigned int magic; unsigned int version; float estimatedTime; } ncclSimInfo_t;
int ncclGetVersion(int*);
int ncclGetUniqueId(ncclUniqueId*);
const char* ncclGetLastError(void*);
int ncclCommInitRank(void**, int, ncclUniqueId, int);
int ncclCommInitRankConfig(void**, int, ncclUniqueId, int, void*);
int ncclCommInitRankScalable(void**, int, int, int, ncclUniqueId*, void*);
int ncclCommInitAll(void**, int, const int*);
int ncclCommSplit(void*, int, int, void**, void*);
int ncclCommShrink(void*, int*, int, void**, void*, int);
int ncclCommFinalize(void*);
int ncclCommDestroy(void*);
int ncclCommAbort(void*);
int ncclCommCount(void*, int*);
int ncclCommCuDevice(void*, int*);
int ncclCommUserRank(void*, int*);
int ncclCommGetAsyncError(void*, int*);
int ncclGroupStart(void);
int ncclGroupEnd(void);
int ncclGroupSimulateEnd(ncclSimInfo_t*);
int ncclRedOpCreatePreMulSum(int*, void*, int, int, void*);
int ncclRedOpDestroy(int, void*);
int ncclMemAlloc(void**, size_t);
int ncclMemFree(void*);
int ncclCommRegister(void*, void*, size_t, void**);
int ncclCommDeregister(void*, void*);
int ncclCommWindowRegister(void*, void*, size_t, void**, int);
int ncclCommWindowDeregister(void*, void*);
int ncclWinGetUserPtr(void*, void*, void**);
int ncclGetPeerDevicePointer(void*, size_t, int, void**);
int ncclGetLsaDevicePointer(void*, size_t, int, void**);
typedef struct { int nRanks; int rank; int stride; } ncclTeam_t;
ncclTeam_t ncclTeamWorld(void*);
ncclTeam_t ncclTeamLsa(void*);
ncclTeam_t ncclTeamRail(void*);
int ncclTeamRankToWorld(void*, ncclTeam_t, int);
int ncclTeamRankToLsa(void*, ncclTeam_t, int);
int ncclCommSuspend(void*, int);
int ncclCommResume(void*);
int ncclCommMemStats(void*, int, uint64_t*);
int ncclAllReduce(void*, void*, size_t, int, int, void*, void*);
int ncclAllReduceConfig(void*, void*, size_t, int, int, void*, void*, void*);
int ncclAllGather(void*, void*, size_t, int, void*, void*);
int ncclAllGatherConfig(void*, void*, size_t, int, void*, void*, void*);
int ncclReduceScatter(void*, void*, size_t, int, int, void*, void*);
int ncclReduceScatterConfig(void*, void*, size_t, int, int, void*, void*, void*);
int ncclAlltoAll(void*, void*, size_t, int, void*, void*);
int ncclAlltoAllConfig(void*, void*, size_t, int, void*, void*, void*);
int ncclBroadcast(void*, void*, size_t, int, int, void*, void*);
int ncclBroadcastConfig(void*, void*, size_t, int, int, void*, void*, void*);
int ncclBcast(void*, size_t, int, int, void*, void*);
int ncclReduce(void*, void*, size_t, int, int, int, void*, void*);
int ncclReduceConfig(void*, void*, size_t, int, int, int, void*, void*, void*);
int ncclGather(void*, void*, size_t, int, int, void*, void*);
int ncclGatherConfig(void*, void*, size_t, int, int, void*, void*, void*);
int ncclScatter(void*, void*, size_t, int, int, void*, void*);
int ncclScatterConfig(void*, void*, size_t, int, int, void*, void*, void*);
int ncclSend(void*, size_t, int, int, void*, void*);
int ncclRecv(void*, size_t, int, int, void*, void*);
int ncclCommGrow(void*, int, void*, int, void**, void*);
int ncclCommRevoke(void*, int);
int ncclCommGetUniqueId(void*, ncclUniqueId*);
int ncclSetEncryption(void*);
int ncclSignal(int, int, int, unsigned int, void*, void*);
int ncclPutSignal(const void*, size_t, int, int, void*, size_t, int, int, unsigned int, void*, void*);
int ncclWaitSignal(int, void*, void*, void*);
"""

ffi = cffi.FFI()
ffi.cdef(CDEF)
NULL = ffi.NULL


@pytest.fixture(scope="module")
def lib(nccl_lib: Path) -> Any:
    return ffi.dlopen(str(nccl_lib))


def last_error(lib: Any) -> str:
    return ffi.string(lib.ncclGetLastError(NULL)).decode()


def expect(lib: Any, call: Callable[[], int], code: int, *words: str) -> None:
    assert call() == code, last_error(lib)
    message = last_error(lib)
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"


def collective_calls(lib: Any, comm: Any) -> dict[str, Callable[[], int]]:
    """Each collective and point-to-point call, well formed except for `comm`."""
    buf = ffi.new("char[64]")
    p, s = ffi.cast("void*", buf), NULL
    return {
        "ncclAllReduce": lambda: lib.ncclAllReduce(p, p, 4, 7, 0, comm, s),
        "ncclAllReduceConfig": lambda: lib.ncclAllReduceConfig(p, p, 4, 7, 0, comm, s, NULL),
        "ncclAllGather": lambda: lib.ncclAllGather(p, p, 4, 7, comm, s),
        "ncclAllGatherConfig": lambda: lib.ncclAllGatherConfig(p, p, 4, 7, comm, s, NULL),
        "ncclReduceScatter": lambda: lib.ncclReduceScatter(p, p, 4, 7, 0, comm, s),
        "ncclReduceScatterConfig": lambda: lib.ncclReduceScatterConfig(p, p, 4, 7, 0, comm, s, NULL),
        "ncclAlltoAll": lambda: lib.ncclAlltoAll(p, p, 4, 7, comm, s),
        "ncclAlltoAllConfig": lambda: lib.ncclAlltoAllConfig(p, p, 4, 7, comm, s, NULL),
        "ncclBroadcast": lambda: lib.ncclBroadcast(p, p, 4, 7, 0, comm, s),
        "ncclBroadcastConfig": lambda: lib.ncclBroadcastConfig(p, p, 4, 7, 0, comm, s, NULL),
        "ncclBcast": lambda: lib.ncclBcast(p, 4, 7, 0, comm, s),
        "ncclReduce": lambda: lib.ncclReduce(p, p, 4, 7, 0, 0, comm, s),
        "ncclReduceConfig": lambda: lib.ncclReduceConfig(p, p, 4, 7, 0, 0, comm, s, NULL),
        "ncclGather": lambda: lib.ncclGather(p, p, 4, 7, 0, comm, s),
        "ncclGatherConfig": lambda: lib.ncclGatherConfig(p, p, 4, 7, 0, comm, s, NULL),
        "ncclScatter": lambda: lib.ncclScatter(p, p, 4, 7, 0, comm, s),
        "ncclScatterConfig": lambda: lib.ncclScatterConfig(p, p, 4, 7, 0, comm, s, NULL),
        "ncclSend": lambda: lib.ncclSend(p, 4, 7, 0, comm, s),
        "ncclRecv": lambda: lib.ncclRecv(p, 4, 7, 0, comm, s),
    }


@pytest.mark.parametrize("name", sorted(collective_calls(None, NULL)))
def test_collectives_reject_null_comm(lib: Any, name: str) -> None:
    expect(lib, collective_calls(lib, NULL)[name], INVALID_ARGUMENT, name, "comm is NULL")


@pytest.mark.parametrize("name", sorted(collective_calls(None, NULL)))
def test_collectives_reject_a_fake_comm(lib: Any, name: str) -> None:
    fake = ffi.new("char[4096]")  # readable memory that is no communicator
    calls = collective_calls(lib, ffi.cast("void*", fake))
    expect(lib, calls[name], INVALID_ARGUMENT, "not a valid communicator")


def test_a_call_that_fails_inside_a_group_fails_the_group(lib: Any) -> None:
    """As in stock NCCL: each call still fails at once, and the outermost ncclGroupEnd returns the first
    failure (with its text) and runs nothing of the group; the next group starts clean."""
    calls = collective_calls(lib, NULL)
    assert lib.ncclGroupStart() == 0
    assert calls["ncclAllReduce"]() == INVALID_ARGUMENT
    for name, call in calls.items():
        assert call() == INVALID_ARGUMENT, name
    expect(lib, lib.ncclGroupEnd, INVALID_ARGUMENT, "ncclAllReduce", "comm is NULL")
    assert lib.ncclGroupStart() == 0 and lib.ncclGroupEnd() == 0


def test_a_group_failure_is_returned_by_the_outermost_group_end(lib: Any) -> None:
    fake = ffi.cast("void*", ffi.new("char[4096]"))  # readable memory that is no communicator
    assert lib.ncclGroupStart() == 0 and lib.ncclGroupStart() == 0
    assert collective_calls(lib, fake)["ncclSend"]() == INVALID_ARGUMENT
    assert lib.ncclGroupEnd() == 0  # an inner end runs nothing and reports nothing yet
    expect(lib, lib.ncclGroupEnd, INVALID_ARGUMENT, "ncclSend", "not a valid communicator")
    # Initialisations and splits take part too.
    out = ffi.new("void**")
    assert lib.ncclGroupStart() == 0
    assert lib.ncclCommSplit(NULL, 0, 0, out, NULL) == INVALID_ARGUMENT
    expect(lib, lib.ncclGroupEnd, INVALID_ARGUMENT, "ncclCommSplit")
    # A query that fails inside a group does not fail it, as in stock NCCL.
    assert lib.ncclGroupStart() == 0
    assert lib.ncclCommCount(NULL, ffi.new("int*")) == INVALID_ARGUMENT
    assert lib.ncclGroupEnd() == 0


def test_simulated_group_end_checks_its_struct_and_the_group(lib: Any) -> None:
    info = ffi.new("ncclSimInfo_t*")
    info.size, info.magic, info.version = ffi.sizeof("ncclSimInfo_t"), 0x1234, 23203
    assert lib.ncclGroupStart() == 0
    expect(lib, lambda: lib.ncclGroupSimulateEnd(info), INVALID_ARGUMENT, "NCCL_SIM_INFO_INITIALIZER")
    info.size, info.magic = 0, 0x74685283  # a size that covers no magic
    assert lib.ncclGroupStart() == 0
    expect(lib, lambda: lib.ncclGroupSimulateEnd(info), INVALID_ARGUMENT, "NCCL_SIM_INFO_INITIALIZER")
    info.size = ffi.sizeof("ncclSimInfo_t")
    assert lib.ncclGroupStart() == 0
    assert collective_calls(lib, NULL)["ncclReduce"]() == INVALID_ARGUMENT
    expect(lib, lambda: lib.ncclGroupSimulateEnd(info), INVALID_ARGUMENT, "ncclReduce")


def test_last_error_reaches_other_threads(lib: Any) -> None:
    """Stock NCCL keeps one text for the process: a thread that has not failed itself (PyTorch's
    watchdog) reads the last failure that another thread saw."""
    expect(lib, lambda: lib.ncclCommCount(NULL, ffi.new("int*")), INVALID_ARGUMENT, "ncclCommCount")
    seen: list[str] = []
    reader = threading.Thread(target=lambda: seen.append(last_error(lib)))
    reader.start()
    reader.join()
    assert seen == ["ncclCommCount: comm is NULL"], seen


def test_last_error_reads_no_pointer_that_is_not_a_comm(nccl_lib: Path) -> None:
    """Stock NCCL ignores ncclGetLastError's argument, so callers may pass anything; a pointer into
    unmapped memory must not be read (a crash would end the child with a signal)."""
    code = textwrap.dedent(
        f"""
        import cffi
        ffi = cffi.FFI()
        ffi.cdef("const char* ncclGetLastError(void*);")
        lib = ffi.dlopen({str(nccl_lib)!r})
        for bad in (0x10, 0xFFFF0000DEAD0000):
            assert ffi.string(lib.ncclGetLastError(ffi.cast("void*", bad))) == b""
        print("OK")
        """
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "OK" in proc.stdout, (proc.returncode, proc.stderr)


def test_queries_reject_null(lib: Any) -> None:
    out = ffi.new("int*")
    for name in ("ncclCommCount", "ncclCommCuDevice", "ncclCommUserRank", "ncclCommGetAsyncError"):
        expect(lib, lambda name=name: getattr(lib, name)(NULL, out), INVALID_ARGUMENT, name)
    expect(lib, lambda: lib.ncclCommFinalize(NULL), INVALID_ARGUMENT, "ncclCommFinalize")
    expect(lib, lambda: lib.ncclGetVersion(NULL), INVALID_ARGUMENT, "ncclGetVersion")
    # Destroying or aborting NULL is allowed, as in stock NCCL.
    assert lib.ncclCommDestroy(NULL) == 0 and lib.ncclCommAbort(NULL) == 0


def test_init_checks_arguments_before_touching_the_gpu(lib: Any) -> None:
    uid = ffi.new("ncclUniqueId*")
    out = ffi.new("void**")
    expect(lib, lambda: lib.ncclCommInitRank(NULL, 2, uid[0], 0), INVALID_ARGUMENT, "comm is NULL")
    expect(lib, lambda: lib.ncclCommInitRank(out, 0, uid[0], 0), INVALID_ARGUMENT, "nranks 0")
    expect(lib, lambda: lib.ncclCommInitRank(out, 2, uid[0], 2), INVALID_ARGUMENT, "rank 2")
    bad_config = ffi.new("char[256]")  # zeroed: wrong magic
    expect(
        lib,
        lambda: lib.ncclCommInitRankConfig(out, 2, uid[0], 0, bad_config),
        INVALID_ARGUMENT,
        "NCCL_CONFIG_INITIALIZER",
    )
    expect(lib, lambda: lib.ncclCommInitRankScalable(out, 2, 0, 0, uid, NULL), INVALID_ARGUMENT, "unique id")
    expect(lib, lambda: lib.ncclCommInitAll(NULL, 1, NULL), INVALID_ARGUMENT, "comms is NULL")
    expect(lib, lambda: lib.ncclCommInitAll(out, 0, NULL), INVALID_ARGUMENT, "ndev 0")


CONFIG_REFUSALS = [
    ("blocking", 2),
    ("cgaClusterSize", -1),
    ("minCTAs", 0),
    ("maxCTAs", -4),
    ("splitShare", 2),
    ("collnetEnable", -1),
    ("CTAPolicy", 4),
    ("shrinkShare", 3),
    ("nvlsCTAs", 0),
    ("nChannelsPerNetPeer", 65),
    ("nvlinkCentricSched", 2),
    ("graphUsageMode", 3),
    ("numRmaCtx", -1),
    ("maxP2pPeers", 0),
    ("graphStreamOrdering", 2),
]


def init_with_config(lib: Any, **fields: int) -> tuple[int, Any]:
    """ncclCommInitRankConfig of a one-rank communicator with an NCCL_CONFIG_INITIALIZER config that has
    `fields` set: its result and the communicator."""
    from mscclpp_nccl import binding

    kept = binding.new_config(**fields)
    config = ffi.cast("void*", int(binding.ffi.cast("uintptr_t", kept)))
    uid, out = ffi.new("ncclUniqueId*"), ffi.new("void**")
    assert lib.ncclGetUniqueId(uid) == 0
    return lib.ncclCommInitRankConfig(out, 1, uid[0], 0, config), out[0]


@pytest.mark.parametrize(("field", "value"), CONFIG_REFUSALS, ids=[f for f, _ in CONFIG_REFUSALS])
def test_config_values_stock_refuses_are_refused(lib: Any, field: str, value: int) -> None:
    rc, comm = init_with_config(lib, **{field: value})
    assert (rc, comm) == (INVALID_ARGUMENT, NULL), last_error(lib)
    assert field in last_error(lib)


def test_config_values_stock_accepts_pass_the_checks(lib: Any) -> None:
    """Edge values that stock accepts, minCTAs = maxCTAs among them, and minCTAs alone (which stock's check
    refuses by comparing it with the unset maxCTAs): whatever the init then does, the config is not why
    it fails."""
    for fields in (
        {"cgaClusterSize": 0, "minCTAs": 4, "maxCTAs": 4, "CTAPolicy": 3, "graphUsageMode": 2},
        {"minCTAs": 2, "nChannelsPerNetPeer": 64, "numRmaCtx": 0, "graphStreamOrdering": 0},
    ):
        rc, comm = init_with_config(lib, **fields)
        if rc == 0:  # a GPU: a communicator of one rank
            assert lib.ncclCommDestroy(comm) == 0
        else:
            assert "ncclConfig_t" not in last_error(lib), (fields, last_error(lib))
    rc, comm = init_with_config(lib, minCTAs=8, maxCTAs=4)
    assert (rc, comm) == (INVALID_ARGUMENT, NULL), last_error(lib)
    assert "minCTAs 8 is above maxCTAs 4" in last_error(lib)


def test_split_and_shrink_reject_null(lib: Any) -> None:
    out = ffi.new("void**")
    expect(lib, lambda: lib.ncclCommSplit(NULL, 0, 0, out, NULL), INVALID_ARGUMENT, "ncclCommSplit")
    expect(lib, lambda: lib.ncclCommShrink(NULL, NULL, 0, out, NULL, 0), INVALID_ARGUMENT, "ncclCommShrink")


def test_group_bookkeeping(lib: Any) -> None:
    expect(lib, lib.ncclGroupEnd, INVALID_USAGE, "no matching ncclGroupStart")
    assert lib.ncclGroupStart() == 0 and lib.ncclGroupStart() == 0
    assert lib.ncclGroupEnd() == 0 and lib.ncclGroupEnd() == 0
    expect(lib, lib.ncclGroupEnd, INVALID_USAGE, "no matching ncclGroupStart")
    info = ffi.new("ncclSimInfo_t*")
    info.size, info.magic, info.version = ffi.sizeof("ncclSimInfo_t"), 0x74685283, 23203
    info.estimatedTime = -1
    expect(lib, lambda: lib.ncclGroupSimulateEnd(info), INVALID_USAGE, "no matching ncclGroupStart")
    assert lib.ncclGroupStart() == 0
    expect(lib, lambda: lib.ncclGroupSimulateEnd(NULL), INVALID_ARGUMENT, "simInfo is NULL")
    assert lib.ncclGroupSimulateEnd(info) == 0  # the NULL call above left the group open
    assert info.estimatedTime == 0.0  # an empty group costs nothing
    expect(lib, lib.ncclGroupEnd, INVALID_USAGE, "no matching ncclGroupStart")


def test_ops_memory_and_registration_reject_null(lib: Any) -> None:
    op = ffi.new("int*")
    scalar = ffi.new("float*", 2.0)
    create = lambda: lib.ncclRedOpCreatePreMulSum(op, scalar, 7, 1, NULL)  # noqa: E731
    expect(lib, create, INVALID_ARGUMENT, "comm is NULL")
    expect(lib, lambda: lib.ncclRedOpDestroy(5, NULL), INVALID_ARGUMENT, "comm is NULL")
    expect(lib, lambda: lib.ncclMemAlloc(NULL, 8), INVALID_ARGUMENT, "ncclMemAlloc")
    ptr = ffi.new("void**", ffi.cast("void*", 1))
    assert lib.ncclMemAlloc(ptr, 0) == 0 and ptr[0] == NULL
    assert lib.ncclMemFree(NULL) == 0
    handle = ffi.new("void**")
    buf = ffi.cast("void*", ffi.new("char[8]"))
    for name, call in {
        "ncclCommRegister": lambda: lib.ncclCommRegister(NULL, buf, 8, handle),
        "ncclCommDeregister": lambda: lib.ncclCommDeregister(NULL, buf),
        "ncclCommWindowRegister": lambda: lib.ncclCommWindowRegister(NULL, buf, 8, handle, 0),
        "ncclCommWindowDeregister": lambda: lib.ncclCommWindowDeregister(NULL, buf),
        "ncclWinGetUserPtr": lambda: lib.ncclWinGetUserPtr(NULL, buf, handle),
        "ncclCommSuspend": lambda: lib.ncclCommSuspend(NULL, 1),
        "ncclCommResume": lambda: lib.ncclCommResume(NULL),
        "ncclCommMemStats": lambda: lib.ncclCommMemStats(NULL, 0, ffi.new("uint64_t*")),
    }.items():
        expect(lib, call, INVALID_ARGUMENT, name)


def test_revoke_takes_null_as_stock_does_and_refuses_unknown_handles(lib: Any) -> None:
    assert lib.ncclCommRevoke(NULL, 0) == 0  # stock NCCL 2.32.3 returns ncclSuccess too
    fake = ffi.new("char[4096]")  # readable memory that is no communicator
    expect(lib, lambda: lib.ncclCommRevoke(ffi.cast("void*", fake), 0), INVALID_ARGUMENT, "ncclCommRevoke")


def test_grow_checks_its_arguments_before_any_rendezvous(lib: Any) -> None:
    uid = ffi.new("ncclUniqueId*")
    out = ffi.new("void**")
    fake = ffi.new("char[4096]")  # readable memory that is no communicator
    expect(lib, lambda: lib.ncclCommGetUniqueId(NULL, uid), INVALID_ARGUMENT, "ncclCommGetUniqueId")
    expect(lib, lambda: lib.ncclCommGrow(NULL, 2, uid, 0, NULL, NULL), INVALID_ARGUMENT, "newcomm is NULL")
    expect(lib, lambda: lib.ncclCommGrow(NULL, 2, NULL, 1, out, NULL), INVALID_ARGUMENT, "uniqueId is NULL")
    expect(lib, lambda: lib.ncclCommGrow(NULL, 4, uid, 4, out, NULL), INVALID_ARGUMENT, "rank 4 is not in")
    expect(lib, lambda: lib.ncclCommGrow(NULL, 0, uid, 0, out, NULL), INVALID_ARGUMENT, "not positive")
    grow = lambda: lib.ncclCommGrow(ffi.cast("void*", fake), 4, uid, -1, out, NULL)  # noqa: E731
    expect(lib, grow, INVALID_ARGUMENT, "ncclCommGrow")
    assert out[0] == NULL


def test_window_pointer_queries_refuse_unknown_windows(lib: Any) -> None:
    out = ffi.new("void**", ffi.cast("void*", 1))
    fake = ffi.new("char[4096]")  # readable memory that is no window
    for window in (NULL, ffi.cast("void*", fake)):
        for name, call in {
            "ncclGetPeerDevicePointer": lambda w=window: lib.ncclGetPeerDevicePointer(w, 0, 0, out),
            "ncclGetLsaDevicePointer": lambda w=window: lib.ncclGetLsaDevicePointer(w, 0, 0, out),
        }.items():
            expect(lib, call, INVALID_ARGUMENT, name, "not a registered window")
    assert out[0] == ffi.cast("void*", 1)  # nothing is written before the window is known


def test_team_queries_refuse_unusable_comms(lib: Any) -> None:
    fake = ffi.new("char[4096]")  # readable memory that is no communicator
    team = ffi.new("ncclTeam_t*", {"nRanks": 2, "rank": 0, "stride": 1})[0]
    for comm in (NULL, ffi.cast("void*", fake)):
        for name in ("ncclTeamWorld", "ncclTeamLsa", "ncclTeamRail"):
            got = getattr(lib, name)(comm)
            assert (got.nRanks, got.rank, got.stride) == (0, 0, 0), name
            assert name in ffi.string(lib.ncclGetLastError(NULL)).decode()
        for name in ("ncclTeamRankToWorld", "ncclTeamRankToLsa"):
            assert getattr(lib, name)(comm, team, 1) == -1, name
            assert name in ffi.string(lib.ncclGetLastError(NULL)).decode()


def test_encryption_none_is_accepted_and_a_key_refused(lib: Any) -> None:
    # size, magic, version, mode, psk: NCCL_ENCRYPTION_CONFIG_INITIALIZER's layout.
    config = ffi.new("uint64_t[4]", [32, 0xCAFEBEEF | (23203 << 32), 0, 0])
    fields = ffi.cast("int*", config)
    assert lib.ncclSetEncryption(NULL) == 0
    assert lib.ncclSetEncryption(config) == 0  # mode NONE
    fields[4] = 1  # mode PSK
    expect(lib, lambda: lib.ncclSetEncryption(config), INVALID_USAGE, "ncclSetEncryption", "pre-shared key")
    fields[4] = 7
    expect(lib, lambda: lib.ncclSetEncryption(config), INVALID_ARGUMENT, "unknown mode 7")
    fields[2] = 0  # magic
    expect(lib, lambda: lib.ncclSetEncryption(config), INVALID_ARGUMENT, "bad magic")


def test_one_sided_calls_check_the_comm_first(lib: Any) -> None:
    fake = ffi.new("char[4096]")  # readable memory that is no communicator
    for comm, words in ((NULL, "comm is NULL"), (ffi.cast("void*", fake), "not a valid communicator")):
        calls = {
            "ncclSignal": lambda c=comm: lib.ncclSignal(0, 0, 0, 0, c, NULL),
            "ncclPutSignal": lambda c=comm: lib.ncclPutSignal(NULL, 4, 7, 0, NULL, 0, 0, 0, 0, c, NULL),
            "ncclWaitSignal": lambda c=comm: lib.ncclWaitSignal(1, NULL, c, NULL),
        }
        for name, call in calls.items():
            expect(lib, call, INVALID_ARGUMENT, name, words)


def test_warn_lines_follow_nccl_debug(nccl_lib: Path) -> None:
    script = textwrap.dedent(
        f"""
        import cffi
        ffi = cffi.FFI()
        ffi.cdef("int ncclCommCount(void*, int*);")
        lib = ffi.dlopen({str(nccl_lib)!r})
        assert lib.ncclCommCount(ffi.NULL, ffi.new("int*")) == 4
        """
    )
    for level, expected in (("WARN", True), ("", False)):
        env = {"NCCL_DEBUG": level} if level else {}
        proc = subprocess.run(
            [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=True
        )
        assert ("NCCL WARN ncclCommCount: comm is NULL" in proc.stderr) == expected, proc.stderr


def config_bytes(size: int, magic: int = 0xCAFEBEEF) -> Any:
    """An ncclConfig_t as a caller built against older or newer headers lays it out: `size` bytes, the
    2.32 prefix (size, magic, version), every int field INT_MIN ("unset")."""
    raw = ffi.new("char[256]")
    ints = ffi.cast("int*", raw)
    for i in range(64):
        ints[i] = -(2**31)
    ffi.cast("size_t*", raw)[0] = size
    ffi.cast("unsigned int*", raw)[2] = magic
    ffi.cast("unsigned int*", raw)[3] = 23003
    return raw


def test_config_is_read_by_its_size(lib: Any, has_gpu: bool) -> None:
    uid = ffi.new("ncclUniqueId*")
    out = ffi.new("void**")
    too_small = config_bytes(8)
    init = lambda: lib.ncclCommInitRankConfig(out, 2, uid[0], 0, too_small)  # noqa: E731
    expect(lib, init, INVALID_ARGUMENT, "too small")
    odd = config_bytes(96, magic=0xCAFEBEEF)
    ffi.cast("int*", odd)[4] = 2  # blocking: 0, 1 or unset, as stock NCCL requires
    expect(lib, lambda: lib.ncclCommInitRankConfig(out, 2, uid[0], 0, odd), INVALID_ARGUMENT, "blocking is 2")
    if has_gpu:
        pytest.skip("the rest checks that a valid config gets as far as the GPU, which needs no GPU present")
    for size in (96, 120, 200):  # a 2.30 caller, a 2.32 caller, a future caller
        config = config_bytes(size)
        result = lib.ncclCommInitRankConfig(out, 2, uid[0], 0, config)
        assert result == 1, f"size {size}: {result} {last_error(lib)}"  # accepted; then no CUDA device
        assert "CUDA" in last_error(lib)


def test_config_hints_this_library_does_not_use_are_named(nccl_lib: Path) -> None:
    """Stock NCCL's tuning hints (here cgaClusterSize) are accepted, and NCCL_DEBUG=INFO says that they
    are not used, instead of leaving a caller to believe them honoured; maxCTAs, which is honoured, is
    not among them."""
    script = textwrap.dedent(
        f"""
        import cffi
        ffi = cffi.FFI()
        ffi.cdef("typedef struct {{ char internal[128]; }} ncclUniqueId;"
                 "int ncclCommInitRankConfig(void**, int, ncclUniqueId, int, void*);")
        lib = ffi.dlopen({str(nccl_lib)!r})
        raw = ffi.new("char[256]")
        ints = ffi.cast("int*", raw)
        for i in range(64):
            ints[i] = -(2**31)
        ffi.cast("size_t*", raw)[0] = 96
        ffi.cast("unsigned int*", raw)[2] = 0xCAFEBEEF
        ffi.cast("unsigned int*", raw)[3] = 23003
        ints[5], ints[7] = 4, 8  # cgaClusterSize, maxCTAs
        lib.ncclCommInitRankConfig(ffi.new("void**"), 2, ffi.new("ncclUniqueId*")[0], 0, raw)
        """
    )
    env = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT"}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    unused = [line for line in proc.stderr.splitlines() if "settings this library does not use" in line]
    assert len(unused) == 1 and unused[0].endswith(": cgaClusterSize=4"), proc.stderr


def coll_config(**fields: Any) -> tuple[Any, Any]:
    """binding.new_coll_config(**fields) as this module's void*, with what keeps it alive."""
    cfg = binding.new_coll_config(**fields)
    return ffi.cast("void*", int(binding.ffi.cast("uintptr_t", cfg))), cfg


def test_a_forced_algorithm_selection_is_refused(lib: Any) -> None:
    """algSelection names stock NCCL's algorithms: forced (the default) it cannot be satisfied here and
    is refused, as stock refuses a selection it cannot satisfy; unforced it is a preference, and the call
    goes on (here to the missing communicator's error). An empty one selects nothing."""
    buf = ffi.new("char[64]")
    p = ffi.cast("void*", buf)
    forced, keep = coll_config(algSelection="nvls")
    expect(
        lib,
        lambda: lib.ncclAllReduceConfig(p, p, 4, 7, 0, NULL, NULL, forced),
        INVALID_USAGE,
        "ncclAllReduceConfig",
        "algSelection",
        "nvls",
    )
    expect(lib, lambda: lib.ncclScatterConfig(p, p, 4, 7, 0, NULL, NULL, forced), INVALID_USAGE, "nvls")
    preferred, keep2 = coll_config(algSelection="nvls", forceAlgSelection=0)
    expect(
        lib,
        lambda: lib.ncclAllReduceConfig(p, p, 4, 7, 0, NULL, NULL, preferred),
        INVALID_ARGUMENT,
        "comm is NULL",
    )
    empty, keep3 = coll_config(algSelection="")
    expect(
        lib, lambda: lib.ncclAllGatherConfig(p, p, 4, 7, NULL, NULL, empty), INVALID_ARGUMENT, "comm is NULL"
    )
    del keep, keep2, keep3


def test_a_launch_event_is_not_recorded_for_a_call_that_cannot_run(lib: Any) -> None:
    """The launch-completion event is recorded only once the call passed its checks, as its work is
    queued: a bogus event with a missing communicator gives the communicator's error, touching no CUDA."""
    buf = ffi.new("char[64]")
    p = ffi.cast("void*", buf)
    config, keep = coll_config(launchCompletionEvent=binding.ffi.cast("void*", 0x1234))
    expect(
        lib,
        lambda: lib.ncclReduceConfig(p, p, 4, 7, 0, 0, NULL, NULL, config),
        INVALID_ARGUMENT,
        "comm is NULL",
    )
    del keep
