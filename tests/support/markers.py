"""What a test needs, worked out from what it uses, so lanes never depend on someone
remembering to add a decorator.

``tests/conftest.py`` calls :func:`kinds_of` for every collected test and adds the markers
(``postgres``, ``model``, ``process``, ``network``) and a timeout sized to the slowest of its
kinds (:func:`timeout_for`). A test is classified by

- its folder, the lane it was put in: ``tests/unit`` (no database, no model, no process),
  ``tests/stores`` (store-level, on both backends), ``tests/mcp`` (the server through real MCP
  clients in process), ``tests/process`` (spawned servers, the CLI, uvx, npx): every test under
  ``tests/process`` is ``process``. What a folder cannot say is found per test, as follows;
- its parameters and fixtures: the ``postgres`` backend or the ``postgres_url`` fixture
  means ``postgres``; the session ``embedder`` (which ``service``, ``server`` and ``client``
  depend on) means ``model``;
- the code it can reach: the names used by the test function and by its fixtures, followed
  through every function and class defined under ``tests/`` (helpers in ``tests/support``
  included). Reaching ``subprocess`` or ``StdioServerParameters`` means ``process``;
  reaching ``npx`` or the uv tools means ``network`` (the npm or Python package registry);
  without a backend parameter, ``open_postgres_store`` or ``"postgres_url"`` means ``postgres``.

Product code is not followed: a test that only calls Lore in-process stays in the fast lane.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# Names whose use means a process is started; from the standard library and the MCP SDK.
PROCESS_NAMES = frozenset(
    {"subprocess", "Popen", "StdioServerParameters", "multiprocessing", "create_subprocess_exec"}
)
# Functions in tests/ that fetch from a registry: npx (Node and npm packages), uv/uvx (PyPI).
NETWORK_NAMES = frozenset({"npx", "_uv_tool"})
POSTGRES_NAMES = frozenset({"postgres_url", "open_postgres_store"})
MODEL_FIXTURES = frozenset({"embedder"})
# The lanes a folder of tests/ says by itself, by the folder's name.
TESTS = Path(__file__).resolve().parents[1]
FOLDER_KINDS = {"process": frozenset({"process"})}

# Seconds a test of each kind may take, setup included (the first test of a session loads the
# model or starts pgserver); a test takes the largest of its kinds'. The slowest of each kind
# took about a tenth of this on two shared cores; the network ones download Node 22 or a
# wheel's dependencies on a cold cache.
TIMEOUT_S = {"": 60, "model": 120, "postgres": 180, "process": 300, "network": 600}


def timeout_for(kinds: set[str]) -> int:
    """The per-test timeout for a test of these kinds."""
    return max(TIMEOUT_S[k] for k in {"", *kinds})


def kinds_of(item: pytest.Item) -> set[str]:
    """The kinds (marker names) of one collected test."""
    kinds = folder_kinds(item)
    fixtures = set(getattr(item, "fixturenames", ()))
    params = _params(item)
    if "postgres" in params.values() or "postgres_url" in fixtures:
        kinds.add("postgres")
    if fixtures & MODEL_FIXTURES:
        kinds.add("model")
    names, strings = _reached(item)
    if names & PROCESS_NAMES:
        kinds.add("process")
    if names & NETWORK_NAMES:
        kinds |= {"network", "process"}
    if "backend" not in params and (names | strings) & POSTGRES_NAMES:
        # No backend parameter decides it, and the test's own code opens Postgres.
        kinds.add("postgres")
    return kinds


def folder_kinds(item: pytest.Item) -> set[str]:
    """The kinds the test's lane folder says (``tests/<lane>/...``); none for a test elsewhere."""
    path = getattr(item, "path", None)
    if path is None or not Path(path).resolve().is_relative_to(TESTS):
        return set()
    parts = Path(path).resolve().relative_to(TESTS).parts
    return set(FOLDER_KINDS.get(parts[0], ())) if len(parts) > 1 else set()


def _params(item: pytest.Item) -> dict[str, Any]:
    callspec = getattr(item, "callspec", None)
    return dict(callspec.params) if callspec is not None else {}


def _reached(item: pytest.Item) -> tuple[set[str], set[str]]:
    """The names and the identifier-like strings (``getfixturevalue("postgres_url")``) used by
    the test and its fixtures, through tests/ code."""
    roots: list[Any] = [getattr(item, "function", None)]
    info = getattr(item, "_fixtureinfo", None)
    for defs in getattr(info, "name2fixturedefs", {}).values():
        roots += [d.func for d in defs]
    return _walk(tuple(r for r in roots if r is not None))


_cache: dict[int, tuple[frozenset[str], frozenset[str]]] = {}


def _walk(roots: tuple[Any, ...]) -> tuple[set[str], set[str]]:
    """Names and identifier-like strings used by ``roots`` and what they call; only names
    (never strings) are followed to further functions and classes."""
    found: set[str] = set()
    found_strings: set[str] = set()
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        obj = inspect.unwrap(stack.pop())
        if id(obj) in seen or not _defined_in_tests(obj):
            continue
        seen.add(id(obj))
        if isinstance(obj, type):
            stack += [m for base in obj.__mro__ if _defined_in_tests(base) for m in vars(base).values()]
            continue
        code = getattr(obj, "__code__", None)
        if code is None:
            continue
        names, strings = _code_names(code)
        found |= names
        found_strings |= strings
        scope = getattr(obj, "__globals__", {})
        stack += [scope[n] for n in names if n in scope]
    return found, found_strings


def _defined_in_tests(obj: Any) -> bool:
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if not isinstance(obj, (types.FunctionType, type)):
        return False
    module = obj.__module__ or ""
    # This module names what it looks for; its own code is not a test's.
    return module.startswith("tests") and module != __name__


def _code_names(code: types.CodeType) -> tuple[frozenset[str], frozenset[str]]:
    key = id(code)
    if key not in _cache:
        codes = list(_nested(code))
        names = frozenset(n for c in codes for n in c.co_names)
        strings = frozenset(k for c in codes for k in c.co_consts if isinstance(k, str) and k.isidentifier())
        _cache[key] = (names, strings)
    return _cache[key]


def _nested(code: types.CodeType) -> Iterator[types.CodeType]:
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _nested(const)
