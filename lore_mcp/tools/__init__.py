"""Lore's tools: each one typed function in the module of its group, listed by ``registry``.

Remote mode lists the same functions but forwards each call by name and arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Collection

from mcp.server.mcpserver.tools import Tool

from lore_mcp.tools.registry import SPECS, TOOLS


def lore_tools(groups: Collection[str]) -> list[Tool]:
    """The tools of ``groups``, in registry order, made once per process (about 8 ms a tool,
    130 ms a server) and shared, since a tool finds its services through the calling server."""
    return [_tool(spec.name) for spec in TOOLS if spec.group in groups]


@functools.cache
def _tool(name: str) -> Tool:
    """Tool ``name`` as the SDK makes it, once per process (see ``lore_tools``)."""
    spec = SPECS[name]
    return Tool.from_function(
        spec.function,
        title=spec.title,
        description=_as_listed(spec.function.__doc__),
        annotations=spec.annotations,
    )


def _as_listed(doc: str | None) -> str:
    """A docstring as clients have always seen it: the SDK sends it raw, and the tools were
    methods, so lines after the first keep a method's indent."""
    first, *rest = (doc or "").split("\n")
    return "\n".join([first, *(f"    {line}" if line else line for line in rest)])
