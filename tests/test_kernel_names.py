"""CPU test of the kernels' names, which are what profilers (Nsight Systems) show for each launch: every
kernel's symbol says its algorithm and its element type, and its collective wherever its code depends on
the collective (the packet exchange and two-shot kernels, through native/algorithms/collective_names.cuh).
The chunked and zero-copy exchanges run the same code for every collective they serve, so each is
compiled once and says whether it reduces; the call's NVTX range names the collective."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections import Counter

import pytest
import stock_nccl

# collective -> the kernel symbols (demangled, up to the template arguments) that must exist for it.
EXPECTED = {
    "all_reduce": [
        "allReduceOneShotPacketKernel<float, mscclpp_nccl::OpSum>",
        "twoShotPacketKernel<mscclpp_nccl::AllReduce, __nv_bfloat16, mscclpp_nccl::OpSum>",
        "allReduceTwoShotChunkedKernel<__half, mscclpp_nccl::OpMax>",
        "allReduceZeroCopyKernel<float, mscclpp_nccl::OpSum>",
    ],
    "all_gather": [
        "exchangePacketKernel<mscclpp_nccl::AllGather, unsigned int,",
        "exchangeChunkedKernel<unsigned int, mscclpp_nccl::OpSum, false>",
        "exchangeMappedKernel<unsigned short, mscclpp_nccl::OpSum, false>",
    ],
    "reduce_scatter": [
        "exchangePacketKernel<mscclpp_nccl::ReduceScatter, float, mscclpp_nccl::OpSum, true, false>",
        "exchangeChunkedKernel<__nv_bfloat16, mscclpp_nccl::OpSum, true>",
        "exchangeMappedKernel<float, mscclpp_nccl::OpMax, true>",
    ],
    "alltoall": ["exchangePacketKernel<mscclpp_nccl::AlltoAll,"],
    "broadcast": [
        "exchangePacketKernel<mscclpp_nccl::Broadcast, unsigned short, mscclpp_nccl::OpSum, false, true>",
        "exchangePacketKernel<mscclpp_nccl::Broadcast, unsigned short, mscclpp_nccl::OpSum, false, false>",
    ],
    "reduce": [
        # the root's kernel and the others' (exchange_packet.cu), and the two-shot schedule's
        "exchangePacketKernel<mscclpp_nccl::Reduce, double, mscclpp_nccl::OpProd, true, true>",
        "exchangePacketKernel<mscclpp_nccl::Reduce, double, mscclpp_nccl::OpProd, true, false>",
        "twoShotPacketKernel<mscclpp_nccl::Reduce, double, mscclpp_nccl::OpProd>",
    ],
    "gather": ["exchangePacketKernel<mscclpp_nccl::Gather,"],
    "scatter": ["exchangePacketKernel<mscclpp_nccl::Scatter,"],
    "sendrecv": ["sendRecvPacketKernel<", "sendRecvChunkedKernel<"],
}


@pytest.fixture(scope="module")
def kernels() -> list[str]:
    if shutil.which("nm") is None:
        pytest.skip("nm (binutils) is not installed")
    ours, why = stock_nccl.our_lib()
    if ours is None:
        pytest.skip(why)
    out = subprocess.run(["nm", "-C", str(ours)], check=True, capture_output=True, text=True).stdout
    # Host-side launch stubs carry the kernels' names: `void mscclpp_nccl::(anon...)::K<...>(...)`.
    found = re.findall(r"::(\w+Kernel<[^(]*>)\(", out)
    return [k for k in found if not k.startswith("launchKernel<")]  # the host launcher, not a kernel


@pytest.mark.parametrize("collective", list(EXPECTED))
def test_each_collective_has_named_kernels(kernels: list[str], collective: str) -> None:
    for prefix in EXPECTED[collective]:
        assert any(k.startswith(prefix) for k in kernels), (
            f"no kernel named {prefix}...: {sorted(set(kernels))[:20]}"
        )


def test_no_kernel_hides_its_collective(kernels: list[str]) -> None:
    """A kernel whose code depends on the collective takes one of the names of collective_names.cuh; one
    whose code does not says whether it reduces (its last template argument)."""
    names = ("AllGather", "ReduceScatter", "AlltoAll", "Broadcast", "Reduce", "Gather", "Scatter")
    for kernel in kernels:
        if kernel.startswith("exchangePacket"):
            assert any(f"<mscclpp_nccl::{n}," in kernel for n in names), kernel
        elif kernel.startswith(("exchangeChunked", "exchangeMapped")):
            assert kernel.endswith((", true>", ", false>")), kernel
            assert not any(f"mscclpp_nccl::{n}," in kernel for n in names), f"{kernel}: compiled per name"
        elif kernel.startswith("twoShotPacket"):  # all_reduce and reduce
            assert kernel.startswith(
                ("twoShotPacketKernel<mscclpp_nccl::AllReduce,", "twoShotPacketKernel<mscclpp_nccl::Reduce,")
            ), kernel
        else:
            assert kernel.startswith(("allReduce", "sendRecv")), (
                f"{kernel}: its name does not say its collective"
            )


# NCCL's reduction element types and operators as symbols spell them, and the raw types of data movement.
REDUCE_TYPES = [
    "signed char",
    "unsigned char",
    "int",
    "unsigned int",
    "long",
    "unsigned long",
    "__half",
    "float",
    "double",
    "__nv_bfloat16",
    "__nv_fp8_e4m3",
    "__nv_fp8_e5m2",
]
OPS = [f"mscclpp_nccl::{op}" for op in ("OpSum", "OpProd", "OpMax", "OpMin")]
RAW_TYPES = ["unsigned char", "unsigned short", "unsigned int", "unsigned long"]
COPYING = ["AllGather", "AlltoAll", "Broadcast", "Gather", "Scatter"]
ROOTED = {"Broadcast", "Reduce", "Gather", "Scatter"}


def expected_instances() -> dict[str, set[str]]:
    """Every kernel instantiation a call can reach, by kernel: what the dispatch over type, operator and
    collective must find, whichever compile (type shard) holds it."""
    reductions = [f"{t}, {op}" for t in REDUCE_TYPES for op in OPS]
    named = {f"mscclpp_nccl::{n}, {r}, true" for n in ("ReduceScatter", "Reduce") for r in reductions}
    named |= {f"mscclpp_nccl::{n}, {t}, mscclpp_nccl::OpSum, false" for n in COPYING for t in RAW_TYPES}
    exchange = {f"{r}, true" for r in reductions} | {f"{t}, mscclpp_nccl::OpSum, false" for t in RAW_TYPES}
    packet = set()
    for args in named:
        name = args.split(",")[0].removeprefix("mscclpp_nccl::")
        packet |= {f"{args}, {root}" for root in (("true", "false") if name in ROOTED else ("false",))}
    return {
        "allReduceOneShotPacketKernel": set(reductions),
        "allReduceTwoShotChunkedKernel": set(reductions),
        "allReduceZeroCopyKernel": set(reductions),
        "allReduceMappedKernel": set(reductions),
        "twoShotPacketKernel": {
            f"mscclpp_nccl::{n}, {r}" for n in ("AllReduce", "Reduce") for r in reductions
        },
        "exchangeChunkedKernel": exchange,
        "exchangeMappedKernel": exchange,
        "exchangePacketKernel": packet,
        "sendRecvChunkedKernel": set(RAW_TYPES),
        "sendRecvPacketKernel": set(RAW_TYPES),
    }


def test_every_instantiation_exists_once(kernels: list[str]) -> None:
    """No call finds its kernel missing, and no kernel is compiled twice (by two type shards)."""
    found: dict[str, Counter[str]] = {}
    for kernel in kernels:
        name, _, args = kernel.partition("<")
        found.setdefault(name, Counter())[args.removesuffix(">")] += 1
    expected = expected_instances()
    assert set(found) == set(expected)
    for name, instances in expected.items():
        assert set(found[name]) == instances, (name, set(found[name]) ^ instances)
    # Each kernel has the same symbols (the host stub's and its launcher's); one built twice has more.
    counts = {n for counter in found.values() for n in counter.values()}
    assert len(counts) == 1, counts
