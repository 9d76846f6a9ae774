"""CPU tests of the ncclParam* queries (shim/parameters.cc over native/common/parameters.cc): what they
answer for the library's parameters, set and unset, how they refuse what stock refuses, and that the
table holds exactly the variables README.md says the library reads."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from mscclpp_nccl.binding import ffi

ROOT = Path(__file__).resolve().parent.parent
SUCCESS, INVALID_ARGUMENT = 0, 4


@pytest.fixture(scope="module")
def lib(nccl_lib: Path) -> Any:
    return ffi.dlopen(str(nccl_lib))


def bind(lib: Any, key: str) -> Any:
    handle = ffi.new("ncclParamHandle_t*")
    assert lib.ncclParamBind(handle, key.encode()) == SUCCESS, key
    return handle[0]


def parameter(lib: Any, key: str) -> str:
    value, length = ffi.new("const char**"), ffi.new("int*")
    assert lib.ncclParamGetParameter(key.encode(), value, length) == SUCCESS, key
    text = ffi.string(value[0]).decode()
    assert length[0] == len(text)
    return text


def last_error(lib: Any) -> str:
    return ffi.string(lib.ncclGetLastError(ffi.NULL)).decode()


def keys(lib: Any) -> list[str]:
    table, length = ffi.new("const char***"), ffi.new("int*")
    assert lib.ncclParamGetAllParameterKeys(table, length) == SUCCESS
    return [ffi.string(table[0][i]).decode() for i in range(length[0])]


def readme_variables() -> tuple[set[str], str]:
    """The variables README.md's table says the library reads, and the section's whole text."""
    text = (ROOT / "README.md").read_text()
    section = text.split("## Environment variables", 1)[1].split("\n## ", 1)[0]
    names: set[str] = set()
    for row in section.splitlines():
        cells = [cell.strip() for cell in row.split("|")]
        if len(cells) > 3 and cells[2] == "library":
            names.update(re.findall(r"`([A-Z0-9_]+)`", cells[1]))
    return names, section


def test_the_table_is_what_readme_lists(lib: Any) -> None:
    listed, section = readme_variables()
    registered = keys(lib)
    assert len(registered) == len(set(registered)), "a key listed twice"
    # The secret is read but never reported; every other variable the library reads is in the table.
    assert listed - set(registered) == {"MSCCLPP_NCCL_COMM_SECRET"}
    for key in set(registered) - listed:
        assert f"`{key}`" in section, f"{key} is not in README.md's environment variables"


def test_unset_parameters_read_as_their_defaults(lib: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("MSCCLPP_NCCL_SCRATCH_BYTES", "MSCCLPP_NCCL_STALL_REPORT", "NCCL_DEBUG_TIMESTAMP_FORMAT"):
        monkeypatch.delenv(key, raising=False)
    assert parameter(lib, "MSCCLPP_NCCL_SCRATCH_BYTES") == str(8 << 20)
    assert parameter(lib, "MSCCLPP_NCCL_STALL_REPORT") == "60"
    assert parameter(lib, "NCCL_DEBUG_TIMESTAMP_FORMAT") == "[%F %T] "
    value = ffi.new("int64_t*")
    assert lib.ncclParamGetI64(bind(lib, "MSCCLPP_NCCL_SCRATCH_BYTES"), value) == SUCCESS
    assert value[0] == 8 << 20


def test_values_are_read_at_each_query(lib: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    handle, value = bind(lib, "MSCCLPP_NCCL_ZERO_COPY"), ffi.new("int64_t*")
    for text, expected in (("0", 0), ("0x10", 16), ("-3", -3), ("12abc", 1)):  # unparsable: the default
        monkeypatch.setenv("MSCCLPP_NCCL_ZERO_COPY", text)
        assert lib.ncclParamGetI64(handle, value) == SUCCESS
        assert value[0] == expected, text
        assert parameter(lib, "MSCCLPP_NCCL_ZERO_COPY") == str(expected)
    monkeypatch.setenv("MSCCLPP_NCCL_ALGO", "all_reduce=allreduce_one_shot_packet/4")
    out = ffi.new("const char**")
    assert lib.ncclParamGetStr(bind(lib, "MSCCLPP_NCCL_ALGO"), out) == SUCCESS
    assert ffi.string(out[0]) == b"all_reduce=allreduce_one_shot_packet/4"
    monkeypatch.setenv("MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT", "2.5")
    assert parameter(lib, "MSCCLPP_NCCL_BOOTSTRAP_TIMEOUT") == "2.5"


def test_raw_reads_copy_the_native_value(lib: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MSCCLPP_NCCL_HIERARCHY_MIN_BYTES", "4096")
    monkeypatch.setenv("MSCCLPP_NCCL_WAIT_TIMEOUT", "1.5")
    monkeypatch.setenv("MSCCLPP_NCCL_HOST_ID", "rack7")
    buffer, length = ffi.new("char[64]"), ffi.new("int*")
    assert lib.ncclParamGet(bind(lib, "MSCCLPP_NCCL_HIERARCHY_MIN_BYTES"), buffer, 64, length) == SUCCESS
    assert length[0] == 8 and ffi.cast("int64_t*", buffer)[0] == 4096
    assert lib.ncclParamGet(bind(lib, "MSCCLPP_NCCL_WAIT_TIMEOUT"), buffer, 64, length) == SUCCESS
    assert length[0] == 8 and ffi.cast("double*", buffer)[0] == 1.5
    host = bind(lib, "MSCCLPP_NCCL_HOST_ID")
    assert lib.ncclParamGet(host, buffer, 64, length) == SUCCESS
    assert length[0] == 6 and ffi.string(buffer) == b"rack7"
    # Too small: refused with *len 0, as stock does (its documentation says the size needed).
    assert lib.ncclParamGet(host, buffer, 5, length) == INVALID_ARGUMENT and length[0] == 0
    assert lib.ncclParamGet(host, buffer, 0, length) == INVALID_ARGUMENT


def test_binding_gives_one_handle_per_parameter(lib: Any) -> None:
    assert bind(lib, "NCCL_DEBUG") == bind(lib, "NCCL_DEBUG")
    assert bind(lib, "NCCL_DEBUG") != bind(lib, "NCCL_DEBUG_FILE")


def test_refusals(lib: Any) -> None:
    handle = ffi.new("ncclParamHandle_t*")
    sentinel = ffi.cast("ncclParamHandle_t", 0x1234)
    handle[0] = sentinel
    for key in (b"nccl_debug", b"NCCL_ALGO", b"MSCCLPP_NCCL_COMM_SECRET", b""):
        assert lib.ncclParamBind(handle, key) == INVALID_ARGUMENT, key
        assert handle[0] == sentinel, "an unknown key must leave *out alone"
        assert "no parameter is named" in last_error(lib)
    assert lib.ncclParamBind(ffi.NULL, b"NCCL_DEBUG") == INVALID_ARGUMENT
    assert lib.ncclParamBind(handle, ffi.NULL) == INVALID_ARGUMENT

    integer, text, seconds = (
        bind(lib, "MSCCLPP_NCCL_SCRATCH_BYTES"),
        bind(lib, "NCCL_DEBUG"),
        bind(lib, "MSCCLPP_NCCL_WAIT_TIMEOUT"),
    )
    # A typed read needs the parameter's own type: integers are int64_t, as stock reads them exactly.
    for getter, ctype in (("I8", "int8_t"), ("I32", "int32_t"), ("U64", "uint64_t"), ("U16", "uint16_t")):
        assert getattr(lib, f"ncclParamGet{getter}")(integer, ffi.new(f"{ctype}*")) == INVALID_ARGUMENT
        assert "MSCCLPP_NCCL_SCRATCH_BYTES is a int64_t parameter" in last_error(lib)
    for other in (text, seconds):
        assert lib.ncclParamGetI64(other, ffi.new("int64_t*")) == INVALID_ARGUMENT
    assert lib.ncclParamGetStr(integer, ffi.new("const char**")) == INVALID_ARGUMENT
    assert lib.ncclParamGetStr(seconds, ffi.new("const char**")) == INVALID_ARGUMENT
    # Null or foreign handles and null outputs are refused, never followed.
    for bad in (ffi.NULL, sentinel):
        assert lib.ncclParamGetI64(bad, ffi.new("int64_t*")) == INVALID_ARGUMENT
        assert lib.ncclParamGetStr(bad, ffi.new("const char**")) == INVALID_ARGUMENT
        assert lib.ncclParamGet(bad, ffi.new("char[8]"), 8, ffi.new("int*")) == INVALID_ARGUMENT
    assert lib.ncclParamGetI64(integer, ffi.NULL) == INVALID_ARGUMENT
    assert lib.ncclParamGet(integer, ffi.NULL, 8, ffi.new("int*")) == INVALID_ARGUMENT
    assert lib.ncclParamGet(integer, ffi.new("char[8]"), 8, ffi.NULL) == INVALID_ARGUMENT

    value, length = ffi.new("const char**"), ffi.new("int*")
    value[0], length[0] = ffi.cast("const char*", 1), 7
    assert lib.ncclParamGetParameter(b"NCCL_NOPE", value, length) == INVALID_ARGUMENT
    assert value[0] == ffi.NULL and length[0] == 0
    assert lib.ncclParamGetParameter(ffi.NULL, value, length) == INVALID_ARGUMENT
    assert lib.ncclParamGetParameter(b"NCCL_DEBUG", ffi.NULL, length) == INVALID_ARGUMENT
    assert lib.ncclParamGetAllParameterKeys(ffi.NULL, length) == INVALID_ARGUMENT
    assert lib.ncclParamGetAllParameterKeys(ffi.new("const char***"), ffi.NULL) == INVALID_ARGUMENT


def test_refusals_print_no_warning(nccl_lib: Path) -> None:
    script = textwrap.dedent(
        f"""
        from mscclpp_nccl.binding import ffi
        lib = ffi.dlopen({str(nccl_lib)!r})
        assert lib.ncclParamBind(ffi.new("ncclParamHandle_t*"), b"NCCL_NOPE") == 4
        """
    )
    env = {**os.environ, "NCCL_DEBUG": "WARN"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "NCCL WARN" not in done.stderr + done.stdout


def test_dump_lists_every_parameter_on_stdout(nccl_lib: Path) -> None:
    script = textwrap.dedent(
        f"""
        from mscclpp_nccl.binding import ffi
        lib = ffi.dlopen({str(nccl_lib)!r})
        lib.ncclParamDumpAll()
        """
    )
    env = {**os.environ, "MSCCLPP_NCCL_SCRATCH_BYTES": "1048576"}
    env.pop("MSCCLPP_NCCL_STALL_REPORT", None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "=== ncclParam Registry Dump ==="
    assert "MSCCLPP_NCCL_SCRATCH_BYTES (int64_t) [] scratch each rank gives its peers' packets" in lines
    assert "    Current value=1048576 set_by=Environment default=8388608" in lines
    assert "    Current value=60 set_by=Default default=60" in lines
    listed, _ = readme_variables()
    for key in listed - {"MSCCLPP_NCCL_COMM_SECRET"}:
        assert any(line.startswith(f"{key} (") for line in lines), key


@pytest.mark.parametrize("setting", ["1", "0"])
def test_set_thread_name_names_the_helper_threads(nccl_lib: Path, setting: str) -> None:
    # ncclGetUniqueId starts the rendezvous's root service on a thread of its own.
    script = textwrap.dedent(
        f"""
        import os
        from mscclpp_nccl.binding import ffi
        lib = ffi.dlopen({str(nccl_lib)!r})
        assert lib.ncclGetUniqueId(ffi.new("ncclUniqueId*")) == 0
        for task in os.listdir("/proc/self/task"):
            print(open(f"/proc/self/task/{{task}}/comm").read().strip())
        """
    )
    env = {**os.environ, "NCCL_SET_THREAD_NAME": setting}
    env.pop("NCCL_COMM_ID", None)  # with it, rank 0 serves the rendezvous at init instead
    command = [sys.executable, "-c", script]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    names = done.stdout.split("\n")
    assert ("NCCL Rendezvous" in names) == (setting == "1"), names
