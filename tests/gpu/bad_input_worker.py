"""Bad input that needs a live (or once live) communicator, for tests/test_bad_input.py. One scenario per
run, named on the command line; prints "PASS <scenario>" or dies trying (a crash is the failure).

  destroyed   every function that takes a communicator, given a destroyed one: an error, no crash
  deregister  ncclCommDeregister / ncclCommWindowDeregister of handles the comm never gave out
  race        ncclCommAbort and ncclCommDestroy of one non-blocking comm at once, from two threads
  initializing  queries and ncclCommDestroy of a non-blocking comm still in its rendezvous refuse it at once
  rounds      a 16 GiB all-reduce forced onto a one-shot shape of one block and one packet a round
  shrink_arguments  ncclCommShrink refuses what stock refuses (an empty or NULL exclude list, a rank that
              excludes itself) and what would leave nothing, before any rendezvous
"""

from __future__ import annotations

import ctypes
import os
import random
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
import test_bad_input as table

from mscclpp_nccl.binding import Nccl, ffi, new_config

nccl = Nccl.load()
lib = nccl.lib
INVALID_ARGUMENT, INVALID_USAGE, IN_PROGRESS = 4, 5, 7


def two_ranks() -> list[object]:
    handles = ffi.new("ncclComm_t[]", 2)
    nccl.check(lib.ncclCommInitAll(handles, 2, ffi.new("int[]", [0, 0])))
    return [handles[0], handles[1]]


def address(handle: object) -> int:
    return int(ffi.cast("uintptr_t", handle))


def destroyed() -> None:
    comms = two_ranks()
    for comm in comms:
        nccl.check(lib.ncclCommDestroy(comm))
    cdll = ctypes.CDLL(nccl.path, mode=os.RTLD_LOCAL)
    for name, (ret, params) in sorted(table.signatures().items()):
        if "ncclComm_t" not in params:
            continue
        fn = getattr(cdll, name)
        fn.restype = table._restype(ret)
        fn.argtypes = [table._ctype(p) for p in params]
        keep: list[object] = []
        rng = random.Random(name)
        args = [
            address(comms[0]) if p == "ncclComm_t" else table._argument(p, "null", rng, keep) for p in params
        ]
        rc = fn(*args)
        if ret == "ncclResult_t":
            assert rc != 0, f"{name} accepted a destroyed comm"
    print("PASS destroyed")


def deregister() -> None:
    comms = [address(c) for c in two_ranks()]
    cdll = ctypes.CDLL(nccl.path, mode=os.RTLD_LOCAL)  # the same loaded library: dlopen counts references
    register, unregister, unwindow = (
        cdll.ncclCommRegister,
        cdll.ncclCommDeregister,
        cdll.ncclCommWindowDeregister,
    )
    register.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_void_p)]
    unregister.argtypes = unwindow.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    buffer = ctypes.create_string_buffer(4096)
    other, stale = ctypes.c_void_p(), ctypes.c_void_p()
    assert register(comms[1], buffer, 4096, ctypes.byref(other)) == 0
    assert register(comms[0], buffer, 4096, ctypes.byref(stale)) == 0
    assert unregister(comms[0], stale) == 0
    random_bytes = ctypes.create_string_buffer(os.urandom(1024), 1024)
    unknown = {
        "unmapped": 0x10,
        "random bytes": ctypes.addressof(random_bytes),
        "deregistered": stale.value,
        "another comm's": other.value,
    }
    for what, handle in unknown.items():
        rc = unregister(comms[0], handle)
        assert rc == INVALID_USAGE, f"ncclCommDeregister of a {what} handle returned {rc}"
        rc = unwindow(comms[0], handle)
        assert rc == INVALID_ARGUMENT, f"ncclCommWindowDeregister of a {what} handle returned {rc}"
    assert unregister(comms[1], other) == 0
    for comm in comms:
        nccl.check(lib.ncclCommDestroy(ffi.cast("ncclComm_t", comm)))
    print("PASS deregister")


