"""The launcher with CPU-only child commands (no GPU needed)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from mscclpp_nccl.gpus import local_device
from mscclpp_nccl.run import MPS_QUEUE_POOL, assign_gpus, fake_host_names, mps_queues, rank_env, visible_gpus

KEYS = [
    "MSCCLPP_NCCL_RANK",
    "MSCCLPP_NCCL_WORLD_SIZE",
    "MSCCLPP_NCCL_LOCAL_RANK",
    "MSCCLPP_NCCL_UNIQUE_ID",
    "RANK",
    "WORLD_SIZE",
    "LOCAL_RANK",
    "LOCAL_WORLD_SIZE",
    "GROUP_RANK",
    "MSCCLPP_NCCL_DEVICE",
    "MSCCLPP_NCCL_HOST_ID",
    "MASTER_ADDR",
    "MASTER_PORT",
    "CUDA_VISIBLE_DEVICES",
    "NCCL_NVLS_ENABLE",
]
PRINT_ENV = f"import json, os; print(json.dumps({{k: os.environ.get(k) for k in {KEYS!r}}}))"


def launch(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    # No GPU unless a test names some: the launcher refuses more ranks than GPUs without --mps or
    # --share-gpus, and these commands need none.
    full_env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "mscclpp_nccl.run", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=full_env,
        check=False,
    )


def rank_envs(stdout: str) -> dict[int, dict[str, str | None]]:
    out = {}
    for line in stdout.splitlines():
        tag, _, rest = line.partition("] ")
        out[int(tag.lstrip("["))] = json.loads(rest)
    return out


def test_env_as_torchrun_sets_it() -> None:
    """One rank per GPU: CUDA_VISIBLE_DEVICES as the user gave it, and LOCAL_RANK is the device index, so
    that `torch.cuda.set_device(LOCAL_RANK)` works on every rank."""
    r = launch("-n", "2", "--", sys.executable, "-c", PRINT_ENV, env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert r.returncode == 0, r.stderr
    envs = rank_envs(r.stdout)
    assert sorted(envs) == [0, 1]
    for i, e in envs.items():
        assert e["CUDA_VISIBLE_DEVICES"] == "0,1"
        assert (
            e["RANK"] == e["LOCAL_RANK"] == e["MSCCLPP_NCCL_RANK"] == e["MSCCLPP_NCCL_LOCAL_RANK"] == str(i)
        )
        assert e["MSCCLPP_NCCL_DEVICE"] == str(i)
        assert e["WORLD_SIZE"] == e["LOCAL_WORLD_SIZE"] == e["MSCCLPP_NCCL_WORLD_SIZE"] == "2"
        assert e["GROUP_RANK"] == "0"
        assert e["MASTER_ADDR"] == "127.0.0.1"
        assert e["NCCL_NVLS_ENABLE"] == "0"
    assert len({e["MASTER_PORT"] for e in envs.values()}) == 1
    uids = {e["MSCCLPP_NCCL_UNIQUE_ID"] for e in envs.values()}
    assert len(uids) == 1  # the same id for every rank (absent only when the library is not built)
    uid = uids.pop()
    if uid is not None:
        assert len(bytes.fromhex(uid)) == 128


def test_sharing_gpus_is_refused_unless_asked() -> None:
    r = launch("-n", "3", "--", sys.executable, "-c", "print('ran')", env={"CUDA_VISIBLE_DEVICES": "0,1"})
    assert r.returncode == 2
    assert "3 ranks but 2 GPU(s) visible" in r.stderr and "--mps" in r.stderr and "--share-gpus" in r.stderr
    assert "ran" not in r.stdout


def test_shared_gpus_blocked_on_fake_gpus() -> None:
    """--gpus sets every rank's CUDA_VISIBLE_DEVICES; sharing ranks find their device in
    MSCCLPP_NCCL_DEVICE, consecutive ranks on one GPU."""
    r = launch("-n", "4", "--share-gpus", "--gpus", "0,1", "--", sys.executable, "-c", PRINT_ENV)
    assert r.returncode == 0, r.stderr
    envs = rank_envs(r.stdout)
    assert sorted(envs) == [0, 1, 2, 3]
    assert all(e["CUDA_VISIBLE_DEVICES"] == "0,1" for e in envs.values())
    assert [envs[i]["MSCCLPP_NCCL_DEVICE"] for i in range(4)] == ["0", "0", "1", "1"]
    assert [envs[i]["LOCAL_RANK"] for i in range(4)] == ["0", "1", "2", "3"]  # torchrun's, not a device


def test_round_robin_and_inherited_visible_devices() -> None:
    r = launch(
        "-n", "3", "--share-gpus", "--assign", "round-robin", "--", sys.executable, "-c", PRINT_ENV,
        env={"CUDA_VISIBLE_DEVICES": "3,5", "NCCL_NVLS_ENABLE": "1", "MSCCLPP_NCCL_DEVICE": "7"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    envs = rank_envs(r.stdout)
    assert all(e["CUDA_VISIBLE_DEVICES"] == "3,5" for e in envs.values())
    assert [envs[i]["MSCCLPP_NCCL_DEVICE"] for i in range(3)] == ["0", "1", "0"]
    assert all(e["NCCL_NVLS_ENABLE"] == "1" for e in envs.values())  # a caller's setting is kept


def test_without_gpus_no_device_is_named() -> None:
    r = launch(
        "-n",
        "2",
        "--",
        sys.executable,
        "-c",
        PRINT_ENV,
        env={"CUDA_VISIBLE_DEVICES": "", "MSCCLPP_NCCL_DEVICE": "3"},
    )
    assert r.returncode == 0, r.stderr
    envs = rank_envs(r.stdout)
    assert all(e["MSCCLPP_NCCL_DEVICE"] is None and e["CUDA_VISIBLE_DEVICES"] == "" for e in envs.values())


def test_local_device_rule() -> None:
    assert local_device(env={"MSCCLPP_NCCL_DEVICE": "2", "LOCAL_RANK": "5"}) == 2
    assert local_device(8, env={"LOCAL_RANK": "5"}) == 5
    assert local_device(4, env={"LOCAL_RANK": "5"}) == 1
    assert local_device(2, env={"OMPI_COMM_WORLD_LOCAL_RANK": "3"}) == 1
    assert local_device(2, env={"MPI_LOCALRANKID": "2"}) == 0
    assert local_device(None, env={}) == 0
    with pytest.raises(ValueError, match="not a device index"):
        local_device(env={"MSCCLPP_NCCL_DEVICE": "x"})


def test_assign_gpus() -> None:
    assert assign_gpus(4, ["0", "1"]) == ["0", "0", "1", "1"]
    assert assign_gpus(3, ["0", "1"]) == ["0", "0", "1"]
    assert assign_gpus(8, ["0"]) == ["0"] * 8
    assert assign_gpus(2, ["0", "1", "2", "3"]) == ["0", "1"]
    assert assign_gpus(5, ["a", "b"], "round-robin") == ["a", "b", "a", "b", "a"]
    assert assign_gpus(2, []) == [None, None]


def test_visible_gpus_honours_cuda_visible_devices() -> None:
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert visible_gpus({"CUDA_VISIBLE_DEVICES": "1,-1,2"}) == ["1"]


def test_no_prefix() -> None:
    r = launch("-n", "2", "--no-prefix", "--", sys.executable, "-c", "print('hello')")
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["hello", "hello"]


def test_prefixed_stdout_and_stderr() -> None:
    code = "import sys; print('out'); print('err', file=sys.stderr)"
    r = launch("-n", "2", "--", sys.executable, "-c", code)
    assert sorted(r.stdout.splitlines()) == ["[0] out", "[1] out"]
    assert "[0] err" in r.stderr.splitlines() and "[1] err" in r.stderr.splitlines()


def test_exit_code_of_failing_rank() -> None:
    code = "import os, sys; sys.exit(3 if os.environ['RANK'] == '2' else 0)"
    r = launch("-n", "4", "--", sys.executable, "-c", code)
    assert r.returncode == 3
    assert "rank 2 exited with code 3" in r.stderr


def test_failure_kills_the_others(tmp_path: Path) -> None:
    code = (
        "import os, sys, time\n"
        "rank = os.environ['RANK']\n"
        f"d = {str(tmp_path)!r}\n"
        "open(os.path.join(d, rank + '.tmp'), 'w').write(str(os.getpid()))\n"
        "os.rename(os.path.join(d, rank + '.tmp'), os.path.join(d, rank))\n"
        "if rank == '1':\n"  # fails once the others have said who they are
        "    end = time.monotonic() + 30\n"
        "    while not all(os.path.exists(os.path.join(d, r)) for r in '02') and time.monotonic() < end:\n"
        "        time.sleep(0.05)\n"
        "    sys.exit(5)\n"
        "time.sleep(120)\n"
    )
    start = time.monotonic()
    r = launch("-n", "3", "--grace", "0.5", "--", sys.executable, "-c", code)
    assert r.returncode == 5
    assert time.monotonic() - start < 30
    for rank in ("0", "2"):
        pid = int((tmp_path / rank).read_text())
        assert not _alive(pid), f"rank {rank} (pid {pid}) still runs"


def test_timeout_kills_every_rank() -> None:
    start = time.monotonic()
    r = launch("-n", "2", "--timeout", "1", "--", sys.executable, "-c", "import time; time.sleep(120)")
    assert r.returncode == 124
    assert "timeout" in r.stderr
    assert time.monotonic() - start < 30


def test_needs_a_command() -> None:
    r = launch("-n", "2")
    assert r.returncode != 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie counts as gone: it has exited and only waits to be reaped.
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("n", [1, 8])
def test_many_and_single_ranks(n: int) -> None:
    r = launch("-n", str(n), "--share-gpus", "--gpus", "0", "--", sys.executable, "-c", PRINT_ENV)
    assert r.returncode == 0, r.stderr
    envs = rank_envs(r.stdout)
    assert sorted(envs) == list(range(n))
    assert all(e["CUDA_VISIBLE_DEVICES"] == "0" and e["MSCCLPP_NCCL_DEVICE"] == "0" for e in envs.values())


def test_fake_host_count_splits_consecutive_ranks_like_blocked_gpus() -> None:
    assert fake_host_names("2", 4) == ["0", "0", "1", "1"]
    assert fake_host_names("3", 4) == ["0", "0", "1", "2"]  # uneven: the first hosts get one more
    assert fake_host_names(" 4 ", 4) == ["0", "1", "2", "3"]
    assert fake_host_names("1", 3) == ["0", "0", "0"]


def test_fake_host_names_one_per_rank() -> None:
    assert fake_host_names("a,b,a,b", 4) == ["a", "b", "a", "b"]
    assert fake_host_names(" x , y ", 2) == ["x", "y"]
    assert fake_host_names("solo", 1) == ["solo"]


@pytest.mark.parametrize(
    ("spec", "nranks", "message"),
    [
        ("0", 4, "at least 1"),
        ("-2", 4, "at least 1"),
        ("5", 4, "more hosts than the 4 ranks"),
        ("a,b,a", 4, "3 host names for 4 ranks"),
        ("a,b,a,b,a", 4, "5 host names for 4 ranks"),
        ("a,,b,c", 4, r"empty host name for rank\(s\) \[1\]"),
        ("", 1, "empty host name"),
    ],
)
def test_bad_fake_hosts_spec(spec: str, nranks: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        fake_host_names(spec, nranks)


def test_rank_env_with_interleaved_fake_hosts() -> None:
    hosts = fake_host_names("a,b,a,b", 4)
    base = {"MSCCLPP_NCCL_HOST_ID": "inherited", "OTHER": "kept"}
    envs = [rank_env(base, r, 4, None, None, 1234, hosts=hosts) for r in range(4)]
    assert [e["MSCCLPP_NCCL_HOST_ID"] for e in envs] == [
        "fake-host-a", "fake-host-b", "fake-host-a", "fake-host-b",
    ]  # fmt: skip
    assert [e["LOCAL_RANK"] for e in envs] == ["0", "0", "1", "1"]
    assert [e["MSCCLPP_NCCL_LOCAL_RANK"] for e in envs] == ["0", "0", "1", "1"]
    assert all(e["LOCAL_WORLD_SIZE"] == "2" for e in envs)
    assert [e["RANK"] for e in envs] == ["0", "1", "2", "3"]  # the global rank is untouched
    assert all(e["WORLD_SIZE"] == "4" and e["OTHER"] == "kept" for e in envs)
    assert base["MSCCLPP_NCCL_HOST_ID"] == "inherited"  # pure: the base is not changed


def test_rank_env_with_uneven_fake_hosts() -> None:
    hosts = fake_host_names("2", 3)
    envs = [rank_env({}, r, 3, 0, None, 1234, hosts=hosts) for r in range(3)]
    assert [e["MSCCLPP_NCCL_HOST_ID"] for e in envs] == ["fake-host-0", "fake-host-0", "fake-host-1"]
    assert [(e["LOCAL_RANK"], e["LOCAL_WORLD_SIZE"]) for e in envs] == [("0", "2"), ("1", "2"), ("0", "1")]
    assert [e["GROUP_RANK"] for e in envs] == ["0", "0", "1"]
    assert all(e["MSCCLPP_NCCL_DEVICE"] == "0" for e in envs)


def test_rank_env_without_fake_hosts_keeps_an_inherited_host_id() -> None:
    env = rank_env({"MSCCLPP_NCCL_HOST_ID": "mine"}, 2, 4, None, None, 1234)
    assert env["MSCCLPP_NCCL_HOST_ID"] == "mine"
    assert env["LOCAL_RANK"] == env["MSCCLPP_NCCL_LOCAL_RANK"] == "2" and env["LOCAL_WORLD_SIZE"] == "4"
    assert "MSCCLPP_NCCL_HOST_ID" not in rank_env({}, 0, 4, None, None, 1234)


def test_rank_env_rejects_a_host_list_of_the_wrong_length() -> None:
    with pytest.raises(ValueError, match="3 fake hosts given for 4 ranks"):
        rank_env({}, 0, 4, None, None, 1234, hosts=["a", "a", "b"])


def test_fake_hosts_end_to_end() -> None:
    r = launch(
        "--fake-hosts", "2", "-n", "4", "--share-gpus", "--gpus", "0", "--", sys.executable, "-c", PRINT_ENV,
        env={"MSCCLPP_NCCL_HOST_ID": "inherited"},
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    envs = rank_envs(r.stdout)
    assert sorted(envs) == [0, 1, 2, 3]
    assert [envs[i]["MSCCLPP_NCCL_HOST_ID"] for i in range(4)] == ["fake-host-0"] * 2 + ["fake-host-1"] * 2
    assert [envs[i]["LOCAL_RANK"] for i in range(4)] == ["0", "1", "0", "1"]
    assert [envs[i]["MSCCLPP_NCCL_LOCAL_RANK"] for i in range(4)] == ["0", "1", "0", "1"]
    assert all(e["LOCAL_WORLD_SIZE"] == "2" and e["WORLD_SIZE"] == "4" for e in envs.values())
    assert [envs[i]["RANK"] for i in range(4)] == ["0", "1", "2", "3"]
    assert "fake-host-0: ranks 0,1; fake-host-1: ranks 2,3" in r.stderr


@pytest.mark.parametrize(
    ("spec", "message"), [("5", "more hosts than the 4 ranks"), ("a,b", "2 host names for 4 ranks")]
)
def test_bad_fake_hosts_exit_2_before_any_rank_runs(spec: str, message: str) -> None:
    r = launch("--fake-hosts", spec, "-n", "4", "--", sys.executable, "-c", "print('ran')")
    assert r.returncode == 2
    assert message in r.stderr
    assert "ran" not in r.stdout


@pytest.mark.parametrize(
    ("ranks_per_gpu", "queues"), [(1, 8), (2, 8), (8, 8), (12, 8), (16, 6), (48, 2), (200, 2)]
)
def test_mps_queues_as_without_mps_within_the_pool(ranks_per_gpu: int, queues: int) -> None:
    assert mps_queues(ranks_per_gpu) == queues
    assert mps_queues(ranks_per_gpu) * ranks_per_gpu <= MPS_QUEUE_POOL or queues == 2


def fake_mps_control(tmp_path: Path) -> dict[str, str]:
    """A PATH whose nvidia-cuda-mps-control answers every command, as a running daemon does."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    ctl = bin_dir / "nvidia-cuda-mps-control"
    ctl.write_text("#!/bin/sh\ncat > /dev/null\nexit 0\n")
    ctl.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "CUDA_MPS_PIPE_DIRECTORY": str(tmp_path)}


