"""cffi ABI-mode binding of the NCCL C API (no compiler needed): works on ours or on a stock libnccl."""

from __future__ import annotations

import os
import threading
from typing import Any

import cffi

from ._cdef import CDEF  # generated from include/nccl.h: the whole API (mscclpp_nccl.binding_gen)
from ._library import library_path

ffi = cffi.FFI()
ffi.cdef(CDEF)

UNIQUE_ID_BYTES = 128
CONFIG_MAGIC = 0xCAFEBEEF
CONFIG_VERSION = 23203  # NCCL_VERSION_CODE of the headers this layout comes from
CONFIG_UNDEF_INT = -(2**31)  # INT_MIN: "not set, use the default"
SPLIT_NOCOLOR = -1

RESULT_NAMES = {
    0: "ncclSuccess",
    1: "ncclUnhandledCudaError",
    2: "ncclSystemError",
    3: "ncclInternalError",
    4: "ncclInvalidArgument",
    5: "ncclInvalidUsage",
    6: "ncclRemoteError",
    7: "ncclInProgress",
    8: "ncclTimeout",
}

# dtype name (NumPy/CuPy spelling) -> ncclDataType_t.
DTYPES = {
    "int8": 0,
    "uint8": 1,
    "int32": 2,
    "uint32": 3,
    "int64": 4,
    "uint64": 5,
    "float16": 6,
    "float32": 7,
    "float64": 8,
    "bfloat16": 9,
    "float8_e4m3": 10,
    "float8_e5m2": 11,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
DTYPE_SIZES = {
    "int8": 1,
    "uint8": 1,
    "int32": 4,
    "uint32": 4,
    "int64": 8,
    "uint64": 8,
    "float16": 2,
    "float32": 4,
    "float64": 8,
    "bfloat16": 2,
    "float8_e4m3": 1,
    "float8_e5m2": 1,
}
# Aliases that ml_dtypes / PyTorch use for the same types.
_DTYPE_ALIASES = {"half": "float16", "float": "float32", "double": "float64", "float8_e4m3fn": "float8_e4m3"}

OPS = {"sum": 0, "prod": 1, "max": 2, "min": 3, "avg": 4}
OP_NAMES = {v: k for k, v in OPS.items()}


def dtype_code(dtype: Any) -> int:
    """ncclDataType_t of a dtype name, NumPy/CuPy dtype or ncclDataType_t value."""
    if isinstance(dtype, int):
        if dtype not in DTYPE_NAMES:
            raise ValueError(f"unknown ncclDataType_t {dtype}")
        return dtype
    if isinstance(dtype, str):
        name = dtype
    else:
        # A NumPy/CuPy dtype or scalar type (np.float32); numpy knows how to name them all.
        import numpy

        name = numpy.dtype(dtype).name
    name = _DTYPE_ALIASES.get(name, name)
    if name not in DTYPES:
        raise ValueError(f"NCCL has no data type for {name!r}")
    return DTYPES[name]


def op_code(op: str | int) -> int:
    """ncclRedOp_t of an op name (sum, prod, max, min, avg) or value (a PreMulSum op passes through)."""
    if isinstance(op, int):
        return op
    try:
        return OPS[op.lower()]
    except KeyError:
        raise ValueError(f"unknown reduction op {op!r}; one of {', '.join(OPS)}") from None


def unique_id_to_hex(uid: Any) -> str:
    """Hex string of an ncclUniqueId (cdata) or of its 128 raw bytes."""
    if isinstance(uid, ffi.CData):
        # A struct by value (as ncclGetUniqueId's result is passed around) or a pointer to one.
        ptr = ffi.addressof(uid) if ffi.typeof(uid).kind == "struct" else uid
        raw = bytes(ffi.buffer(ptr, UNIQUE_ID_BYTES))
    else:
        raw = bytes(uid)
    if len(raw) != UNIQUE_ID_BYTES:
        raise ValueError(f"a unique id has {UNIQUE_ID_BYTES} bytes, got {len(raw)}")
    return raw.hex()


def unique_id_from_hex(text: str) -> Any:
    """An ncclUniqueId (cdata) from the hex string unique_id_to_hex made."""
    raw = bytes.fromhex(text.strip())
    if len(raw) != UNIQUE_ID_BYTES:
        raise ValueError(f"a unique id has {UNIQUE_ID_BYTES} bytes, got {len(raw)}")
    uid = ffi.new("ncclUniqueId*")
    ffi.memmove(uid, raw, UNIQUE_ID_BYTES)
    return uid[0]


def new_config(**fields: Any) -> Any:
    """An ncclConfig_t* set up like NCCL_CONFIG_INITIALIZER, with the given fields set.

    String fields (netName, commName) are kept alive with the returned object.
    """
    return _initialized("ncclConfig_t", {}, fields)


def new_coll_config(**fields: Any) -> Any:
    """An ncclCollConfig_t* set up like NCCL_COLLCONFIG_INITIALIZER, with the given fields set (a string
    algSelection is kept alive with the returned object)."""
    return _initialized("ncclCollConfig_t", {"forceAlgSelection": 1, "userProfilerTag": 0}, fields)


def _initialized(struct: str, defaults: dict[str, int], fields: dict[str, Any]) -> Any:
    """A `struct`* with the versioned header, every int field unset (CONFIG_UNDEF_INT) but `defaults`,
    and `fields` set."""
    cfg = ffi.new(f"{struct}*")
    cfg.size = ffi.sizeof(struct)
    cfg.magic = CONFIG_MAGIC
    cfg.version = CONFIG_VERSION
    for fname, ftype in ffi.typeof(struct).fields:
        if fname in ("size", "magic", "version"):
            continue
        if ftype.type.kind == "primitive":
            setattr(cfg, fname, defaults.get(fname, CONFIG_UNDEF_INT))
    keep = []
    for key, value in fields.items():
        if isinstance(value, str):
            value = ffi.new("char[]", value.encode())
            keep.append(value)
        setattr(cfg, key, value)
    return ffi.gc(cfg, lambda _c, _k=keep: None) if keep else cfg


class NcclError(RuntimeError):
    """A call returned something other than ncclSuccess."""

    def __init__(self, code: int, name: str, message: str) -> None:
        self.code = code
        self.name = name
        self.message = message
        super().__init__(f"{name} ({code}): {message}" if message else f"{name} ({code})")


class Nccl:
    """A loaded libnccl.so.2 (ours by default). Functions are reached as attributes: `nccl.lib.ncclX`."""

    _cache: dict[str, Nccl] = {}  # noqa: RUF012 (a per-process cache shared by all instances)
    _cache_lock = threading.Lock()

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = str(path if path is not None else library_path())
        if not os.path.exists(self.path):
            raise FileNotFoundError(
                f"{self.path} does not exist; build it with `pip install -e .`"
                " or `python setup.py build_native`"
            )
        # RTLD_GLOBAL is not needed: every call goes through this handle.
        self.lib: Any = ffi.dlopen(self.path)
        self.ffi = ffi

    @classmethod
    def load(cls, path: str | os.PathLike[str] | None = None) -> Nccl:
        """One Nccl per library path per process (dlopen keeps one copy anyway)."""
        key = str(path if path is not None else library_path())
        with cls._cache_lock:
            if key not in cls._cache:
                cls._cache[key] = cls(key)
            return cls._cache[key]

    # --- errors ---------------------------------------------------------------------------------
    def error_string(self, code: int) -> str:
        s = self.lib.ncclGetErrorString(code)
        return ffi.string(s).decode(errors="replace") if s != ffi.NULL else ""

    def last_error(self, comm: Any = None) -> str:
        s = self.lib.ncclGetLastError(ffi.NULL if comm is None else comm)
        return ffi.string(s).decode(errors="replace") if s != ffi.NULL else ""

    def check(self, result: int, comm: Any = None) -> int:
        """Raises NcclError unless result is ncclSuccess (or ncclInProgress, which callers poll)."""
        code = int(result)
        if code in (0, 7):
            return code
        name = RESULT_NAMES.get(code, f"ncclResult_t({code})")
        message = self.last_error(comm) or self.error_string(code)
        raise NcclError(code, name, message)

    # --- small typed helpers --------------------------------------------------------------------
    def version(self) -> int:
        v = ffi.new("int*")
        self.check(self.lib.ncclGetVersion(v))
        return int(v[0])

    def parameters(self) -> dict[str, str]:
        """Every parameter the library reads (ncclParamGetAllParameterKeys), with the value it uses."""
        table, count = ffi.new("const char***"), ffi.new("int*")
        self.check(self.lib.ncclParamGetAllParameterKeys(table, count))
        keys = [ffi.string(table[0][i]) for i in range(count[0])]
        value, length = ffi.new("const char**"), ffi.new("int*")
        found: dict[str, str] = {}
        for key in keys:
            self.check(self.lib.ncclParamGetParameter(key, value, length))
            found[key.decode()] = ffi.unpack(value[0], length[0]).decode(errors="replace")
        return found

    def get_unique_id(self) -> Any:
        uid = ffi.new("ncclUniqueId*")
        self.check(self.lib.ncclGetUniqueId(uid))
        return uid[0]

    def comm_init_rank(self, nranks: int, unique_id: Any, rank: int, config: Any = None) -> Any:
        comm = ffi.new("ncclComm_t*")
        if isinstance(unique_id, str):
            unique_id = unique_id_from_hex(unique_id)
        if config is None:
            self.check(self.lib.ncclCommInitRank(comm, nranks, unique_id, rank))
        else:
            self.check(self.lib.ncclCommInitRankConfig(comm, nranks, unique_id, rank, config))
        return comm[0]

    def _query(self, function: Any, comm: Any, ctype: str = "int*") -> int:
        """Calls `function(comm, out)` and returns what it wrote to `out`."""
        out = ffi.new(ctype)
        self.check(function(comm, out), comm)
        return int(out[0])

    def comm_count(self, comm: Any) -> int:
        return self._query(self.lib.ncclCommCount, comm)

    def comm_user_rank(self, comm: Any) -> int:
        return self._query(self.lib.ncclCommUserRank, comm)

    def comm_cu_device(self, comm: Any) -> int:
        return self._query(self.lib.ncclCommCuDevice, comm)

    def comm_async_error(self, comm: Any) -> int:
        return self._query(self.lib.ncclCommGetAsyncError, comm, "ncclResult_t*")


def version_tuple(code: int) -> tuple[int, int, int]:
    """(major, minor, patch) of an NCCL version code (2.9+ scheme: major*10000 + minor*100 + patch)."""
    return code // 10000, (code % 10000) // 100, code % 100
