"""Our include/nccl.h against stock NCCL 2.32.3's nccl.h: same layouts, values, initializers and functions.

One generated C program prints `name=value` for every fact of the ABI; it is built once against each
header and the two outputs must match line for line. CPU only: it needs a host compiler and the CUDA
headers (nccl.h includes cuda_runtime.h), not a GPU."""

from __future__ import annotations

import difflib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, os.path.dirname(__file__))
import stock_nccl

OUR_INCLUDE = stock_nccl.repo_root() / "include"

# Field kinds say how the dump prints a member: as an integer, a pointer (NULL or not) or a float;
# aggregates only get their offset and size.
INT, PTR, FLT, AGG = "int", "ptr", "float", "agg"


def _fields(spec: str) -> list[tuple[str, str]]:
    """'a b:ptr c.d' -> [("a", INT), ("b", PTR), ("c.d", INT)]: member designators in declaration order."""
    return [(f.partition(":")[0], f.partition(":")[2] or INT) for f in spec.split()]


# struct/typedef -> its members
STRUCTS: dict[str, list[tuple[str, str]]] = {
    "ncclUniqueId": _fields("internal:agg"),
    "ncclConfig_t": _fields(
        "size magic version blocking cgaClusterSize minCTAs maxCTAs netName:ptr splitShare trafficClass"
        " commName:ptr collnetEnable CTAPolicy shrinkShare nvlsCTAs nChannelsPerNetPeer nvlinkCentricSched"
        " graphUsageMode numRmaCtx maxP2pPeers graphStreamOrdering launchOrderImplicit numRmaSig"
        " rmaEagerInit hostCftMode nvlsHostMode"
    ),
    "ncclConfigExt_t": _fields(
        "next:ptr key:agg key.vendorId key.optionId val:agg val.i val.s:ptr val.raw:ptr"
    ),
    "ncclCollConfig_t": _fields(
        "size magic version ext:ptr minCTAs maxCTAs nvlsCTAs cgaClusterSize algSelection:ptr"
        " forceAlgSelection CTAPolicy userProfilerTag launchCompletionEvent:ptr"
    ),
    "ncclSimInfo_t": _fields("size magic version estimatedTime:float"),
    "ncclEncryptionConfig_t": _fields("size magic version mode psk:ptr"),
    "ncclWaitSignalDesc_t": _fields("opCnt peer sigIdx ctx"),
}

# The struct tags are part of the API too (C callers may write `struct ncclConfig_v23100`).
STRUCT_TAGS = (
    "ncclConfig_v23100 ncclConfigExt ncclCollConfig_v23200 ncclSimInfo_v22200 ncclEncryptionConfig_v23200"
).split()

SCALAR_TYPES = (
    "ncclComm_t ncclWindow_t ncclParamHandle_t ncclResult_t ncclRedOp_dummy_t ncclRedOp_t ncclDataType_t"
    " ncclScalarResidence_t ncclHostCftMode_t ncclNvlsHostMode_t ncclCommMemStat_t ncclEncryptionMode_t"
).split()

# enum typedef -> its members
ENUMS: dict[str, list[str]] = {
    "ncclResult_t": (
        "ncclSuccess ncclUnhandledCudaError ncclSystemError ncclInternalError ncclInvalidArgument"
        " ncclInvalidUsage ncclRemoteError ncclInProgress ncclTimeout ncclNumResults"
    ).split(),
    "ncclHostCftMode_t": (
        "ncclHostCftDefault ncclHostCftEnable ncclHostCftDisable ncclHostCftFallback"
    ).split(),
    "ncclNvlsHostMode_t": (
        "ncclNvlsHostModeDefault ncclNvlsHostModeEnable ncclNvlsHostModeDisableTransport"
        " ncclNvlsHostModeDisableSymmetricMultimem ncclNvlsHostModeDisable"
    ).split(),
    "ncclCommMemStat_t": (
        "ncclStatGpuMemSuspend ncclStatGpuMemSuspended ncclStatGpuMemPersist ncclStatGpuMemTotal"
    ).split(),
    "ncclRedOp_dummy_t": ["ncclNumOps_dummy"],
    "ncclRedOp_t": "ncclSum ncclProd ncclMax ncclMin ncclAvg ncclNumOps ncclMaxRedOp".split(),
    "ncclDataType_t": (
        "ncclInt8 ncclChar ncclUint8 ncclInt32 ncclInt ncclUint32 ncclInt64 ncclUint64 ncclFloat16"
        " ncclHalf ncclFloat32 ncclFloat ncclFloat64 ncclDouble ncclBfloat16 ncclFloat8e4m3"
        " ncclFloat8e5m2 ncclNumTypes"
    ).split(),
    "ncclScalarResidence_t": ["ncclScalarDevice", "ncclScalarHostImmediate"],
    "ncclEncryptionMode_t": ["NCCL_ENCRYPTION_MODE_NONE", "NCCL_ENCRYPTION_MODE_PSK"],
}

