"""Makes the cffi declarations of mscclpp_nccl/_cdef.py from include/nccl.h, so that the binding declares
the library's whole API and cannot drift from it (tests/test_binding_api.py regenerates and compares):

    python -m mscclpp_nccl.binding_gen [include/nccl.h] > mscclpp_nccl/_cdef.py

The header is plain C: comments and preprocessor lines go, object-like macros with integer values are
substituted (the initializer macros are not declarations), the profiling aliases (pnccl*) go, and CUDA's
stream and event handles become void pointers, so that cffi needs no CUDA header."""

from __future__ import annotations

import re
import sys
from pathlib import Path

HEADER = Path(__file__).resolve().parent.parent / "include" / "nccl.h"
_KNOWN = {"INT_MIN": "(-2147483647 - 1)", "INT_MAX": "2147483647"}


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def _macros_and_code(text: str) -> tuple[dict[str, str], list[str]]:
    """The object-like macros (name -> value text) and the lines that are not preprocessor lines."""
    macros: dict[str, str] = {}
    code: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.lstrip().startswith("#"):
            full = line
            while full.endswith("\\") and i + 1 < len(lines):
                i += 1
                full = full[:-1] + " " + lines[i]
            m = re.match(r"\s*#\s*define\s+(\w+)\s+(.+)$", full)
            if m and "(" not in m.group(1):
                macros[m.group(1)] = m.group(2).strip()
        else:
            code.append(line)
        i += 1
    return macros, code


def _integer_macros(macros: dict[str, str]) -> dict[str, str]:
    """The macros whose values are integer expressions of literals and other such macros."""
    known = dict(_KNOWN)
    changed = True
    while changed:
        changed = False
        for name, value in macros.items():
            if name in known:
                continue
            expanded = re.sub(r"\b[A-Za-z_]\w*\b", lambda m: known.get(m.group(0), m.group(0)), value)
            if re.fullmatch(r"[\s0-9xXa-fA-FuUlL()+\-*<>|&~]+", expanded):
                known[name] = f"({expanded})" if not re.fullmatch(r"-?\w+", expanded) else expanded
                changed = True
    return known


def _top_level_statements(body: str) -> list[str]:
    """The text between semicolons outside braces (a struct's fields stay in its typedef)."""
    out, depth, start = [], 0, 0
    for i, c in enumerate(body):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == ";" and depth == 0:
            if body[start:i].strip():
                out.append(body[start:i])
            start = i + 1
    return out


def generate(header: Path = HEADER) -> str:
    """The text of mscclpp_nccl/_cdef.py."""
    macros, code = _macros_and_code(_strip_comments(header.read_text()))
    values = _integer_macros(macros)
    body = "\n".join(code)
    body = re.sub(r'extern\s+"C"\s*\{', "", body)
    # The closing brace of extern "C": a brace alone on its line, outside any declaration.
    body = re.sub(r"^\}\s*$", "", body, flags=re.M)
    # Attribute macros (deprecation notes) go; integer macros become their values.
    attributes = {name for name, value in macros.items() if value.startswith("__attribute__")}
    body = re.sub(
        r"\b[A-Z_][A-Z0-9_]*\b",
        lambda m: "" if m.group(0) in attributes else values.get(m.group(0), m.group(0)),
        body,
    )
    # sizeof of an enum (ncclMaxRedOp's definition) is an int's.
    enums = set(re.findall(r"typedef\s+enum\b[^{]*\{[^}]*\}\s*(\w+)\s*;", body))
    body = re.sub(r"sizeof\s*\(\s*(\w+)\s*\)", lambda m: "4" if m.group(1) in enums else m.group(0), body)
    body = re.sub(r"\bcudaStream_t\b", "void*", body)
    body = re.sub(r"\bcudaEvent_t\b", "void*", body)
    # Declarations, one per top-level statement; the profiling aliases (pncclX) declare nothing new.
    statements = [" ".join(s.split()) + ";" for s in _top_level_statements(body)]
    statements = [s for s in statements if not re.search(r"\bpnccl\w+\s*\(", s)]
    lines = [
        "# ruff: noqa: E501  (one C declaration a line, as generated)",
        '"""The cffi declarations of the NCCL API, made from include/nccl.h by mscclpp_nccl.binding_gen:',
        'do not edit; run `python -m mscclpp_nccl.binding_gen > mscclpp_nccl/_cdef.py`."""',
        "",
        'CDEF = """',
        *statements,
        '"""',
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    sys.stdout.write(generate(Path(args[0]) if args else HEADER))
    return 0


if __name__ == "__main__":
    sys.exit(main())
