"""Lore's tools: each one typed function in the module of its group.

``registry`` lists every tool function with its group and annotations; ``lessons``,
``transfer``, ``structured``, ``history`` and ``keys`` define them (each reaches its
services and caller through ``context``); ``resources`` and ``prompts`` add the rest
of what a server offers. A group is served by listing only its tools, and remote mode
lists the same functions but forwards each call by name and arguments.
"""

from __future__ import annotations

import functools
from collections.abc import Collection

from mcp.server.mcpserver.tools import Tool

from lore_mcp.tools.registry import SPECS, TOOLS


def lore_tools(groups: Collection[str]) -> list[Tool]:
    """The tools of ``groups``, in the registry's order.

    Making a tool builds a pydantic model of its arguments and JSON schemas from its
    signature, about 8 ms a tool and 130 ms a server; every server made in one process
    (the test suite makes one per test) shares the tools made for the first, since a
    tool finds its services through the server that calls it.
    """
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
    """A tool's docstring as clients have always listed it: the tools were methods, and the SDK
    sends a docstring raw, so every line after the first keeps a method's deeper indent."""
    first, *rest = (doc or "").split("\n")
    return "\n".join([first, *(f"    {line}" if line else line for line in rest)])
