"""One rank of the fake-host tests (tests/test_hierarchical_gpu.py): what the collective suites do not
cover on a communicator over several hosts. The launcher's --fake-hosts gives each rank its host.

  refused      MSCCLPP_NCCL_FALLBACK=0: init fails, naming the hosts, as before the fallback existed
  nonblocking  a non-blocking init, polled through ncclCommGetAsyncError as PyTorch does, then a call
  per_host     ncclCommSplit by host gives native communicators of one host; both levels stay exact
  mixed_group  one group with an all_reduce, an all_gather and a ring of send/recv across hosts
  shrink       ncclCommShrink excluding the last rank: the others' new communicator (its hosts now
               unequal, so it decides its path again) is exact, and the parent stays usable
  window_pointers  the teams, and a window's peer pointers, which reach the ranks of this host alone
"""

from __future__ import annotations

import os
import sys
import time
import zlib

import cupy as cp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from allreduce_worker import Rank
from window_worker import check_teams, check_window_pointers

from mscclpp_nccl.binding import ffi, new_config
from mscclpp_nccl.communicator import Communicator, world_from_env
from mscclpp_nccl.gpus import local_device

IN_PROGRESS = 7  # ncclInProgress


def host_of() -> str:
    """This rank's fake host, from the variable the launcher set (the same on every rank of a host)."""
    return os.environ["MSCCLPP_NCCL_HOST_ID"]


def sum_check(comm: Communicator, stream: cp.cuda.Stream, count: int) -> None:
    """all_reduce of rank-dependent integers in float32 (exact), against the host's sum."""
    data = cp.arange(count, dtype=cp.float32) + comm.rank
    comm.all_reduce(data, op="sum", stream=stream)
    stream.synchronize()
    expected = np.arange(count, dtype=np.float64) * comm.size + sum(range(comm.size))
    np.testing.assert_array_equal(cp.asnumpy(data).astype(np.float64), expected)


def scenario_refused() -> None:
    rank, size, uid = world_from_env()
    try:
        Communicator(size, rank, uid, device=local_device())
    except Exception as e:  # the binding raises on a failed init
        text = str(e)
        assert "host" in text, f"the init error does not say why: {text}"
        print(f"PASS refused: {text.splitlines()[0][:160]}")
        return
    raise AssertionError("init over several hosts succeeded with MSCCLPP_NCCL_FALLBACK=0")


def scenario_nonblocking(r: Rank) -> None:
    """A second communicator, its unique id drawn by rank 0 and passed over the first."""
    nccl = r.nccl
    raw = np.zeros(128, dtype=np.uint8)
    if r.rank == 0:
        made = ffi.new("ncclUniqueId*")
        nccl.check(nccl.lib.ncclGetUniqueId(made))
        raw[:] = np.frombuffer(ffi.buffer(made), dtype=np.uint8)
    shared = cp.asarray(raw)
    r.comm.all_reduce(shared, op="sum", stream=r.stream)  # zeros elsewhere: rank 0's id everywhere
    r.stream.synchronize()
    uid = ffi.new("ncclUniqueId*")
    ffi.buffer(uid)[:] = cp.asnumpy(shared).tobytes()
    config = new_config(blocking=0)
    handle = ffi.new("ncclComm_t*")
    started = nccl.lib.ncclCommInitRankConfig(handle, r.size, uid[0], r.rank, config)
    assert started in (0, IN_PROGRESS), f"non-blocking init returned {started}"
    comm = handle[0]
    deadline = time.monotonic() + 60
    state = ffi.new("ncclResult_t*")
    while True:
        nccl.check(nccl.lib.ncclCommGetAsyncError(comm, state))
        if state[0] != IN_PROGRESS:
            break
        assert time.monotonic() < deadline, "non-blocking init never finished"
        time.sleep(0.01)
    assert state[0] == 0, f"non-blocking init ended with {state[0]}"
    wrapped = Communicator._wrap(nccl, comm, 0)
    sum_check(wrapped, r.stream, 70001)
    wrapped.destroy()
    print("PASS nonblocking")


def scenario_per_host(r: Rank) -> None:
    color = sum(ord(c) for c in host_of()) % 1000
    local = r.comm.split(color, r.rank)
    assert local is not None
    sum_check(local, r.stream, 300007)
    sum_check(r.comm, r.stream, 300007)
    local.destroy()
    print(f"PASS per_host: host communicator of {local.size} ranks")


