"""Every tool Lore can list: its function, its group and its annotations, in listing order.

The one source that the server, remote mode, the protocol extras and the tests read; a
tool's name is its function's.
``LORE_TOOLS`` picks groups, since every listed tool costs an agent context on every
turn, and a group is served by listing only its tools (``lore_mcp.tools.lore_tools``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp_types import ToolAnnotations

from lore_mcp.tools.activity import recent_activity
from lore_mcp.tools.curation import find_duplicates, keep_both, merge_lessons
from lore_mcp.tools.history import get_commit, history, revert_commit
from lore_mcp.tools.keys import create_key, list_keys, revoke_key
from lore_mcp.tools.lessons import (
    delete_lesson,
    downvote_lesson,
    get_lesson,
    list_lessons,
    recall_lessons,
    save_lesson,
    update_lesson,
    upvote_lesson,
)
from lore_mcp.tools.loop import ask_to_save, prompt_context, session_context
from lore_mcp.tools.structured import apply, plan, query_rows, schema
from lore_mcp.tools.transfer import export_lessons, import_lessons

# The hints every tool sets, each one deliberately (directories and clients read them to
# decide what to ask the person before a call). Lore only ever touches its own store, so no
# tool is open-world: none reaches the internet or any system beyond Lore's database.
# Idempotent means a second identical call has no further effect (deleting a lesson
# twice leaves it deleted; a second vote is a second vote).
READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
ADDITIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
)
EDITING = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
DESTRUCTIVE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
)


@dataclass(frozen=True)
class ToolSpec:
    """One tool: the function whose signature is its schema and whose docstring its
    description, with what the signature cannot say: its group, a title for people
    (directories and clients' tool pickers show it) and its hints."""

    function: Callable[..., Any]
    group: str
    title: str
    hints: ToolAnnotations

    @property
    def name(self) -> str:
        return self.function.__name__

    @property
    def annotations(self) -> ToolAnnotations:
        """The hints with the title, as ``tools/list`` carries them (``annotations.title``)."""
        return self.hints.model_copy(update={"title": self.title})


# In the order tools/list answers them.
TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec(save_lesson, "lessons", "Save a lesson", ADDITIVE),
    ToolSpec(recall_lessons, "lessons", "Recall lessons", READ_ONLY),
    ToolSpec(upvote_lesson, "lessons", "Upvote a lesson", ADDITIVE),
    ToolSpec(downvote_lesson, "lessons", "Downvote a lesson", ADDITIVE),
    ToolSpec(get_lesson, "lessons", "Get a lesson", READ_ONLY),
    ToolSpec(update_lesson, "lessons", "Update a lesson", EDITING),
    ToolSpec(delete_lesson, "lessons", "Delete a lesson", EDITING),
    ToolSpec(list_lessons, "lessons", "List lessons", READ_ONLY),
    ToolSpec(export_lessons, "lessons", "Export lessons", READ_ONLY),
    # Lessons whose ids are already there are skipped, so importing twice adds nothing more.
    ToolSpec(
        import_lessons,
        "lessons",
        "Import lessons",
        ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
        ),
    ),
    ToolSpec(schema, "structured", "Read the table schema", READ_ONLY),
    ToolSpec(plan, "structured", "Dry-run a table plan", READ_ONLY),
    ToolSpec(apply, "structured", "Apply a table plan", DESTRUCTIVE),
    ToolSpec(query_rows, "structured", "Query table rows", READ_ONLY),
    ToolSpec(history, "history", "List history", READ_ONLY),
    ToolSpec(get_commit, "history", "Show a commit", READ_ONLY),
    ToolSpec(revert_commit, "history", "Revert a commit", DESTRUCTIVE),
    # Off by default (not in DEFAULT_TOOL_GROUPS): an agent pays its listing only when asked for.
    ToolSpec(recent_activity, "activity", "Show recent activity", READ_ONLY),
    # Off by default too: what a person curating on the page (and an agent tidying) uses.
    ToolSpec(find_duplicates, "curation", "Find near-duplicate lessons", READ_ONLY),
    ToolSpec(keep_both, "curation", "Keep two similar lessons", EDITING),
    ToolSpec(merge_lessons, "curation", "Merge two lessons", DESTRUCTIVE),
    # Off by default too: the clients' hooks call them (LORE_TOOLS=...,loop; the Claude Code
    # plugin asks for it). Each records what it gave in the activity log, so none is read-only.
    ToolSpec(session_context, "loop", "Lessons for a session's start", ADDITIVE),
    ToolSpec(prompt_context, "loop", "Lessons matching a prompt", ADDITIVE),
    ToolSpec(ask_to_save, "loop", "Ask an agent to save a lesson", ADDITIVE),
    ToolSpec(create_key, "admin", "Create an API key", ADDITIVE),
    ToolSpec(list_keys, "admin", "List API keys", READ_ONLY),
    ToolSpec(revoke_key, "admin", "Revoke an API key", EDITING),
)
SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in TOOLS}

TOOL_GROUPS: dict[str, tuple[str, ...]] = {
    group: tuple(spec.name for spec in TOOLS if spec.group == group)
    for group in dict.fromkeys(spec.group for spec in TOOLS)
}
DEFAULT_TOOL_GROUPS = ("lessons", "structured", "history")

# The key tools: listed only to root API keys (see LoreServer.list_tools); they change
# nothing a resource shows.
ADMIN_TOOLS = frozenset(TOOL_GROUPS["admin"])
# Tools whose ``id`` argument names the one lesson they change.
LESSON_ID_TOOLS = frozenset({"update_lesson", "upvote_lesson", "downvote_lesson", "delete_lesson"})
