"""Several ranks in ONE process, driven from one thread, as nccl-tests and CuPy do: ranks initialised
inside ncclGroupStart/ncclGroupEnd, collectives on every rank inside one group, ncclCommInitAll with
every rank on GPU 0, non-blocking init polled through ncclCommGetAsyncError (as PyTorch does), and
ncclCommShrink. Runs as a single process; prints PASS lines."""

from __future__ import annotations

import os
import sys
import time

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from allreduce_worker import pattern

from mscclpp_nccl.binding import Nccl, ffi, new_config

NRANKS = 4
nccl = Nccl.load()
lib = nccl.lib


def all_reduce_on_all(comms: list[object], count: int) -> None:
    """One all-reduce per rank, all inside one group from this thread, each on its own stream."""
    streams = [cp.cuda.Stream(non_blocking=True) for _ in comms]
    data = [cp.asarray(pattern(count, k).astype(np.float32)) for k in range(len(comms))]
    cp.cuda.Device().synchronize()
    nccl.check(lib.ncclGroupStart())
    for k, comm in enumerate(comms):
        p = ffi.cast("void*", data[k].data.ptr)
        nccl.check(lib.ncclAllReduce(p, p, count, 7, 0, comm, ffi.cast("void*", streams[k].ptr)), comm)
    nccl.check(lib.ncclGroupEnd())
    for s in streams:
        s.synchronize()
    expected = sum(pattern(count, k) for k in range(len(comms)))
    for k in range(len(comms)):
        assert np.array_equal(data[k].get(), expected), f"rank {k} of {len(comms)}: wrong all-reduce"


def init_in_group(config: object = None) -> list[object]:
    uid = nccl.get_unique_id()
    handles = ffi.new("ncclComm_t[]", NRANKS)
    nccl.check(lib.ncclGroupStart())
    for k in range(NRANKS):
        if config is None:
            nccl.check(lib.ncclCommInitRank(handles + k, NRANKS, uid, k))
        else:
            nccl.check(lib.ncclCommInitRankConfig(handles + k, NRANKS, uid, k, config))
    result = lib.ncclGroupEnd()
    assert result in (0, 7), f"ncclGroupEnd returned {result}: {nccl.last_error()}"
    return [handles[k] for k in range(NRANKS)]


def destroy(comms: list[object]) -> None:
    for comm in comms:
        nccl.check(lib.ncclCommDestroy(comm))


def main() -> None:
    cp.cuda.Device(0).use()
    comms = init_in_group(new_config(nvlinkCentricSched=1))
    for k, comm in enumerate(comms):
        assert nccl.comm_user_rank(comm) == k and nccl.comm_count(comm) == NRANKS
        assert nccl.comm_cu_device(comm) == 0
    for count in (1, 1000, 300001):
        all_reduce_on_all(comms, count)
    print("PASS group_init: 4 ranks initialised in one group from one thread, grouped all-reduces")

    # One rank's call fails inside the group: as in NCCL the group fails as a whole and runs nothing (the
    # other ranks' all-reduces would wait for it forever), and the next group works.
    data = [cp.full(256, k + 1, dtype=cp.float32) for k in range(NRANKS)]
    cp.cuda.Device().synchronize()
    nccl.check(lib.ncclGroupStart())
    for k, comm in enumerate(comms):
        p = ffi.cast("void*", data[k].data.ptr)
        dtype = 99 if k == 2 else 7  # rank 2 names no datatype
        assert lib.ncclAllReduce(p, p, 256, dtype, 0, comm, ffi.NULL) == (4 if k == 2 else 0)
    assert lib.ncclGroupEnd() == 4 and "datatype" in nccl.last_error(), nccl.last_error()
    cp.cuda.Device().synchronize()
    assert all(bool(cp.all(data[k] == k + 1)) for k in range(NRANKS)), "a failed group ran some of its calls"
    all_reduce_on_all(comms, 4097)
    print("PASS group_failure: a call that fails fails its group, which runs nothing")

    excluded = ffi.new("int[]", [NRANKS - 1])
    shrunk = ffi.new("ncclComm_t[]", NRANKS - 1)
    nccl.check(lib.ncclGroupStart())
    for k in range(NRANKS - 1):
        nccl.check(lib.ncclCommShrink(comms[k], excluded, 1, shrunk + k, ffi.NULL, 0), comms[k])
    nccl.check(lib.ncclGroupEnd())
    small = [shrunk[k] for k in range(NRANKS - 1)]
    assert [nccl.comm_count(c) for c in small] == [NRANKS - 1] * (NRANKS - 1)
    all_reduce_on_all(small, 5000)
    destroy(small)
    destroy(comms)
    print("PASS shrink: rank 3 excluded, the other three keep working")

    handles = ffi.new("ncclComm_t[]", NRANKS)
    nccl.check(lib.ncclCommInitAll(handles, NRANKS, ffi.new("int[]", [0] * NRANKS)))
    comms = [handles[k] for k in range(NRANKS)]
    all_reduce_on_all(comms, 4097)
    destroy(comms)
    print("PASS init_all: ncclCommInitAll with every rank on GPU 0")

    comms = init_in_group(new_config(blocking=0))
    deadline = time.monotonic() + 60
    state = ffi.new("ncclResult_t*")
    for comm in comms:
        while True:
            nccl.check(lib.ncclCommGetAsyncError(comm, state))
            if state[0] != 7:
                break
            assert time.monotonic() < deadline, "non-blocking init never finished"
            time.sleep(0.001)
        assert state[0] == 0, f"non-blocking init failed: {state[0]}"
    all_reduce_on_all(comms, 777)
    print("PASS nonblocking: ncclInProgress, then success through ncclCommGetAsyncError")

    # A non-blocking split, rank 3 without a color: as in NCCL, each parent reports ncclInProgress
    # until its child is made, so a caller that waits on the parent (PyTorch) finds the child ready.
    children = ffi.new("ncclComm_t[]", NRANKS)
    nccl.check(lib.ncclGroupStart())
    for k, comm in enumerate(comms):
        color = -1 if k == NRANKS - 1 else 0  # NCCL_SPLIT_NOCOLOR
        assert lib.ncclCommSplit(comm, color, k, children + k, new_config(blocking=0)) in (0, 7)
    assert lib.ncclGroupEnd() in (0, 7), nccl.last_error()
    for comm in comms:
        while True:
            nccl.check(lib.ncclCommGetAsyncError(comm, state))
            if state[0] != 7:
                break
            assert time.monotonic() < deadline + 60, "the non-blocking split never finished"
            time.sleep(0.001)
        assert state[0] == 0, f"non-blocking split failed: {state[0]}"
    assert children[NRANKS - 1] == ffi.NULL
    split = [children[k] for k in range(NRANKS - 1)]
    assert [nccl.comm_user_rank(c) for c in split] == list(range(NRANKS - 1))  # ready, no waiting
    all_reduce_on_all(split, 3001)
    destroy(split)
    destroy(comms)
    print("PASS nonblocking_split: parents in progress until their children are made")


if __name__ == "__main__":
    main()