def scenario_mixed_group(r: Rank) -> None:
    lib, c, s = r.nccl.lib, r.comm.handle, ffi.cast("void*", r.stream.ptr)
    n, me = r.size, r.rank
    count = 4099
    red = cp.arange(count, dtype=cp.float32) * (me + 1)
    gathered = cp.zeros(count * n, dtype=cp.float32)
    mine = cp.full(count, me, dtype=cp.float32)
    sent = cp.full(count, 100 + me, dtype=cp.float32)
    got = cp.zeros(count, dtype=cp.float32)

    def p(a: cp.ndarray) -> object:
        return ffi.cast("void*", a.data.ptr)

    r.nccl.check(lib.ncclGroupStart())
    r.nccl.check(lib.ncclAllReduce(p(red), p(red), count, 7, 0, c, s))
    r.nccl.check(lib.ncclAllGather(p(mine), p(gathered), count, 7, c, s))
    r.nccl.check(lib.ncclSend(p(sent), count, 7, (me + 1) % n, c, s))
    r.nccl.check(lib.ncclRecv(p(got), count, 7, (me - 1) % n, c, s))
    r.nccl.check(lib.ncclGroupEnd())
    r.stream.synchronize()
    factor = sum(range(1, n + 1))
    np.testing.assert_array_equal(cp.asnumpy(red), np.arange(count, dtype=np.float32) * factor)
    np.testing.assert_array_equal(cp.asnumpy(gathered), np.repeat(np.arange(n, dtype=np.float32), count))
    np.testing.assert_array_equal(cp.asnumpy(got), np.full(count, 100 + (me - 1) % n, dtype=np.float32))
    print("PASS mixed_group")


def scenario_shrink(r: Rank) -> None:
    last = r.size - 1
    if r.rank != last:
        excluded = ffi.new("int[]", [last])
        new = ffi.new("ncclComm_t*")
        r.nccl.check(r.nccl.lib.ncclCommShrink(r.comm.handle, excluded, 1, new, ffi.NULL, 0), r.comm.handle)
        shrunk = Communicator._wrap(r.comm._nccl, new[0], 0)
        assert (shrunk.rank, shrunk.size) == (r.rank, r.size - 1), (shrunk.rank, shrunk.size)
        sum_check(shrunk, r.stream, 300007)
        shrunk.destroy()
    sum_check(r.comm, r.stream, 4099)  # every rank, the excluded one too: the parent is intact
    print(f"PASS shrink: rank {last} excluded")


def scenario_window_pointers(r: Rank) -> None:
    mine = cp.full(1, zlib.crc32(host_of().encode()), dtype=cp.int64)
    hosts = cp.zeros(r.size, dtype=cp.int64)
    r.comm.all_gather(mine, hosts, stream=r.stream)
    r.stream.synchronize()
    every = cp.asnumpy(hosts)
    by_host = {h: [k for k in range(r.size) if every[k] == h] for h in set(every.tolist())}
    # NCCL's teams are strided runs: a host is the load/store team where every host holds as many
    # consecutive ranks; else each rank is its own team.
    regular = len({len(ranks) for ranks in by_host.values()}) == 1 and all(
        ranks[-1] - ranks[0] + 1 == len(ranks) for ranks in by_host.values()
    )
    team = by_host[every[r.rank]] if regular else [r.rank]
    check_teams(r, team)
    check_window_pointers(r, team)
    print(f"PASS window_pointers: {len(team)} of {r.size} ranks reached")


def main() -> None:
    names = sys.argv[1:]
    standalone = {"refused": scenario_refused}
    with_rank = {
        "nonblocking": scenario_nonblocking,
        "per_host": scenario_per_host,
        "mixed_group": scenario_mixed_group,
        "shrink": scenario_shrink,
        "window_pointers": scenario_window_pointers,
    }
    for name in names:
        if name in standalone:
            standalone[name]()
    rest = [name for name in names if name in with_rank]
    if rest:
        r = Rank()
        for name in rest:
            with_rank[name](r)
        r.comm.destroy()


if __name__ == "__main__":
    main()
