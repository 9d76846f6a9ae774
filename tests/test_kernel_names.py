"""CPU test of the kernels' names, which are what profilers (Nsight Systems) show for each launch: every
kernel's symbol says its collective, its algorithm and its element type, also where one body serves
several collectives (the exchange kernels, through native/algorithms/collective_names.cuh)."""

from __future__ import annotations

import re
import shutil
import subprocess

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
        "exchangeChunkedKernel<mscclpp_nccl::AllGather,",
    ],
    "reduce_scatter": [
        "exchangePacketKernel<mscclpp_nccl::ReduceScatter, float, mscclpp_nccl::OpSum, true, false>",
        "exchangeChunkedKernel<mscclpp_nccl::ReduceScatter, __nv_bfloat16, mscclpp_nccl::OpSum, true>",
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
    "gather": ["exchangeChunkedKernel<mscclpp_nccl::Gather,"],
    "scatter": ["exchangeChunkedKernel<mscclpp_nccl::Scatter,"],
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
    """A kernel that serves several collectives takes one of the names of collective_names.cuh."""
    names = ("AllGather", "ReduceScatter", "AlltoAll", "Broadcast", "Reduce", "Gather", "Scatter")
    for kernel in kernels:
        if kernel.startswith("exchange"):
            assert any(f"<mscclpp_nccl::{n}," in kernel for n in names), kernel
        elif kernel.startswith("twoShotPacket"):  # all_reduce and reduce
            assert kernel.startswith(
                ("twoShotPacketKernel<mscclpp_nccl::AllReduce,", "twoShotPacketKernel<mscclpp_nccl::Reduce,")
            ), kernel
        else:
            assert kernel.startswith(("allReduce", "sendRecv")), (
                f"{kernel}: its name does not say its collective"
            )