@pytest.mark.parametrize(("nranks", "gpus", "expected"), [(4, "0,1", "8"), (16, "0", "6")])
def test_mps_ranks_get_the_queues_of_a_context(tmp_path: Path, nranks: int, gpus: str, expected: str) -> None:
    """Under MPS each rank asks for the hardware queues a process has without it (as the pool allows):
    with MPS's 2, calls on a third stream can wait behind another communicator's waiting kernel."""
    show = "import os; print(os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'))"
    r = launch(
        "-n",
        str(nranks),
        "--mps",
        "--gpus",
        gpus,
        "--",
        sys.executable,
        "-c",
        show,
        env=fake_mps_control(tmp_path),
    )
    assert r.returncode == 0, r.stderr
    assert {line.partition("] ")[2] for line in r.stdout.splitlines()} == {expected}


def test_mps_queues_the_caller_set_are_kept(tmp_path: Path) -> None:
    show = "import os; print(os.environ.get('CUDA_DEVICE_MAX_CONNECTIONS'))"
    env = {**fake_mps_control(tmp_path), "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    r = launch("-n", "4", "--mps", "--gpus", "0", "--", sys.executable, "-c", show, env=env)
    assert r.returncode == 0, r.stderr
    assert {line.partition("] ")[2] for line in r.stdout.splitlines()} == {"1"}