INT_MACROS = (
    "NCCL_MAJOR NCCL_MINOR NCCL_PATCH NCCL_VERSION_CODE NCCL_UNIQUE_ID_BYTES NCCL_CONFIG_UNDEF_INT"
    " NCCL_SPLIT_NOCOLOR NCCL_API_MAGIC NCCL_WIN_DEFAULT NCCL_WIN_COLL_SYMMETRIC NCCL_WIN_STRICT_ORDERING"
    " NCCL_WIN_GIN_ONLY NCCL_WIN_CFT_COUNTED NCCL_WIN_REQUIRED_ALIGNMENT NCCL_CTA_POLICY_DEFAULT"
    " NCCL_CTA_POLICY_EFFICIENCY NCCL_CTA_POLICY_ZERO NCCL_SHRINK_DEFAULT NCCL_SHRINK_ABORT"
    " NCCL_REVOKE_DEFAULT NCCL_SUSPEND_MEM"
).split()
FLOAT_MACROS = ["NCCL_UNDEF_FLOAT"]
STRING_MACROS = ["NCCL_SUFFIX"]
NULL_MACROS = ["NCCL_CONFIG_UNDEF_PTR", "NCCL_COMM_NULL"]
# Defined or not (ncclResetDebugInit is an empty function-like macro unless NCCL_OS_LINUX is defined).
PRESENCE_MACROS = ["NCCL_H_", "ncclResetDebugInit", "pncclResetDebugInit"]
# Expressions over function-like macros.
EXPRESSIONS = ["NCCL_VERSION(2, 32, 3)", "NCCL_VERSION(2, 8, 4)", "NCCL_VERSION(3, 0, 0)"]

INITIALIZERS = {
    "ncclConfig_t": "NCCL_CONFIG_INITIALIZER",
    "ncclCollConfig_t": "NCCL_COLLCONFIG_INITIALIZER",
    "ncclSimInfo_t": "NCCL_SIM_INFO_INITIALIZER",
    "ncclEncryptionConfig_t": "NCCL_ENCRYPTION_CONFIG_INITIALIZER",
}


def _print_value(label: str, expr: str, kind: str) -> str:
    if kind == INT:
        return f'  printf("{label}=%lld\\n", (long long)({expr}));'
    if kind == PTR:
        return f'  printf("{label}=%s\\n", ({expr}) == 0 ? "NULL" : "non-NULL");'
    if kind == FLT:
        return f'  printf("{label}=%a\\n", (double)({expr}));'
    raise ValueError(kind)


