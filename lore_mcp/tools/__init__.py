"""Lore's tools: each one typed function in the module of its group, listed by ``registry``.

Remote mode lists the same functions but forwards each call by name and arguments."""

from __future__ import annotations

import functools
from collections.abc import Collection

from mcp.server.mcpserver.tools import Tool, ToolManager

from lore_mcp.tools.registry import SPECS, TOOLS


class LoreTools(ToolManager):
    """The SDK's tool manager over the tools of ``groups``, each made on first use (about 8 ms a tool):
    made all at once they held back the ``initialize`` answer, and a first call needs only its own."""

    def __init__(self, groups: Collection[str]) -> None:
        super().__init__()
        self.names = dict.fromkeys(spec.name for spec in TOOLS if spec.group in groups)

    def get_tool(self, name: str) -> Tool | None:
        return _tool(name) if name in self.names else super().get_tool(name)

    def list_tools(self) -> list[Tool]:  # registry order, then any added with the SDK's add_tool
        return [_tool(name) for name in self.names] + super().list_tools()


@functools.cache
def _tool(name: str) -> Tool:
    """Tool ``name`` as the SDK makes it, once per process and shared by every server, since a tool
    finds its services through the calling server."""
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
