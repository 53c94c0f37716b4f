"""The shape the library keeps (issue 26): short files, short functions and no
import circle between its modules. An exception states its reason at its top:
a file's first comment line ``# Longer than 600 lines because ...``, a
function's first body line ``# Longer than 120 lines because ...``."""

from __future__ import annotations

import ast
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "gnncore"
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 120
REASON = "# Longer than"


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def _has_reason(lines: list[str], start: int, stop: int) -> bool:
    """Whether a ``# Longer than ... because`` line is among ``lines[start:stop]``."""
    return any(line.strip().startswith(REASON) and "because" in line for line in lines[start:stop])


def test_no_file_is_longer_than_600_lines_without_a_reason() -> None:
    long = []
    for path in _sources():
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_FILE_LINES and not _has_reason(lines, 0, 5):
            long.append(f"{path.relative_to(ROOT)}: {len(lines)} lines")
    assert not long, "files over 600 lines with no reason at their top:\n" + "\n".join(long)


def test_no_function_is_longer_than_120_lines_without_a_reason() -> None:
    long = []
    for path in _sources():
        text = path.read_text(encoding="utf-8")
        lines = text.splitlines()
        for node in ast.walk(ast.parse(text)):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            body_start = node.body[0].lineno - 1  # the docstring or first statement
            if length > MAX_FUNCTION_LINES and not _has_reason(lines, node.lineno, body_start + 1):
                where = f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
                long.append(f"{where}: {length} lines")
    assert not long, "functions over 120 lines with no reason:\n" + "\n".join(long)


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(root: str) -> None:
        # iterative, so a deep import chain cannot reach the recursion limit
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            module, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    imported = sorted(graph.find_modules_directly_imported_by(child))
                    work.append((child, iter(imported)))
                elif child in on_stack:
                    low[module] = min(low[module], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[module])
            if low[module] == index[module]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == module:
                        break
                if len(component) > 1:
                    found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_circle_between_gnncore_modules() -> None:
    """Imports inside functions count too: a circle held together by a lazy
    import is still a circle. Imports under ``TYPE_CHECKING`` do not run."""
    graph = grimp.build_graph("gnncore", exclude_type_checking_imports=True, cache_dir=None)
    assert _cycles(graph) == []


def test_the_circle_finder_finds_a_circle() -> None:
    graph = grimp.ImportGraph()
    for name in ("pkg", "pkg.a", "pkg.b", "pkg.c"):
        graph.add_module(name)
    graph.add_import(importer="pkg.a", imported="pkg.b")
    graph.add_import(importer="pkg.b", imported="pkg.c")
    graph.add_import(importer="pkg.c", imported="pkg.a")
    assert _cycles(graph) == [["pkg.a", "pkg.b", "pkg.c"]]
    graph.remove_import(importer="pkg.c", imported="pkg.a")
    assert _cycles(graph) == []