def generate_dump_source() -> str:
    """The C program that prints every ABI fact as `name=value`, one per line."""
    out = [
        "#include <stddef.h>",
        "#include <stdio.h>",
        '#include "nccl.h"',
        "",
        "int main(void) {",
    ]
    for struct, fields in STRUCTS.items():
        out.append(f'  printf("sizeof({struct})=%zu\\n", sizeof({struct}));')
        out.append(f'  printf("alignof({struct})=%zu\\n", _Alignof({struct}));')
        for field, _ in fields:
            out.append(f'  printf("offsetof({struct}, {field})=%zu\\n", offsetof({struct}, {field}));')
            out.append(f'  printf("sizeof({struct}.{field})=%zu\\n", sizeof((({struct}*)0)->{field}));')
    for tag in STRUCT_TAGS:
        out.append(f'  printf("sizeof(struct {tag})=%zu\\n", sizeof(struct {tag}));')
    for name in SCALAR_TYPES:
        out.append(f'  printf("sizeof({name})=%zu\\n", sizeof({name}));')
    for enum, members in ENUMS.items():
        for member in members:
            out.append(_print_value(f"{enum}::{member}", member, INT))
    for macro in INT_MACROS + FLOAT_MACROS + STRING_MACROS + NULL_MACROS:
        kind = INT if macro in INT_MACROS else FLT if macro in FLOAT_MACROS else PTR
        out.append(f"#ifdef {macro}")
        if macro in STRING_MACROS:
            out.append(f'  printf("{macro}=\\"%s\\"\\n", {macro});')
        else:
            out.append(_print_value(macro, macro, kind))
        out.append("#else")
        out.append(f'  printf("{macro}=<undefined>\\n");')
        out.append("#endif")
    for macro in PRESENCE_MACROS:
        out.append(f"#ifdef {macro}")
        out.append(f'  printf("defined({macro})=1\\n");')
        out.append("#else")
        out.append(f'  printf("defined({macro})=0\\n");')
        out.append("#endif")
    for expr in EXPRESSIONS:
        out.append(_print_value(expr, expr, INT))
    for struct, macro in INITIALIZERS.items():
        var = f"init_{struct}"
        out.append("  {")
        out.append(f"    {struct} {var} = {macro};")
        for field, kind in STRUCTS[struct]:
            out.append("  " + _print_value(f"{macro}.{field}", f"{var}.{field}", kind))
        out.append("  }")
    out.append("  return 0;")
    out.append("}")
    return "\n".join(out) + "\n"


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


# A function prototype: return type, name, parameter list, semicolon (attributes before it are skipped).
_PROTOTYPE = re.compile(r"(?<![\w*])((?:const\s+char\s*\*|ncclResult_t|void)\s*(p?nccl\w+)\s*\([^;{]*\)\s*;)")


def declared_functions(header: Path) -> dict[str, str]:
    """Function name -> its prototype text, for every function `header` declares."""
    return {m.group(2): m.group(1) for m in _PROTOTYPE.finditer(_strip_comments(header.read_text()))}


@pytest.fixture(scope="module")
def toolchain() -> dict[str, Path | str]:
    stock_inc, why = stock_nccl.stock_include_dir()
    if stock_inc is None:
        pytest.skip(why)
    cuda_inc, why = stock_nccl.cuda_include_dir()
    if cuda_inc is None:
        pytest.skip(why)
    cc = stock_nccl.compiler("c")
    cxx = stock_nccl.compiler("c++")
    if cc is None or cxx is None:
        pytest.skip("no host C/C++ compiler (cc/gcc, c++/g++) on PATH")
    return {"stock": stock_inc, "cuda": cuda_inc, "cc": cc, "cxx": cxx}


def _compile(cmd: list[str]) -> None:
    result = subprocess.run(cmd, capture_output=True, text=True)
    assert result.returncode == 0, f"{' '.join(cmd)} failed:\n{result.stdout}{result.stderr}"


def _build_and_run(tc: dict[str, Path | str], source: Path, include: Path, exe: Path) -> str:
    cmd = [str(tc["cc"]), "-std=gnu11", "-w", f"-I{include}", f"-I{tc['cuda']}", str(source), "-o", str(exe)]
    _compile(cmd)
    return subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout


