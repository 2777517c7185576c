"""Lore's tools, a module per group, each registering its tools on a server.

``registry`` names every tool with its group and annotations; ``lessons``,
``transfer``, ``structured``, ``history`` and ``keys`` define the tools, each bound
to a small backend protocol; ``resources`` and ``prompts`` add the rest of what a
server offers. A tool group is served by registering only its tools.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from mcp.server.mcpserver.tools import Tool

from lore_mcp.tools import history, lessons, structured, transfer
from lore_mcp.tools.history import HistoryBackend
from lore_mcp.tools.lessons import LessonsBackend
from lore_mcp.tools.structured import TablesBackend
from lore_mcp.tools.transfer import TransferBackend


@dataclass(frozen=True)
class Backends:
    """What answers the tools of every group but ``admin`` (the key tools have their own)."""

    lessons: LessonsBackend
    transfer: TransferBackend
    tables: TablesBackend
    commits: HistoryBackend


def lore_tools(backends: Backends, groups: Collection[str]) -> list[Tool]:
    """The tools of ``groups`` (but ``admin``), in the registry's order, bound to ``backends``."""
    return [
        *lessons.tools_for(backends.lessons, groups),
        *transfer.tools_for(backends.transfer, groups),
        *structured.tools_for(backends.tables, groups),
        *history.tools_for(backends.commits, groups),
    ]
