"""A collective's library calls as the benchmark and the tuner make them: nccl-tests' buffer shifts,
PreMulSum ops, aggregated groups and blocking, and the point-to-point forms of older libraries."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .collectives import OP_CODES, REDUCING, DType, Layout
from .data import premul_scalar, scalar_bits
from .process import BenchError
from .rank import Rank

# One library call: the function and its arguments.
Call = tuple[Callable[..., int], tuple[Any, ...]]


def symbol(lib: Any, name: str) -> Any:
    """lib's entry point `name`, or None where the library lacks it."""
    try:
        return getattr(lib, name)
    except AttributeError:
        return None


@dataclass(frozen=True)
class Issuer:
    """single(i): call i alone (warm-up, check); timed(i): timed iteration i, which is -m calls in one
    group when -m > 1 (calls i*m .. i*m+m-1). direct, where set, is the timed loop prepared: for each
    iteration, its library calls (function, arguments), to be made bare; check(rc) raises for a failed
    call's result."""

    single: Callable[[int], None]
    timed: Callable[[int], None]
    direct: list[list[Call]] | None
    check: Callable[[int], None]


def make_issuer(
    w: Rank, lay: Layout, dt: DType, op: str | None, root: int, in_place: bool, calls: int
) -> Issuer:
    """Enqueues the collective of call i, with the buffers shifted per call as nccl-tests does (so that
    successive calls touch different memory). Raises NcclError when a call fails."""
    assert w.send is not None and w.recv is not None
    ffi, lib, nccl, comm = w.ffi, w.lib, w.nccl, w.comm
    elt = dt.size
    total = lay.size
    steps = max(1, w.opts.max_bytes // total) if total else 1
    pointers = []
    for k in range(min(steps, max(calls, 1))):
        shift = total * k
        send, recv = w.send.ptr + shift, w.recv.ptr + shift
        if in_place:
            send = recv + lay.send_inplace * elt * w.rank
            recv = recv + lay.recv_inplace * elt * w.rank
        pointers.append((send, recv))
    npointers = len(pointers)

    def check(rc: int) -> None:
        if rc != 0:
            nccl.check(rc, comm)

    mulsum = op == "mulsum" and w.opts.collective in REDUCING
    scalar = ffi.new("uint64_t*", scalar_bits(dt, premul_scalar(w.rank))) if mulsum else None
    op_code = OP_CODES.get(op or "sum", 0)
    sequences = [collective_calls(w, lay.count, dt, op_code, root, s, r) for s, r in pointers]
    agg = w.opts.agg_iters
    blocking = w.opts.blocking

    def run(seq: Sequence[Call]) -> None:
        for fn, args in seq:
            check(fn(*args))

    def one(i: int) -> None:
        k = i % steps % npointers
        if not mulsum:
            run(sequences[k])
            return
        handle = ffi.new("ncclRedOp_t*")
        check(lib.ncclRedOpCreatePreMulSum(handle, scalar, dt.nccl, 1, comm))
        try:
            run(collective_calls(w, lay.count, dt, int(handle[0]), root, *pointers[k]))
        finally:
            lib.ncclRedOpDestroy(handle[0], comm)  # right after the call, as nccl-tests does

    def after() -> None:
        if blocking:
            w.wait("a blocking call (-z)")
            if blocking == 1:
                w.group.barrier()

    def single(i: int) -> None:
        one(i)
        after()

    def timed(i: int) -> None:
        if agg > 1:
            check(lib.ncclGroupStart())
            try:
                for a in range(agg):
                    one(i * agg + a)
            finally:
                check(lib.ncclGroupEnd())
        else:
            one(i)
        after()

    direct = None
    if not mulsum and agg == 1 and not blocking:
        # The timed loop is host wall time, so keep Python out of it: prepared calls, called bare.
        direct = [sequences[i % steps % npointers] for i in range(w.opts.iters)]
    return Issuer(single, timed, direct, check)


def collective_calls(w: Rank, count: int, dt: DType, op: int, root: int, send: int, recv: int) -> list[Call]:
    """The library calls (function, arguments) of one collective from send to recv."""
    ffi, lib, comm, st = w.ffi, w.lib, w.comm, w.stream_ptr
    coll, code, rank, nranks = w.opts.collective, dt.nccl, w.rank, w.nranks
    s, r = ffi.cast("void*", send), ffi.cast("void*", recv)
    if coll == "all_reduce":
        return [(lib.ncclAllReduce, (s, r, count, code, op, comm, st))]
    if coll == "all_gather":
        return [(lib.ncclAllGather, (s, r, count, code, comm, st))]
    if coll == "reduce_scatter":
        return [(lib.ncclReduceScatter, (s, r, count, code, op, comm, st))]
    if coll == "broadcast":
        return [(lib.ncclBroadcast, (s, r, count, code, root, comm, st))]
    if coll == "reduce":
        return [(lib.ncclReduce, (s, r, count, code, op, root, comm, st))]
    chunk = count * dt.size
    group: list[Call] = []
    if coll == "sendrecv":
        group += [(lib.ncclSend, (s, count, code, (rank + 1) % nranks, comm, st))]
        group += [(lib.ncclRecv, (r, count, code, (rank - 1) % nranks, comm, st))]
    elif coll == "alltoall":
        native = symbol(lib, "ncclAlltoAll") if w.version >= 22800 else None
        if native is not None:
            return [(native, (s, r, count, code, comm, st))]
        for peer in range(nranks):  # before 2.28, as nccl-tests: a send and a receive per peer
            group += [(lib.ncclSend, (ffi.cast("void*", send + peer * chunk), count, code, peer, comm, st))]
            group += [(lib.ncclRecv, (ffi.cast("void*", recv + peer * chunk), count, code, peer, comm, st))]
    elif coll in ("gather", "scatter"):
        if count == 0:
            return []  # nccl-tests skips empty gathers and scatters
        name = "ncclGather" if coll == "gather" else "ncclScatter"
        native = symbol(w.ext, name) if w.ext is not None and w.version >= 22800 else None
        if native is not None:
            x = w.ext_ffi
            xcomm = x.cast("void*", int(ffi.cast("uintptr_t", comm)))
            args = (x.cast("void*", send), x.cast("void*", recv), count, code, root, xcomm)
            return [(native, (*args, x.cast("void*", w.stream.ptr)))]
        if coll == "gather":  # before 2.28, as nccl-tests: everyone sends to the root
            group += [(lib.ncclSend, (s, count, code, root, comm, st))]
            if rank == root:
                for peer in range(nranks):
                    p = ffi.cast("void*", recv + peer * chunk)
                    group += [(lib.ncclRecv, (p, count, code, peer, comm, st))]
        else:
            if rank == root:
                for peer in range(nranks):
                    p = ffi.cast("void*", send + peer * chunk)
                    group += [(lib.ncclSend, (p, count, code, peer, comm, st))]
            group += [(lib.ncclRecv, (r, count, code, root, comm, st))]
    else:
        raise BenchError(f"unknown collective {coll}")
    return [(lib.ncclGroupStart, ()), *group, (lib.ncclGroupEnd, ())]
