"""One rank of the one-sided GPU test; run N of them with `python -m mscclpp_nccl.run -n N --mps`.

Every rank registers a symmetric window of N slots, from ncclMemAlloc or CuPy. Then:

- ring      each rank puts its slot into the next rank's window (ncclPutSignal) and waits for the
            previous rank's signal (ncclWaitSignal); the slot that arrived is checked against NumPy.
- all       each rank puts a slot into every rank's window, itself included, then waits for one signal
            from each; the whole window is checked.
- signals   ncclSignal alone, three rounds: waits count signals cumulatively.
- refused   sigIdx, ctx and flags other than 0, a window past its end, and a call inside CUDA graph
            capture are errors.

Prints `PASS one_sided`; any failure raises (non-zero exit).
"""

from __future__ import annotations

import sys

import cupy as cp
import numpy as np

from mscclpp_nccl.binding import NcclError, dtype_code, ffi
from mscclpp_nccl.communicator import Communicator, world_from_env
from mscclpp_nccl.gpus import local_device

NCCL_WIN_COLL_SYMMETRIC = 0x01
SLOT = 1 << 16  # float32 elements of one rank's slot


def slot_values(source: int, target: int, round_: int) -> np.ndarray:
    return (np.arange(SLOT, dtype=np.float32) % 97 + 1000 * source + 10 * target + round_).astype(np.float32)


class OneSided:
    def __init__(self, comm: Communicator, memalloc: bool) -> None:
        self.comm, self.nccl, self.lib = comm, comm._nccl, comm._nccl.lib
        self.stream = cp.cuda.Stream(non_blocking=True)
        nbytes = comm.size * SLOT * 4
        if memalloc:
            out = ffi.new("void**")
            self.nccl.check(self.lib.ncclMemAlloc(out, nbytes))
            ptr = int(ffi.cast("uintptr_t", out[0]))
            self.window = cp.ndarray(
                (comm.size * SLOT,),
                cp.float32,
                cp.cuda.MemoryPointer(cp.cuda.UnownedMemory(ptr, nbytes, self), 0),
            )
            self.alloc = out[0]
        else:
            self.window = cp.zeros(comm.size * SLOT, dtype=cp.float32)
            self.alloc = None
        self.window.fill(0)
        cp.cuda.runtime.deviceSynchronize()
        self.handle = ffi.new("ncclWindow_t*")
        self.nccl.check(
            self.lib.ncclCommWindowRegister(
                comm.handle,
                ffi.cast("void*", self.window.data.ptr),
                nbytes,
                self.handle,
                NCCL_WIN_COLL_SYMMETRIC,
            ),
            comm.handle,
        )

    def put(self, data: cp.ndarray, peer: int, slot: int, sig_idx: int = 0) -> int:
        return self.lib.ncclPutSignal(
            ffi.cast("void*", data.data.ptr), data.size, dtype_code("float32"), peer, self.handle[0],
            slot * SLOT * 4, sig_idx, 0, 0, self.comm.handle, ffi.cast("void*", self.stream.ptr),
        )  # fmt: skip

    def wait(self, counts: dict[int, int]) -> None:
        descs = ffi.new("ncclWaitSignalDesc_t[]", len(counts))
        for i, (peer, n) in enumerate(counts.items()):
            descs[i].opCnt, descs[i].peer, descs[i].sigIdx, descs[i].ctx = n, peer, 0, 0
        stream = ffi.cast("void*", self.stream.ptr)
        self.nccl.check(
            self.lib.ncclWaitSignal(len(counts), descs, self.comm.handle, stream), self.comm.handle
        )

    def signal(self, peer: int) -> int:
        return self.lib.ncclSignal(peer, 0, 0, 0, self.comm.handle, ffi.cast("void*", self.stream.ptr))

    def close(self) -> None:
        self.nccl.check(self.lib.ncclCommWindowDeregister(self.comm.handle, self.handle[0]), self.comm.handle)
        if self.alloc is not None:
            self.nccl.check(self.lib.ncclMemFree(self.alloc))


def ring(w: OneSided, round_: int) -> None:
    rank, size = w.comm.rank, w.comm.size
    nxt, prev = (rank + 1) % size, (rank - 1) % size
    mine = cp.asarray(slot_values(rank, nxt, round_))
    w.nccl.check(w.put(mine, nxt, rank), w.comm.handle)
    w.wait({prev: 1})
    w.stream.synchronize()
    got = cp.asnumpy(w.window[prev * SLOT : (prev + 1) * SLOT])
    assert np.array_equal(got, slot_values(prev, rank, round_)), f"ring round {round_}: slot of {prev} wrong"


def to_all(w: OneSided, round_: int) -> None:
    rank, size = w.comm.rank, w.comm.size
    sources = [cp.asarray(slot_values(rank, peer, round_)) for peer in range(size)]
    for peer in range(size):
        w.nccl.check(w.put(sources[peer], peer, rank), w.comm.handle)
    w.wait({peer: 1 for peer in range(size)})
    w.stream.synchronize()
    got = cp.asnumpy(w.window).reshape(size, SLOT)
    for source in range(size):
        assert np.array_equal(got[source], slot_values(source, rank, round_)), f"slot of {source} wrong"


def signals(w: OneSided) -> None:
    rank, size = w.comm.rank, w.comm.size
    for round_ in range(3):
        for _ in range(round_ + 1):
            w.nccl.check(w.signal((rank + 1) % size), w.comm.handle)
        w.wait({(rank - 1) % size: round_ + 1})
    w.stream.synchronize()


def expect_error(result: int, w: OneSided, words: str) -> None:
    try:
        w.nccl.check(result, w.comm.handle)
    except NcclError as e:
        assert words in str(e), e
    else:
        raise AssertionError(f"accepted; expected an error naming {words!r}")


def refused(w: OneSided) -> None:
    data = cp.ones(SLOT, dtype=cp.float32)
    peer = (w.comm.rank + 1) % w.comm.size
    expect_error(w.put(data, peer, 0, sig_idx=1), w, "must be 0")
    expect_error(w.put(data, peer, w.comm.size), w, "smallest rank's window")
    graph_stream = cp.cuda.Stream(non_blocking=True)
    graph_stream.begin_capture()
    result = w.lib.ncclSignal(peer, 0, 0, 0, w.comm.handle, ffi.cast("void*", graph_stream.ptr))
    graph_stream.end_capture()
    expect_error(result, w, "capture")


def main() -> int:
    rank, size, uid = world_from_env()
    comm = Communicator(size, rank, uid, device=local_device())
    for memalloc in (True, False):
        w = OneSided(comm, memalloc)
        comm.barrier()
        for round_ in range(2):
            ring(w, round_)
            comm.barrier()  # nobody overwrites a slot before its owner has checked it
            to_all(w, round_)
            comm.barrier()
        signals(w)
        w.close()
    refused(OneSided(comm, memalloc=False))
    comm.barrier()
    comm.destroy()
    print("PASS one_sided", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
