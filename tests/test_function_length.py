"""CPU test that no function in the C++/CUDA sources (native/ and shim/: .h, .cc, .cu, .cuh) is 80 lines
or longer, counted from the line where its signature starts to its closing brace. A long function hides
its schedule: the order of its steps, and which of them can fail or wait, no longer fits on a screen, so
the limit asks for named helpers instead.

The sources are clang-formatted, which keeps the parser small: it blanks out comments, string and
character literals and preprocessor lines, then counts braces. A brace opened at namespace or class scope
after a signature opens a function; everything up to its matching brace (lambdas, local structs, blocks)
belongs to that function. A signature starts on the last line of its declaration at the declaration's
own indentation, so a `template <...>` line above it is not counted and a signature continued on deeper
lines (a `__launch_bounds__` kernel's, a constructor's initializer list) is."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCE_DIRS = ("native", "shim")
SUFFIXES = {".h", ".cc", ".cu", ".cuh"}
MAX_LINES = 80  # a function of this many lines or more is reported

# Words whose parenthesised argument comes before a function's name, not after it.
ATTRIBUTES = {"__launch_bounds__", "__attribute__", "__align__", "__declspec", "alignas", "decltype"}
ACCESS_LABEL = re.compile(r"\b(public|private|protected)\s*:(?!:)")
OPERATOR = re.compile(r"[\w:~]*?\boperator\b\s*(\(\s*\)|\[\s*\]|[^\s(]+)")


@dataclass(frozen=True)
class Function:
    name: str
    line: int  # 1-based line of the signature's start
    lines: int  # from that line to the closing brace, both included


def blank_out(source: str) -> str:
    """`source` with preprocessor lines, comments and literals turned into spaces (newlines kept), so that
    every brace left is code and every offset still has its line."""
    out = list(source)
    i = 0
    line_start = True  # only whitespace since the last newline: a '#' here starts a directive
    while i < len(source):
        end = _ignored_end(source, i, line_start)
        if end is None:
            line_start = source[i] == "\n" or (line_start and source[i].isspace())
            i += 1
            continue
        out[i:end] = ["\n" if c == "\n" else " " for c in source[i:end]]
        i, line_start = end, False
    return "".join(out)


def _ignored_end(source: str, i: int, line_start: bool) -> int | None:
    """Where the directive, comment or literal that starts at `i` ends, or None when code starts there."""
    if line_start and source[i] == "#":
        end = source.find("\n", i)
        while end > 0 and source[end - 1] == "\\":  # a directive runs on across escaped newlines
            end = source.find("\n", end + 1)
        return len(source) if end < 0 else end
    if source.startswith("//", i):
        end = source.find("\n", i)
        return len(source) if end < 0 else end
    if source.startswith("/*", i):
        end = source.find("*/", i + 2)
        return len(source) if end < 0 else end + 2
    if source[i] == '"' and source[i - 1 : i] == "R":  # R"delimiter(...)delimiter"
        delimiter = source[i + 1 : source.index("(", i)]
        return source.index(")" + delimiter + '"', i) + len(delimiter) + 2
    if source[i] == '"' or (source[i] == "'" and not _in_number(source, i)):
        end = i + 1
        while end < len(source) and source[end] != source[i]:
            end += 2 if source[end] == "\\" else 1
        return min(end + 1, len(source))
    return None


def _in_number(source: str, i: int) -> bool:
    """Whether the quote at `i` is a digit separator (0x3142'4e4d) rather than a character literal."""
    word = re.search(r"[\w.']*$", source[max(0, i - 40) : i])
    return bool(word and word.group()[:1].isdigit())


DECLARING = ("namespace", "class")  # scopes whose braces open declarations


@dataclass
class _Scope:
    # "namespace" or "class", a "function", "other" (a braced declaration: an enum, an initializer), or
    # "inner" (a brace inside a body, or inside a declaration's parentheses)
    kind: str
    line: int = 0  # a function's first line, 0-based
    column: int = 0  # the column where that line's text starts
    name: str = ""


def functions(source: str) -> list[Function]:
    """The functions defined at namespace or class scope in `source`, in the order they end."""
    code = blank_out(source)
    line_starts = [0] + [i + 1 for i, c in enumerate(code) if c == "\n"]
    found: list[Function] = []
    stack = [_Scope("namespace")]
    header_start = 0  # where the declaration that the next brace may open begins
    for pos, c in enumerate(code):
        if c not in "{};":
            continue
        if c == "{":
            declaration = code[header_start:pos] if stack[-1].kind in DECLARING else None
            if declaration is None or declaration.count("(") > declaration.count(")"):
                stack.append(_Scope("inner"))
                continue  # part of a body, or of a default argument: the declaration goes on
            stack.append(_open(code, header_start, pos, line_starts))
        elif c == "}":
            scope = stack.pop()
            if scope.kind == "inner":
                continue
            if scope.kind == "function":
                found.append(_close(scope, code, pos, line_starts))
        if stack[-1].kind in DECLARING:
            header_start = pos + 1
    return found


def _line_of(pos: int, line_starts: list[int]) -> int:
    """0-based line of offset `pos`."""
    return bisect.bisect_right(line_starts, pos) - 1


def _open(code: str, start: int, brace: int, line_starts: list[int]) -> _Scope:
    """The scope opened by the brace at `brace`, whose declaration is the text from `start`."""
    header = ACCESS_LABEL.sub(lambda m: " " * len(m.group()), code[start:brace]).split("\n")
    first = _line_of(start, line_starts)
    columns = {}  # header line -> the column where its text starts
    for index, text in enumerate(header):
        if text.strip():
            offset = start - line_starts[first] if index == 0 else 0
            columns[index] = offset + len(text) - len(text.lstrip())
    if not columns:
        return _Scope("other")
    # The signature starts on the last line at the declaration's own indentation: continuation lines are
    # deeper, and a `template <...>` line or a macro call above it is as deep.
    column = min(columns.values())
    index = max(i for i, c in columns.items() if c == column)
    signature = "\n".join(header[index:]).strip()
    kind = _kind(signature)
    if kind != "function":
        return _Scope(kind)
    return _Scope("function", first + index, column, _name(signature))


def _kind(signature: str) -> str:
    if re.match(r"(inline\s+)?namespace\b", signature) or signature == "extern":
        return "namespace"
    if re.match(r"(template\s*<.*>\s*)?(class|struct|union)\b", signature, re.DOTALL):
        return "class"
    # "operator=" or "operator()" must not read as an initializer or as the parameters.
    masked = OPERATOR.sub(lambda m: m.group()[: m.start(1) - m.start()] + "_" * len(m.group(1)), signature)
    depth, has_parameters = 0, False
    for c in masked:
        if c in "([":
            has_parameters = has_parameters or c == "("
            depth += 1
        elif c in ")]":
            depth -= 1
        elif c == "=" and depth == 0:
            return "other"  # an initialized variable, lambdas included
    return "function" if has_parameters else "other"


def _name(signature: str) -> str:
    operator = OPERATOR.search(signature)
    if operator:
        return re.sub(r"\s+", "", operator.group())
    for paren in _outer_parens(signature):
        before = signature[:paren].rstrip()
        if before.endswith(">"):  # explicit template arguments: f<T>(...)
            depth = 0
            for i in range(len(before) - 1, -1, -1):
                depth += {">": 1, "<": -1}.get(before[i], 0)
                if depth == 0:
                    before = before[:i].rstrip()
                    break
        word = re.search(r"[\w:~]*$", before)
        name = word.group() if word else ""
        if name and name.split("::")[-1] not in ATTRIBUTES:
            return name
    return "?"


def _outer_parens(text: str) -> list[int]:
    """Offsets of the opening parentheses in `text` that are not inside other parentheses."""
    found, depth = [], 0
    for i, c in enumerate(text):
        if c == "(":
            found += [i] if depth == 0 else []
            depth += 1
        elif c == ")":
            depth -= 1
    return found


def _close(scope: _Scope, code: str, brace: int, line_starts: list[int]) -> Function:
    end = _line_of(brace, line_starts)
    before = code[line_starts[end] : brace]
    if not before.strip() and len(before) != scope.column:
        # clang-format puts a body's closing brace under its signature: anything else means this
        # parser misread the file, and a silent misreading would hide long functions.
        raise ValueError(f"line {end + 1}: closing brace of {scope.name} (line {scope.line + 1}) misaligned")
    return Function(scope.name, scope.line + 1, end - scope.line + 1)


def sources() -> list[Path]:
    return sorted(
        path for folder in SOURCE_DIRS for path in (ROOT / folder).rglob("*") if path.suffix in SUFFIXES
    )


def long_functions(path: Path, source: str) -> list[str]:
    """`path:line name (N lines)` for each function of `source` that is MAX_LINES lines or longer."""
    try:
        found = functions(source)
    except ValueError as error:
        raise ValueError(f"{path}: {error}") from None
    return [f"{path}:{f.line} {f.name} ({f.lines} lines)" for f in found if f.lines >= MAX_LINES]


def test_no_function_reaches_the_limit() -> None:
    offenders = []
    for path in sources():
        offenders += long_functions(path.relative_to(ROOT), path.read_text(encoding="utf-8"))
    assert not offenders, f"functions of {MAX_LINES} lines or more (split them):\n" + "\n".join(offenders)


def test_the_scan_sees_the_sources() -> None:
    # Guards against a scan that passes because it found nothing.
    assert len(sources()) > 50
    parsed = functions((ROOT / "native/common/json.cc").read_text(encoding="utf-8"))
    assert {"JsonValue::asBool", "parseValue", "parseLiteral", "parseJson"} <= {f.name for f in parsed}


def _body(lines: int) -> str:
    return "".join(f"  x += {i};\n" for i in range(lines))


def test_a_long_function_is_reported() -> None:
    source = "namespace a {\n\nint shortOne() { return 1; }\n\nint longOne() {\n" + _body(83) + "}\n\n}\n"
    assert functions(source) == [Function("shortOne", 3, 1), Function("longOne", 5, 85)]
    assert long_functions(Path("f.cc"), source) == ["f.cc:5 longOne (85 lines)"]


def test_braces_inside_a_function_belong_to_it() -> None:
    source = (
        "// A comment with a brace {\n"
        "int outer(int n) {\n"
        "  struct Local {\n"
        "    int f() { return 1; }\n"
        "  };\n"
        "  auto lambda = [&](int i) {\n"
        '    const char* text = "}}} \\" {";\n'
        "    char brace = '}';  /* } */\n"
        "    return i + 0x3142'4e4d;\n"
        "  };\n"
        "#define BRACE { \\\n"
        "  {\n"
        "  return lambda(n) + Local().f();\n"
        "}\n"
        "int after() { return 2; }\n"
    )
    assert functions(source) == [Function("outer", 2, 13), Function("after", 15, 1)]


def test_signatures_in_the_formatted_shapes() -> None:
    source = (
        "template <typename T>\n"
        "__global__ void __launch_bounds__(256, 1)\n"
        "    kernel(T* data, int n = int{3}) {\n"
        "  data[0] = n;\n"
        "}\n"
        "\n"
        "class Parser {\n"
        " public:\n"
        "  explicit Parser(int limit) : limit_(limit) {}\n"
        "  bool operator==(const Parser& other) const {\n"
        "    return limit_ == other.limit_;\n"
        "  }\n"
        "\n"
        " private:\n"
        "  enum class Kind { kA, kB };\n"
        "  static constexpr int kTable[] = {1, 2};\n"
        "  int limit_ = 0;\n"
        "};\n"
        "\n"
        'extern "C" int Parser::apply(int x) {\n'
        "  return x;\n"
        "}\n"
    )
    assert functions(source) == [
        Function("kernel", 2, 4),
        Function("Parser", 9, 1),
        Function("operator==", 10, 3),
        Function("Parser::apply", 20, 3),
    ]


def test_a_misread_file_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"f\.cc: line 3: closing brace of f "):
        long_functions(Path("f.cc"), "int f() {\n  return 1;\n  }\n")
