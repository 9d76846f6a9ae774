"""User-level PyTorch applications on our libnccl.so.2 (through LD_PRELOAD), each checked against the
same model on one device without communication: FSDP2 in fp32 and bf16 mixed precision, DDP, tensor
parallelism and a pipeline over batch_isend_irecv, and these composed on 2-D DeviceMeshes (workers in
tests/apps/).

N ranks share the GPU under MPS. Every rank prints `RESULT <app> <variant> nranks=N <differences>`
(run pytest with -rP to see them) and `PASS <item>`; the test asserts that every rank passed every item.
The 12 tests of test_app take about 4 minutes on one H200 (15-25 s each, mostly starting the ranks);
test_mesh_app runs 6 items in one launch at 4 and at 8 ranks.

Control runs on a stock NCCL instead of ours: MSCCLPP_NCCL_APPS_CONTROL=torch (PyTorch's own, no
LD_PRELOAD; it refuses several ranks on one GPU before 2.30) or =/path/to/libnccl.so.2 (preloaded); both
get NCCL_MULTI_RANK_GPU_ENABLE=1 and NCCL_MAX_CTAS capped, which stock NCCL needs for ranks sharing a GPU.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

import pytest
from multirank import wait_for_device

TESTS = Path(__file__).resolve().parent
APPS_DIR = TESTS / "apps"
_spec = importlib.util.spec_from_file_location("mscclpp_clients_common", TESTS / "clients" / "common.py")
assert _spec is not None and _spec.loader is not None
common = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(common)

# The workers are PyTorch programs; between launches, wait_for_device probes the GPU with CuPy.
pytestmark = pytest.mark.requires("torch", "cupy")

CONTROL_ENV = "MSCCLPP_NCCL_APPS_CONTROL"
LAUNCH_TIMEOUT = 150.0  # the whole launch: a hang costs at most this (plus 30 s for the launcher's own end)
STEP_TIMEOUT = 90.0  # each step in a worker

# app -> (worker, its items in the order they run); the items are the workers' ITEMS keys.
APPS = {
    "fsdp2": ("fsdp2_worker.py", ("fsdp2_fp32", "fsdp2_bf16")),
    "ddp": ("ddp_worker.py", ("ddp_fp32",)),
    "tp": ("tp_worker.py", ("tp_fp32",)),
    "pipeline": ("pipeline_worker.py", ("pipeline_fp32",)),
    "allocator_default": ("allocator_worker.py", ("allocator_default",)),
    "allocator_expandable": ("allocator_worker.py", ("allocator_expandable",)),
    "composed": (
        "composed_worker.py",
        ("fsdp2_tp_4x2", "fsdp2_tp_2x4", "hsdp_2d", "fsdp2_no_reshard", "pipeline_dp", "moe_all_to_all"),
    ),
}
# Apps on 2-D meshes (an even number of ranks, 4 or more): they run at 4 and 8 ranks (test_mesh_app).
MESH_APPS = ("composed",)
# Apps that their own tests run.
OWN_TEST_APPS = ("allocator_default", "allocator_expandable")
# The whole launch of an app that runs more items than LAUNCH_TIMEOUT allows for.
LAUNCH_TIMEOUTS = {"composed": 300.0}
_RESULT_LINE = re.compile(r"^\[(\d+)\] RESULT (\S+) (\S+) nranks=(\d+)")


def torch_missing() -> bool:
    return importlib.util.find_spec("torch") is None


def launch_app(
    nranks: int,
    worker: Path,
    args: list[str],
    lib: Path | None,
    extra_env: dict[str, str],
    launcher_args: list[str] | None = None,
    launch_timeout: float = LAUNCH_TIMEOUT,
) -> tuple[int, str]:
    """The launcher's `-n N --mps` with `env LD_PRELOAD=<lib>` in the ranks only, as common.launch_client
    does, but with no preload when `lib` is None and leaving MSCCLPP_NCCL_WAIT_TIMEOUT to the library;
    the whole launch is bounded by `launch_timeout`. Returns (exit code, output)."""
    env = dict(os.environ)
    env["MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT"] = "60"
    env.setdefault("NCCL_NVLS_ENABLE", "0")
    env.setdefault("PYTHONUNBUFFERED", "1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(common.ROOT), env.get("PYTHONPATH", "")) if p)
    env.update(extra_env)
    rank_cmd = [sys.executable, str(worker), *args]
    if lib is not None:
        env[common.EXPECT_LIB_ENV] = str(lib)
        rank_cmd = ["env", f"LD_PRELOAD={common.preload_value(lib, env)}", *rank_cmd]
    cmd = [sys.executable, "-m", "mscclpp_nccl.run", "-n", str(nranks), "--mps", *(launcher_args or [])]
    cmd += ["--timeout", f"{launch_timeout:g}", "--", *rank_cmd]
    return common.run_launcher(cmd, env, launch_timeout + 30)


def control_env(nranks: int) -> dict[str, str]:
    """What a stock NCCL needs when ranks share a GPU: opting in (2.30+), and few enough CTAs per kernel
    that every rank's kernels are resident together (4 ranks hang without the cap)."""
    from mscclpp_nccl.run import visible_gpus

    per_gpu = -(-nranks // max(1, len(visible_gpus())))
    env = {"NCCL_MULTI_RANK_GPU_ENABLE": "1"}
    if "NCCL_MAX_CTAS" not in os.environ:
        env["NCCL_MAX_CTAS"] = str(max(1, 32 // per_gpu))
    return env


@pytest.mark.gpu
@pytest.mark.skipif(torch_missing(), reason="PyTorch is not installed")
@pytest.mark.parametrize("nranks", [2, 4, 8])
@pytest.mark.parametrize("app", [a for a in APPS if a not in MESH_APPS + OWN_TEST_APPS])
def test_app(app: str, nranks: int, request: pytest.FixtureRequest) -> None:
    run_app(app, nranks, request)


# Parallelisms composed on a DeviceMesh (tests/apps/composed_worker.py): FSDP2 x tensor parallelism on
# (N/2, 2) and (2, N/2), HSDP, FSDP2 without resharding, a pipeline of FSDP2 stages and a mixture of
# experts over all_to_all_single. Every process holds a communicator per mesh dimension beside the world.
@pytest.mark.gpu
@pytest.mark.skipif(torch_missing(), reason="PyTorch is not installed")
@pytest.mark.parametrize("nranks", [4, 8])
@pytest.mark.parametrize("app", MESH_APPS)
def test_mesh_app(app: str, nranks: int, request: pytest.FixtureRequest) -> None:
    run_app(app, nranks, request)


# PyTorch's expandable segments are cuMem memory, which the library maps through file descriptors (a
# tensor over several of the segment's allocations as one run): a 64 MB bf16 all_reduce on them must cost
# no more than 10% over the default (cudaMalloc) allocator's.
@pytest.mark.gpu
@pytest.mark.skipif(torch_missing(), reason="PyTorch is not installed")
def test_expandable_segments_all_reduce(request: pytest.FixtureRequest) -> None:
    medians = {}
    for variant, conf in (("default", ""), ("expandable", "expandable_segments:True")):
        output = run_app(f"allocator_{variant}", 4, request, extra_env={"PYTORCH_CUDA_ALLOC_CONF": conf})
        pattern = rf"RESULT allocator {variant} nranks=4 median_us=(\S+)"
        times = [float(m) for m in re.findall(pattern, output)]
        assert len(times) == 4, output[-3000:]
        medians[variant] = sorted(times)[len(times) // 2]
    print(f"64 MB bf16 all_reduce, 4 ranks, median per call: {medians}")
    assert medians["expandable"] <= 1.1 * medians["default"], medians


# The hierarchical path (native/fallback/DESIGN.md) under PyTorch, which loads its own NCCL beside ours and
# our private stock copy: DDP over one GPU cut into fake hosts (the launcher's --fake-hosts).
@pytest.mark.gpu
@pytest.mark.skipif(torch_missing(), reason="PyTorch is not installed")
@pytest.mark.skipif(
    not os.environ.get("MSCCLPP_NCCL_FALLBACK_LIB"),
    reason="MSCCLPP_NCCL_FALLBACK_LIB names no stock NCCL (2.30+ takes ranks sharing a GPU)",
)
@pytest.mark.parametrize("nranks,hosts", [(4, "2"), (8, "2"), (8, "4")])
def test_ddp_over_fake_hosts(nranks: int, hosts: str, request: pytest.FixtureRequest) -> None:
    wait_for_device()
    output = run_app("ddp", nranks, request, ["--fake-hosts", hosts], {"NCCL_DEBUG": "INFO"})
    paths = [ln for ln in output.splitlines() if "hierarchical path" in ln]
    assert len(paths) >= nranks, f"{len(paths)} of {nranks} ranks went hierarchical\n{common.tail(output)}"


def run_app(
    app: str,
    nranks: int,
    request: pytest.FixtureRequest,
    launcher_args: list[str] | None = None,
    extra_env: dict[str, str] | None = None,
) -> str:
    worker, items = APPS[app]
    args = [*items, "--timeout", f"{STEP_TIMEOUT:g}"]
    launch_timeout = LAUNCH_TIMEOUTS.get(app, LAUNCH_TIMEOUT)
    control = os.environ.get(CONTROL_ENV, "").strip()
    if control:
        lib = None if control == "torch" else Path(control).resolve()
        env = {**control_env(nranks), **(extra_env or {})}
        rc, output = launch_app(nranks, APPS_DIR / worker, args, lib, env, launcher_args, launch_timeout)
        steps = ["init", *items, "destroy"]
    else:
        lib = request.getfixturevalue("nccl_lib").resolve()
        rc, output = launch_app(
            nranks,
            APPS_DIR / worker,
            ["--library", *args],
            lib,
            extra_env or {},
            launcher_args,
            launch_timeout,
        )
        steps = ["init", "library", *items, "destroy"]
    results = [ln for ln in output.splitlines() if _RESULT_LINE.match(ln)]
    print("\n".join(results))  # shown with -rP: the differences each rank measured
    common.assert_all_passed(output, rc, nranks, steps)

    seen: dict[str, set[int]] = {}
    for line in results:
        m = _RESULT_LINE.match(line)
        assert m is not None
        assert int(m.group(4)) == nranks, f"a rank reports another world size: {line}"
        seen.setdefault(f"{m.group(2)}_{m.group(3)}", set()).add(int(m.group(1)))
    expected = {item: set(range(nranks)) for item in items}
    assert seen == expected, (
        f"RESULT lines by item and rank: {seen}, expected {expected}\n{common.tail(output)}"
    )
    return output


@pytest.mark.gpu
@pytest.mark.skipif(torch_missing(), reason="PyTorch is not installed")
@pytest.mark.parametrize("nranks", [2, 4])
@pytest.mark.parametrize("handling", ["0", "2"])
def test_peer_death_then_destroy_process_group(
    handling: str, nranks: int, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    """The last rank is killed with all-reduces queued: every survivor's training loop gets an error (from
    PyTorch's watchdog with TORCH_NCCL_ASYNC_ERROR_HANDLING=2, from the next call with =0), and
    dist.destroy_process_group() ends promptly, as does the process (tests/apps/peer_death_worker.py)."""
    wait_for_device()  # the previous test may have killed a rank
    lib = request.getfixturevalue("nccl_lib").resolve()
    env = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": handling, "MSCCLPP_NCCL_WAIT_TIMEOUT": "0"}
    rc, output = launch_app(nranks, APPS_DIR / "peer_death_worker.py", [str(tmp_path)], lib, env)
    print("\n".join(ln for ln in output.splitlines() if "RESULT" in ln))
    assert rc == 0, common.tail(output)
    assert "victim: killed as planned" in output, common.tail(output)
    passes = output.count("PASS peer_death")
    assert passes == nranks - 1, f"{passes} of {nranks - 1} survivors passed\n{common.tail(output)}"


@pytest.mark.gpu
@pytest.mark.skipif(torch_missing(), reason="PyTorch is not installed")
@pytest.mark.skipif(
    not os.environ.get("MSCCLPP_NCCL_FALLBACK_LIB"),
    reason="MSCCLPP_NCCL_FALLBACK_LIB names no stock NCCL (2.30+ takes ranks sharing a GPU)",
)
def test_peer_death_over_fake_hosts(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """As test_peer_death_then_destroy_process_group, on 2 fake hosts of 2: stock's kernels wait too."""
    wait_for_device()
    lib = request.getfixturevalue("nccl_lib").resolve()
    env = {"TORCH_NCCL_ASYNC_ERROR_HANDLING": "2", "MSCCLPP_NCCL_WAIT_TIMEOUT": "0"}
    worker = APPS_DIR / "peer_death_worker.py"
    rc, output = launch_app(4, worker, [str(tmp_path)], lib, env, ["--fake-hosts", "2"])
    assert rc == 0, common.tail(output)
    assert "victim: killed as planned" in output, common.tail(output)
    passes = output.count("PASS peer_death")
    assert passes == 3, f"{passes} of 3 survivors passed\n{common.tail(output)}"
