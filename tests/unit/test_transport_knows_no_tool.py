"""The transport knows no tool by name (DESIGN.md): what a tool is (heavy, what it changes, its
deadline advice) is declared in its registry entry and read from there.

Checked on the source of ``lore_mcp/transport``, docstrings and comments aside: no string names
a tool (exactly, or as a word when the name is a compound like ``revoke_key``), and no
identifier is a compound tool name. Single-word tool names (``schema``, ``plan``, ``apply``,
``history``) are plain English and plain variable names, so only a string that is exactly one
of them counts.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from lore_mcp.tools.registry import SPECS, STATS_URI, TOOLS
from lore_mcp.tools.resources import SCHEMA_URI, lesson_uri

TRANSPORT = Path(__file__).resolve().parents[2] / "lore_mcp" / "transport"


def docstring_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                lines.update(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def tool_names_in(path: Path) -> list[str]:
    source = path.read_text(encoding="utf-8")
    skip = docstring_lines(ast.parse(source))
    found = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.start[0] in skip:
            continue
        for spec in TOOLS:
            compound = "_" in spec.name
            if token.type == tokenize.NAME and compound and token.string == spec.name:
                found.append(f"{path.name}:{token.start[0]} identifier {spec.name}")
            elif token.type in (tokenize.STRING, getattr(tokenize, "FSTRING_MIDDLE", -1)):
                text = token.string.strip("\"'rbf")
                if text == spec.name or (compound and re.search(rf"\b{spec.name}\b", token.string)):
                    found.append(f"{path.name}:{token.start[0]} string {spec.name}")
    return found


def test_no_tool_is_named_in_the_transport() -> None:
    sources = sorted(TRANSPORT.rglob("*.py"))
    assert len(sources) > 10
    assert [hit for path in sources for hit in tool_names_in(path)] == []


def test_the_check_finds_a_tool_named_in_code(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text('"""Docstring naming revoke_key and plan is fine."""\nX = {"plan", "revoke_key"}\n')
    assert tool_names_in(planted) == ["planted.py:2 string plan", "planted.py:2 string revoke_key"]


def test_each_tool_declares_what_it_changes() -> None:
    """The change notices that ``protocol_extras`` published before the traits moved here."""
    lesson = lesson_uri("01ABC")
    assert SPECS["save_lesson"].changes({}, {"id": "01ABC"}) == {lesson, STATS_URI}
    for name in ("update_lesson", "upvote_lesson", "downvote_lesson", "delete_lesson"):
        assert SPECS[name].changes({"id": "01ABC"}, {}) == {lesson, STATS_URI}
        assert SPECS[name].changes({}, {}) is None  # cannot tell which: any
    imported = {"lessons": [{"id": "01ABC"}, {"problem": "no id"}, "junk"]}
    assert SPECS["import_lessons"].changes(imported, {}) == {lesson, STATS_URI}
    assert SPECS["apply"].changes({}, {}) == {SCHEMA_URI, STATS_URI}
    for name in ("create_key", "revoke_key", "list_keys", "recall_lessons", "plan", "schema"):
        assert SPECS[name].changes({"id": "01ABC"}, {"id": "01ABC"}) == frozenset()
    for name in ("revert_commit", "merge_lessons", "keep_both", "session_context"):
        assert SPECS[name].changes({}, {}) is None


def test_heavy_tools_and_their_advice() -> None:
    heavy = {spec.name for spec in TOOLS if spec.heavy}
    assert heavy == {"apply", "plan", "import_lessons", "revert_commit", "query_rows", "export_lessons"}
    assert "smaller" in SPECS["plan"].advice and "filter" in SPECS["query_rows"].advice
    assert SPECS["save_lesson"].advice == "The server was busy; try again shortly."