def test_layouts_values_and_initializers_match_stock(
    toolchain: dict[str, Path | str], tmp_path: Path
) -> None:
    source = tmp_path / "dump_abi.c"
    source.write_text(generate_dump_source())
    stock = _build_and_run(toolchain, source, Path(toolchain["stock"]), tmp_path / "dump_stock")
    ours = _build_and_run(toolchain, source, OUR_INCLUDE, tmp_path / "dump_ours")
    assert stock.count("\n") > 250  # the dump did run
    if stock != ours:
        diff = difflib.unified_diff(
            stock.splitlines(), ours.splitlines(), "stock nccl.h", "include/nccl.h", lineterm=""
        )
        pytest.fail("ABI dump differs:\n" + "\n".join(diff))


def test_declares_exactly_stock_functions() -> None:
    stock_inc, why = stock_nccl.stock_include_dir()
    if stock_inc is None:
        pytest.skip(why)
    stock = set(declared_functions(stock_inc / "nccl.h"))
    ours = set(declared_functions(OUR_INCLUDE / "nccl.h"))
    assert len(stock) > 100, "the prototype parser found too few functions in stock nccl.h"
    assert not stock - ours, f"missing from include/nccl.h: {sorted(stock - ours)}"
    assert not ours - stock, f"not in stock nccl.h: {sorted(ours - stock)}"
    for name in stock:
        twin = name[1:] if name.startswith("p") else "p" + name
        assert twin in stock, f"{name} has no twin {twin} in stock nccl.h"


@pytest.mark.parametrize("language", ["c", "c++"])
def test_prototypes_agree_with_stock(toolchain: dict[str, Path | str], tmp_path: Path, language: str) -> None:
    """Redeclaring every stock prototype after including our header only compiles if the types agree."""
    stock = declared_functions(Path(toolchain["stock"]) / "nccl.h")
    # NCCL_OS_LINUX turns the ncclResetDebugInit macros into declarations in both headers.
    text = '#define NCCL_OS_LINUX 1\n#include "nccl.h"\n' + "\n".join(stock.values()) + "\n"
    # Taking each address needs a declaration in our header, since the redeclarations come after it.
    text += "void* const refs[] = {\n" + "".join(f"  (void*)&{name},\n" for name in sorted(stock)) + "};\n"
    source = tmp_path / ("redeclare.c" if language == "c" else "redeclare.cc")
    source.write_text(text)
    compiler = toolchain["cc"] if language == "c" else toolchain["cxx"]
    _compile(
        [
            str(compiler),
            "-c",
            "-Werror",
            "-Wno-deprecated-declarations",
            f"-I{OUR_INCLUDE}",
            f"-I{toolchain['cuda']}",
            str(source),
            "-o",
            str(tmp_path / "redeclare.o"),
        ]
    )


def test_header_is_valid_cxx(toolchain: dict[str, Path | str], tmp_path: Path) -> None:
    source = tmp_path / "use.cc"
    source.write_text(
        '#include "nccl.h"\n'
        "#include <type_traits>\n"
        'static_assert(std::is_same<decltype(&ncclAllReduce), decltype(&pncclAllReduce)>::value, "twin");\n'
        "int main() {\n"
        "  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;\n"
        "  ncclCollConfig_t coll = NCCL_COLLCONFIG_INITIALIZER;\n"
        "  ncclSimInfo_t sim = NCCL_SIM_INFO_INITIALIZER;\n"
        "  ncclEncryptionConfig_t enc = NCCL_ENCRYPTION_CONFIG_INITIALIZER;\n"
        "  ncclResetDebugInit();\n"
        "  cudaStream_t stream = nullptr;\n"
        "  __half h;\n"
        "  __nv_bfloat16 b;\n"
        "  (void)config; (void)coll; (void)sim; (void)enc; (void)stream; (void)h; (void)b;\n"
        "  return 0;\n"
        "}\n"
    )
    for std in ("c++11", "c++17"):
        _compile(
            [
                str(toolchain["cxx"]),
                f"-std={std}",
                "-c",
                "-Wall",
                "-Wextra",
                "-Werror",
                f"-I{OUR_INCLUDE}",
                f"-I{toolchain['cuda']}",
                str(source),
                "-o",
                str(tmp_path / "use.o"),
            ]
        )
