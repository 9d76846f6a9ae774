"""The shape of the Python package: no import cycle among mscclpp_nccl's modules (imports inside functions
count too), no module over 650 lines, each opening with a docstring, and no module importing another's
_private names."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "mscclpp_nccl"
MAX_LINES = 650


def module_files() -> dict[str, Path]:
    """Dotted module name -> file, for every .py under the package (not the built lib/)."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "lib":
            continue
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path) -> list[ast.ImportFrom | ast.Import]:
    return [n for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Import | ast.ImportFrom)]


def imported_modules(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules that `name` imports anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out: set[str] = set()
    for node in imports(name, path):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        else:
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - (node.level - 1)])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            # `from . import x` may name a submodule x.
            targets = [module, *(f"{module}.{a.name}" for a in node.names)]
        out.update(t for t in targets if t in known and t != name)
    return out


def import_graph() -> dict[str, set[str]]:
    files = module_files()
    known = set(files)
    return {name: imported_modules(name, path, known) for name, path in files.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        path.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_cycle_finder_finds_cycles() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]


def test_graph_sees_relative_and_lazy_imports() -> None:
    graph = import_graph()
    assert "mscclpp_nccl._library" in graph["mscclpp_nccl.binding"]
    assert "mscclpp_nccl.binding" in graph["mscclpp_nccl.bench.rank"]  # imported inside a method
    assert "mscclpp_nccl.bench.collectives" in graph["mscclpp_nccl.tune.candidates"]


def test_no_import_cycle() -> None:
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_no_module_is_long() -> None:
    long = {n: len(p.read_text().splitlines()) for n, p in module_files().items()}
    assert {n: lines for n, lines in long.items() if lines > MAX_LINES} == {}


def test_every_module_says_what_it_is_for() -> None:
    missing = [n for n, p in module_files().items() if not ast.get_docstring(ast.parse(p.read_text()))]
    assert missing == []


def test_no_module_imports_private_names() -> None:
    files = module_files()
    found = []
    for name, path in files.items():
        for node in imports(name, path):
            if isinstance(node, ast.ImportFrom) and node.module != "__future__":
                found += [f"{name}: {a.name}" for a in node.names if a.name.startswith("_")]
    assert found == []
