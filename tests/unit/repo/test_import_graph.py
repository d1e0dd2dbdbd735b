"""The tpu_rl package has no import cycle: neither among its module-level imports (a cycle
there breaks an import) nor counting the imports inside functions (where a task runs). Imports
under `if TYPE_CHECKING:` do not count.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PACKAGE = "tpu_rl"
ROOT = REPO / "plugins" / PACKAGE


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def module_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Imports run when the module is imported: not in functions or TYPE_CHECKING blocks."""
    found: list[ast.Import | ast.ImportFrom] = []
    pending: list[ast.stmt] = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.append(node)
        elif isinstance(node, ast.If):
            if not is_type_checking(node.test):
                pending += node.body
            pending += node.orelse
        elif isinstance(node, (ast.Try, ast.With)):
            pending += node.body
            pending += getattr(node, "orelse", []) + getattr(node, "finalbody", [])
            for handler in getattr(node, "handlers", []):
                pending += handler.body
        elif isinstance(node, ast.ClassDef):
            pending += node.body
    return found


def targets(node: ast.Import | ast.ImportFrom, current: str, modules: set[str]) -> set[str]:
    """The package's modules an import statement loads (a package's __init__ included)."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = current.split(".")
            is_package = (ROOT.parent / Path(*package) / "__init__.py").exists()
            anchor = package if is_package else package[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        names = [base] + [f"{base}.{alias.name}" for alias in node.names]
    loaded: set[str] = set()
    for name in names:
        parts = name.split(".")
        for end in range(1, len(parts) + 1):  # importing a.b.c runs a, a.b and a.b.c
            if (prefix := ".".join(parts[:end])) in modules:
                loaded.add(prefix)
    loaded.discard(current)
    return loaded


def every_import(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    """Every import in the module, inside functions too (TYPE_CHECKING blocks excepted)."""
    skipped = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and is_type_checking(node.test)
        for stmt in node.body
        for child in ast.walk(stmt)
    }
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and id(node) not in skipped
    ]


def import_graph(imports=module_level_imports) -> dict[str, set[str]]:
    paths = {module_name(p): p for p in ROOT.rglob("*.py")}
    modules = set(paths)
    graph: dict[str, set[str]] = {}
    for name, path in paths.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        graph[name] = set()
        for node in imports(tree):
            graph[name] |= targets(node, name, modules)
    return graph


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One cycle per strongly connected component of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [cycle_in(graph, set(component)) for component in components]


def cycle_in(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(graph[node] & component):
                if nxt == start:
                    return [*paths[node], start]
                if nxt not in paths:
                    paths[nxt] = [*paths[node], nxt]
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"no cycle through {start}")


def test_the_package_has_no_import_cycle():
    cycles = find_cycles(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_no_cycle_either_through_imports_made_where_a_task_runs():
    """A function-level import that closes a circle still ties the two modules together: the
    one must be read to understand the other."""
    cycles = find_cycles(import_graph(every_import))
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_the_graph_sees_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert find_cycles(graph) == [["a", "b", "c", "a"]]
