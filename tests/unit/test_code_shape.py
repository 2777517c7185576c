"""Issue 36's shape of the code: no function in lore_mcp or stores runs over 40 lines.

Counted from the ``def`` line (decorators aside) to the function's last line, docstring and
comments included: a function too long to read at once is split, not squeezed. The other half
of the rule, McCabe complexity at most 10, is ruff's C90 in pyproject.toml ``[tool.ruff.lint]``.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lore_mcp", "stores")
MAX_LINES = 40


def long_functions() -> list[str]:
    """Every function (methods, nested and async ones too) over MAX_LINES, as ``path:line name (n)``."""
    found = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    length = (node.end_lineno or node.lineno) - node.lineno + 1
                    if length > MAX_LINES:
                        found.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({length} lines)")
    return found


def test_no_function_in_lore_mcp_or_stores_is_over_40_lines() -> None:
    found = long_functions()
    assert found == [], f"{len(found)} functions over {MAX_LINES} lines:\n" + "\n".join(found)


def test_the_walk_sees_the_packages_and_measures_from_def_to_last_line() -> None:
    assert all((ROOT / package / "__init__.py").is_file() for package in PACKAGES)
    source = "@decorator\ndef f(\n    a,\n):\n    '''Doc.'''\n    return a\n"
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.FunctionDef)
    assert (node.end_lineno or 0) - node.lineno + 1 == 5  # from `def`, the decorator not counted
