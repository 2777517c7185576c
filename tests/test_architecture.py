"""Hold the package layering that DESIGN.md describes, by reading the source.

The modules are found in the file tree (a new module or subpackage is covered the day
it lands) and every ``import`` in them is read with ``ast``, at module level and inside
functions alike: a function-local import that closes a loop is still a loop, only a
later one. Imports under ``if TYPE_CHECKING:`` never run, so they are left out: a type
annotation may name the class that uses it.

An edge ``a -> b`` means module ``a`` imports module ``b``. ``from p import name`` is an
edge to ``p.name`` when that is a module of ours, else to ``p``; importing a submodule
is not counted as importing its package's ``__init__``.
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Collection, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("lore_mcp", "stores")
# What stores must never import: it knows nothing of the MCP layer or of MCP itself.
FORBIDDEN_IN_STORES = ("lore_mcp", "mcp", "mcp_types")


def module_files(root: Path = ROOT) -> dict[str, Path]:
    """Every module of ``PACKAGES`` by dotted name, subpackages included."""
    found: dict[str, Path] = {}
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported_names(path: Path, module: str, modules: Collection[str] = ()) -> Iterator[tuple[str, int]]:
    """(dotted name, line) of every import that runs in ``path``. ``from p import n`` names
    ``p.n`` when that is one of ``modules``, else ``p``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    is_package = path.name == "__init__.py"
    for node in _runtime_nodes(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(node, module, is_package)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                yield (submodule if submodule in modules else base), node.lineno


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks."""
    stack: list[ast.AST] = [tree]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            stack.extend(node.orelse)
            continue
        stack.extend(ast.iter_child_nodes(node))


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    parts = module.split(".")
    anchor = parts if is_package else parts[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, node.module] if node.module else anchor)


def import_graph(root: Path = ROOT) -> dict[str, dict[str, int]]:
    """module -> {module of ours it imports: the line of the first such import}."""
    modules = module_files(root)
    graph: dict[str, dict[str, int]] = {name: {} for name in modules}
    for name, path in modules.items():
        for target, line in imported_names(path, name, modules):
            ours = _longest_known_prefix(target, modules)
            if ours is not None:
                graph[name][ours] = min(line, graph[name].get(ours, line))
    return graph


def _longest_known_prefix(target: str, modules: Collection[str]) -> str | None:
    """``import a.b.c`` runs ``a.b.c`` last; the deepest of ours it names is the edge."""
    parts = target.split(".")
    for end in range(len(parts), 0, -1):
        if ".".join(parts[:end]) in modules:
            return ".".join(parts[:end])
    return None


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """One loop (``[a, b, ..., a]``) per strongly connected component that has one."""
    found = []
    for component in _components(graph):
        start = min(component)
        if len(component) > 1 or start in graph[start]:
            found.append(_loop_through(start, component, graph))
    return sorted(found)


def _components(graph: dict[str, dict[str, int]]) -> list[set[str]]:
    """Tarjan's strongly connected components, iteratively (no recursion limit)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    result: list[set[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                result.append(component)
    return result


def _loop_through(start: str, component: set[str], graph: dict[str, dict[str, int]]) -> list[str]:
    """The shortest path from ``start`` back to itself inside ``component`` (breadth first)."""
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node]):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [*reversed(path), start]
                if child in component and child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"{start} has no loop inside its component")


def describe(loop: list[str], graph: dict[str, dict[str, int]]) -> str:
    steps = [f"{a} (line {graph[a][b]})" for a, b in itertools.pairwise(loop)]
    return " -> ".join([*steps, loop[-1]])


def test_the_modules_are_found_in_the_file_tree() -> None:
    modules = module_files()
    assert {"lore_mcp", "lore_mcp.cli.main", "stores", "stores.sqlite.lessons"} <= set(modules)
    assert all(path.suffix == ".py" for path in modules.values())


def test_no_module_of_lore_mcp_or_stores_is_part_of_an_import_cycle() -> None:
    graph = import_graph()
    loops = cycles(graph)
    assert not loops, "import cycles (each arrow: the importing module and the line):\n" + "\n".join(
        describe(loop, graph) for loop in loops
    )


def test_stores_imports_nothing_of_lore_mcp_or_mcp() -> None:
    offending = []
    for name, path in module_files().items():
        if name.split(".")[0] != "stores":
            continue
        for target, line in imported_names(path, name):
            top = target.split(".")[0]
            if top in FORBIDDEN_IN_STORES:
                offending.append(f"{path.relative_to(ROOT)}:{line} imports {target}")
    assert not offending, "stores must not know the MCP layer:\n" + "\n".join(sorted(set(offending)))


def test_the_cycle_finder_sees_function_local_imports_and_skips_type_checking(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "stores" / "a.py").write_text("from stores.b import thing\n")
    (tmp_path / "stores" / "b.py").write_text("def later():\n    from stores import a\n")
    (tmp_path / "lore_mcp" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lore_mcp.d import D\n"
    )
    (tmp_path / "lore_mcp" / "d.py").write_text("from . import c\n")
    graph = import_graph(tmp_path)
    assert cycles(graph) == [["stores.a", "stores.b", "stores.a"]]
    assert graph["lore_mcp.d"] == {"lore_mcp.c": 1}
