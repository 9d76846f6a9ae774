"""The cffi binding against the NCCL 2.32 C contract (runs without a GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mscclpp_nccl import binding
from mscclpp_nccl.binding import Nccl, NcclError, ffi

# ncclGetErrorString's text for each ncclResult_t, as NCCL 2.32 returns it.
ERROR_STRINGS = {
    0: "no error",
    1: "unhandled cuda error (run with NCCL_DEBUG=INFO for details)",
    2: "unhandled system error (run with NCCL_DEBUG=INFO for details)",
    3: "internal error - please report this issue to the NCCL developers",
    4: "invalid argument (run with NCCL_DEBUG=WARN for details)",
    5: "invalid usage (run with NCCL_DEBUG=WARN for details)",
    6: "remote process exited or there was a network error",
    7: "NCCL operation in progress",
    8: "timeout",
}


@pytest.fixture(scope="module")
def nccl(nccl_lib: Path) -> Nccl:
    return Nccl(nccl_lib)


def test_version(nccl: Nccl) -> None:
    assert nccl.version() == 23203
    assert binding.version_tuple(nccl.version()) == (2, 32, 3)


@pytest.mark.parametrize("code", sorted(ERROR_STRINGS))
def test_error_strings(nccl: Nccl, code: int) -> None:
    assert nccl.error_string(code) == ERROR_STRINGS[code]


def test_error_string_of_unknown_code(nccl: Nccl) -> None:
    text = nccl.error_string(9)
    assert text and text not in ERROR_STRINGS.values()


def test_unique_id(nccl: Nccl) -> None:
    a = binding.unique_id_to_hex(nccl.get_unique_id())
    b = binding.unique_id_to_hex(nccl.get_unique_id())
    assert len(bytes.fromhex(a)) == 128
    assert a != b
    assert binding.unique_id_to_hex(binding.unique_id_from_hex(a)) == a


def test_bad_call_raises(nccl: Nccl) -> None:
    count = ffi.new("int*")
    with pytest.raises(NcclError) as info:
        nccl.check(nccl.lib.ncclCommCount(ffi.NULL, count))
    assert info.value.code == 4  # ncclInvalidArgument
    assert info.value.name == "ncclInvalidArgument"
    assert str(info.value)


def test_comm_helpers_reject_null(nccl: Nccl) -> None:
    for helper in (nccl.comm_count, nccl.comm_user_rank, nccl.comm_cu_device):
        with pytest.raises(NcclError):
            helper(ffi.NULL)


def test_check_passes_success_and_in_progress(nccl: Nccl) -> None:
    assert nccl.check(0) == 0
    assert nccl.check(7) == 7


def test_missing_library_is_reported(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="build"):
        Nccl(tmp_path / "libnccl.so.2")


# --- pure Python parts: no library needed -------------------------------------------------------------


def test_unique_id_hex_checks_length() -> None:
    with pytest.raises(ValueError):
        binding.unique_id_from_hex("00" * 127)
    with pytest.raises(ValueError):
        binding.unique_id_to_hex(b"\0" * 129)
    raw = bytes(range(128))
    assert bytes.fromhex(binding.unique_id_to_hex(raw)) == raw


def test_dtype_and_op_codes() -> None:
    names = [
        "int8",
        "uint8",
        "int32",
        "uint32",
        "int64",
        "uint64",
        "float16",
        "float32",
        "float64",
        "bfloat16",
        "float8_e4m3",
        "float8_e5m2",
    ]
    assert [binding.dtype_code(n) for n in names] == list(range(12))
    assert all(binding.DTYPE_NAMES[binding.DTYPES[n]] == n for n in names)
    np = pytest.importorskip("numpy")
    assert binding.dtype_code(np.dtype("float32")) == 7
    assert binding.dtype_code(np.float16) == 6
    assert [binding.op_code(o) for o in ("sum", "prod", "max", "min", "avg")] == [0, 1, 2, 3, 4]
    with pytest.raises(ValueError):
        binding.dtype_code("complex64")
    with pytest.raises(ValueError):
        binding.op_code("xor")


def test_config_layout() -> None:
    # NCCL 2.32's ncclConfig_t (checked with offsetof on the stock header): 120 bytes on LP64.
    assert ffi.sizeof("ncclConfig_t") == 120
    assert ffi.offsetof("ncclConfig_t", "netName") == 32
    assert ffi.offsetof("ncclConfig_t", "commName") == 48
    assert ffi.offsetof("ncclConfig_t", "nvlsHostMode") == 112
    cfg = binding.new_config(blocking=0, commName="x")
    assert cfg.size == 120 and cfg.magic == 0xCAFEBEEF and cfg.version == 23203
    assert cfg.blocking == 0
    assert cfg.maxCTAs == binding.CONFIG_UNDEF_INT
    assert cfg.netName == ffi.NULL
    assert ffi.string(cfg.commName) == b"x"


def test_coll_config_is_initialized_as_the_header_does() -> None:
    # NCCL_COLLCONFIG_INITIALIZER of the 2.32 header: ints unset, selection forced, tag 0, pointers NULL.
    assert ffi.sizeof("ncclCollConfig_t") == 72
    cfg = binding.new_coll_config(algSelection="ring")
    assert cfg.size == 72 and cfg.magic == 0xCAFEBEEF and cfg.version == 23203
    assert cfg.minCTAs == cfg.maxCTAs == cfg.CTAPolicy == binding.CONFIG_UNDEF_INT
    assert cfg.forceAlgSelection == 1 and cfg.userProfilerTag == 0
    assert cfg.ext == ffi.NULL and cfg.launchCompletionEvent == ffi.NULL
    assert ffi.string(cfg.algSelection) == b"ring"
