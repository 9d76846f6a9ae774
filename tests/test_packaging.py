"""CPU tests of setup.py's packaging: nvcc too old or unable to target an architecture stops the build
before anything compiles, wheels are tagged for the glibc the library needs, each compile's seconds are
kept and reported against a budget, and GPU tests skip naming what to install."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from types import ModuleType, SimpleNamespace

import pytest
from conftest import gpu_skip_reason


def fake_nvcc(tmp_path: Path, release: str, codes: str = "sm_80 sm_90 sm_100") -> Path:
    """An nvcc that only answers --version and --list-gpu-code, and fails if asked to compile."""
    nvcc = tmp_path / "nvcc"
    nvcc.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f'  --version) echo "Cuda compilation tools, release {release}, V{release}.1" ;;\n'
        f'  --list-gpu-code) for c in {codes}; do echo "$c"; done ;;\n'
        '  *) echo "compiled $*" >> "$(dirname "$0")/compiled"; exit 1 ;;\n'
        "esac\n"
    )
    nvcc.chmod(nvcc.stat().st_mode | stat.S_IXUSR)
    return nvcc


def test_nvcc_release_is_parsed(setup_py: ModuleType) -> None:
    text = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
    assert setup_py._nvcc_release(text) == (13, 0)
    assert setup_py._nvcc_release("no version here") is None


def test_old_nvcc_stops_the_build_before_compiling(
    setup_py: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    nvcc = fake_nvcc(tmp_path, "12.4")
    monkeypatch.setenv("NVCC", str(nvcc))
    monkeypatch.setattr(setup_py, "OBJ_DIR", tmp_path / "build" / "native")
    monkeypatch.setattr(setup_py, "LIB_DIR", tmp_path / "lib")
    with pytest.raises(SystemExit) as e:
        setup_py.build_native()
    message = str(e.value)
    assert "CUDA 12.4" in message and "needs CUDA 12.8 or newer" in message, message
    assert "Nothing was compiled" in message
    assert not (tmp_path / "compiled").exists()
    assert not (tmp_path / "build").exists() and not (tmp_path / "lib").exists()


def test_unknown_architecture_stops_the_build(setup_py: ModuleType, tmp_path: Path) -> None:
    nvcc = fake_nvcc(tmp_path, "12.8", codes="sm_80 sm_90")
    with pytest.raises(SystemExit) as e:
        setup_py.check_nvcc(str(nvcc), ["90", "100"])
    assert "cannot compile for sm_100" in str(e.value)
    setup_py.check_nvcc(str(nvcc), ["80", "90a"])  # suffixed targets are checked by their number


def test_recent_nvcc_passes(setup_py: ModuleType, tmp_path: Path) -> None:
    setup_py.check_nvcc(str(fake_nvcc(tmp_path, "13.0")), ["80", "90", "100"])


def test_targets_default_to_sm90_and_more_are_asked_for(
    setup_py: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MSCCLPP_NCCL_CUDA_ARCHS", raising=False)
    assert setup_py._archs() == ["90"]
    assert setup_py.object_dir(["90"]) == setup_py.OBJ_DIR
    monkeypatch.setenv("MSCCLPP_NCCL_CUDA_ARCHS", "80,90,100")
    assert setup_py._archs() == ["80", "90", "100"]
    # Another set of targets keeps its own objects: switching back only relinks.
    assert setup_py.object_dir(["80", "90", "100"]).name == "native-sm80-90-100"
    monkeypatch.setenv("MSCCLPP_NCCL_CUDA_ARCHS", "sm_90")
    assert setup_py._archs() == ["90"]


def test_manylinux_tag_from_version_names(setup_py: ModuleType, tmp_path: Path) -> None:
    lib = tmp_path / "libfake.so"  # not ELF: objdump fails and the byte scan reads the names
    lib.write_bytes(b"\0GLIBC_2.2.5\0GLIBC_2.17\0GLIBC_2.28\0GLIBCXX_3.4.21\0GCC_3.0\0")
    assert setup_py.symbol_versions(lib) == {"GLIBC": (2, 28), "GLIBCXX": (3, 4, 21), "GCC": (3, 0)}
    machine = os.uname().machine
    assert setup_py.wheel_platform(lib) == f"manylinux_2_28_{machine}"
    # GCC 12's C++ runtime is first in manylinux_2_35, whatever glibc asks.
    lib.write_bytes(b"\0GLIBC_2.34\0GLIBCXX_3.4.30\0")
    assert setup_py.wheel_platform(lib) == f"manylinux_2_35_{machine}"
    lib.write_bytes(b"\0GLIBC_2.34\0GLIBCXX_3.4.99\0")  # newer than any policy
    assert setup_py.wheel_platform(lib) == f"linux_{machine}"
    assert setup_py.wheel_platform(tmp_path / "missing.so") == f"linux_{machine}"


def test_built_library_needs_what_manylinux_allows(setup_py: ModuleType, nccl_lib: Path) -> None:
    """cudart is linked in; the rest is glibc and the C++ runtime, which the tag accounts for."""
    assert setup_py.manylinux_glibc(nccl_lib) is not None
    libraries = setup_py.needed_libraries(nccl_lib)
    if libraries is None:
        pytest.skip("objdump is not installed")
    assert set(libraries) <= setup_py.SYSTEM_LIBRARIES, libraries


def test_compile_times_are_merged_and_reported(
    setup_py: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    names = [job.name for job in setup_py.compiles(setup_py._sources()) if job.shard is None]
    a, b = names[0], names[1]
    setup_py.record_compile_times(tmp_path, {a: 10.0, b: 700.0, "native/gone.cu": 5000.0}, ["90"], 2)
    setup_py.record_compile_times(tmp_path, {b: 20.0}, ["90"], 2)  # an incremental build
    data = json.loads((tmp_path / "compile_times.json").read_text())
    assert data["files"][a]["seconds"] == 10.0 and data["files"][b]["seconds"] == 20.0
    lines, over = setup_py.compile_report(tmp_path, top=1, file_budget_s=15, total_budget_s=1000)
    assert "2 of" in lines[0] and "30 s in all" in lines[0]  # a removed source does not count
    assert len(lines) == 2 and b in lines[1]
    assert over == [f"{b}: 20 s > 15 s"]
    _, over = setup_py.compile_report(tmp_path, file_budget_s=100, total_budget_s=25)
    assert over == ["all compiles: 30 s > 25 s"]
    lines, over = setup_py.compile_report(tmp_path / "none")
    assert "no compile times" in lines[0] and over == []


def sharded_source(setup_py: ModuleType) -> Path:
    return setup_py.ROOT / "native" / "algorithms" / "exchange_zero_copy.cu"


def test_a_kernel_source_compiles_once_per_type_shard(setup_py: ModuleType, tmp_path: Path) -> None:
    shards = setup_py.type_shards()
    # the 12 element types of reductions, the raw 2-byte type of data movement, a second shard (Max and
    # Min) for each of the four 1-byte types, and one for the copies of each raw type that also reduces
    assert shards == 20
    plain = setup_py.ROOT / "native" / "communicator.cc"
    jobs = setup_py.compiles([plain, sharded_source(setup_py)])
    assert [job.shard for job in jobs] == [None, *range(shards)]
    assert jobs[0].flags() == [] and jobs[0].object(tmp_path) == tmp_path / "native" / "communicator.cc.o"
    assert jobs[3].flags() == ["-DMSCCLPP_NCCL_TYPE_SHARD=2"]
    objects = {job.object(tmp_path) for job in jobs}
    assert len(objects) == len(jobs)  # every shard its own object (and .d file beside it)
    assert jobs[3].name == "native/algorithms/exchange_zero_copy.cu [type shard 2]"


def test_every_shard_is_reported_and_summed(setup_py: ModuleType, tmp_path: Path) -> None:
    jobs = setup_py.compiles([sharded_source(setup_py)])
    setup_py.record_compile_times(tmp_path, {job.name: 1.0 + (job.shard or 0) for job in jobs}, ["90"], 2)
    lines, over = setup_py.compile_report(tmp_path, top=2, file_budget_s=12.5, total_budget_s=1000)
    # shards 0..19 took 1..20 s: 210 s together, the slowest 20 s
    assert f"{len(jobs)} of" in lines[0] and "210 s in all" in lines[0]
    assert lines[1].endswith("[type shard 19]") and lines[2].endswith("[type shard 18]")
    assert "exchange_zero_copy.cu (20 shards, slowest 20.0 s)" in lines[-1] and "210.0 s" in lines[-1]
    assert over == [f"{jobs[k].name}: {k + 1} s > 12 s" for k in range(19, 11, -1)]


def test_the_slowest_compiles_start_first(setup_py: ModuleType, tmp_path: Path) -> None:
    jobs = setup_py.compiles([setup_py.ROOT / "native" / "communicator.cc", sharded_source(setup_py)])
    known = {job.name: float(i) for i, job in enumerate(jobs) if job.shard != 5}
    setup_py.record_compile_times(tmp_path, known, ["90"], 2)
    order = setup_py._slowest_first(jobs, tmp_path)
    assert order[0].shard == 5  # never timed: started before all
    assert [job.name for job in order[1:]] == sorted(known, key=lambda name: -known[name])


def fake_item(*requires: tuple[str, ...]) -> SimpleNamespace:
    marks = [SimpleNamespace(args=args) for args in requires]
    return SimpleNamespace(iter_markers=lambda name: iter(marks if name == "requires" else []))


def test_gpu_tests_skip_naming_what_to_install() -> None:
    nothing_missing = {"cupy": False, "torch": False}
    assert gpu_skip_reason(fake_item(), False, nothing_missing) == "no NVIDIA GPU visible"
    assert gpu_skip_reason(fake_item(), True, nothing_missing) is None
    no_cupy = {"cupy": True, "torch": False}
    reason = gpu_skip_reason(fake_item(), True, no_cupy)
    assert reason is not None and "[cuda13]" in reason
    assert gpu_skip_reason(fake_item(("torch",)), True, no_cupy) is None  # PyTorch's own tests
    reason = gpu_skip_reason(fake_item(("torch", "cupy")), True, {"cupy": False, "torch": True})
    assert reason is not None and "PyTorch" in reason


def test_a_new_version_recompiles_only_its_readers(setup_py: ModuleType, tmp_path: Path) -> None:
    flags = ["-O3", f'{setup_py.VERSION_DEFINE}="1.2.3"']
    assert setup_py._unversioned(flags) == ["-O3"]
    reader, other = tmp_path / "logging.cc.o", tmp_path / "socket.cc.o"
    reader.with_suffix(".d").write_text(f"x.o: native/common/logging.cc {setup_py.VERSION_HEADER}\n")
    other.with_suffix(".d").write_text("x.o: native/bootstrap/socket.cc native/bootstrap/socket.h\n")
    assert setup_py._includes(reader, setup_py.VERSION_HEADER)
    assert not setup_py._includes(other, setup_py.VERSION_HEADER)
    assert setup_py._includes(tmp_path / "never_built.cc.o", setup_py.VERSION_HEADER)