def race() -> None:
    """Rank 0 of 2 alone: its initialisation waits in the rendezvous on the worker thread meanwhile."""
    for _ in range(10):
        comm = nccl.comm_init_rank(2, nccl.get_unique_id(), 0, new_config(blocking=0))
        start = threading.Barrier(2)
        results: dict[str, int] = {}

        def call(
            name: str, comm: object = comm, start: threading.Barrier = start, results: dict = results
        ) -> None:
            start.wait()
            results[name] = getattr(lib, name)(comm)

        threads = [threading.Thread(target=call, args=(n,)) for n in ("ncclCommAbort", "ncclCommDestroy")]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # The loser may find the comm already destroyed; neither may crash.
        assert 0 in results.values() and set(results.values()) <= {0, INVALID_ARGUMENT}, results
    print("PASS race")


def initializing() -> None:
    """Rank 0 of 2 alone, non-blocking: while its initialisation waits in the rendezvous, the queries and
    ncclCommDestroy refuse the comm at once, as stock NCCL does (destroy would otherwise wait out the
    bootstrap timeout); ncclCommAbort ends it."""
    comm = nccl.comm_init_rank(2, nccl.get_unique_id(), 0, new_config(blocking=0))
    out = ffi.new("int*")
    for name in ("ncclCommCount", "ncclCommUserRank", "ncclCommCuDevice"):
        rc = getattr(lib, name)(comm, out)
        assert rc == INVALID_ARGUMENT and "still initializing" in nccl.last_error(), (name, rc)
    rc = lib.ncclCommFinalize(comm)
    assert rc == INVALID_ARGUMENT and "still initializing" in nccl.last_error(), ("ncclCommFinalize", rc)
    started = time.monotonic()
    rc = lib.ncclCommDestroy(comm)
    took = time.monotonic() - started
    assert rc == INVALID_ARGUMENT and "still initializing" in nccl.last_error(), rc
    assert took < 1.0, f"ncclCommDestroy took {took:.1f} s"
    assert lib.ncclCommAbort(comm) == 0
    print("PASS initializing")


def rounds() -> None:
    import cupy as cp

    count = 16 << 30  # int8 elements: 2^31 packets of 8 bytes, one a round
    comms = two_ranks()
    buffers = [cp.cuda.runtime.malloc(count) for _ in comms]
    nccl.check(lib.ncclGroupStart())
    for comm, buf in zip(comms, buffers, strict=True):
        p = ffi.cast("void*", buf)
        nccl.check(lib.ncclAllReduce(p, p, count, 0, 0, comm, ffi.NULL))
    rc = lib.ncclGroupEnd()
    message = nccl.last_error()
    cp.cuda.runtime.deviceSynchronize()
    assert rc == INVALID_ARGUMENT and "rounds" in message, f"16 GiB one-shot all-reduce: {rc} {message!r}"
    for buf in buffers:
        cp.cuda.runtime.free(buf)
    for comm in comms:
        nccl.check(lib.ncclCommDestroy(comm))
    print("PASS rounds")


def shrink_arguments() -> None:
    comms = two_ranks()
    new = ffi.new("ncclComm_t*")
    for excluded, count, words in (
        (ffi.NULL, 1, "NULL or empty"),
        (ffi.new("int[]", [1]), 0, "NULL or empty"),
        (ffi.new("int[]", [1]), -1, "NULL or empty"),
        (ffi.new("int[]", [0]), 1, "excludes itself"),
        (ffi.new("int[]", [2]), 1, "out of range"),
    ):
        rc = lib.ncclCommShrink(comms[0], excluded, count, new, ffi.NULL, 0)
        message = ffi.string(lib.ncclGetLastError(comms[0])).decode()
        assert rc == INVALID_ARGUMENT and words in message, (count, rc, message)
        assert new[0] == ffi.NULL
    for comm in comms:
        nccl.check(lib.ncclCommDestroy(comm))
    print("PASS shrink_arguments")


if __name__ == "__main__":
    {
        "destroyed": destroyed,
        "deregister": deregister,
        "race": race,
        "initializing": initializing,
        "rounds": rounds,
        "shrink_arguments": shrink_arguments,
    }[sys.argv[1]]()
