"""Prompts that start the two habits Lore is for: recall before a task, save after one."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer


def add_prompts(server: MCPServer) -> None:
    """Register ``recall_before_task`` and ``record_lesson`` on ``server``."""

    @server.prompt(
        name="recall_before_task",
        description="Before starting a task, recall what earlier work learned about it.",
    )
    def recall_before_task(task: str) -> str:
        return (
            f"Before you start on this task, call recall_lessons with a query describing it:\n\n{task}\n\n"
            "Read the lessons that come back (best first). Apply what fits, say which lesson you used, "
            "and upvote_lesson the ones that helped; downvote_lesson any that turn out wrong or stale."
        )

    @server.prompt(
        name="record_lesson",
        description="After solving something non-obvious, save it as a lesson for next time.",
    )
    def record_lesson(what_happened: str = "") -> str:
        detail = f"\n\nWhat happened:\n{what_happened}" if what_happened else ""
        return (
            "Save what you just learned with save_lesson, so you and other agents do not solve it twice. "
            "problem: the symptom as someone would first meet it (error text, what failed). "
            "resolution: what fixed it and why. context: versions, stack, constraints. "
            "tags: a few short labels. confidence: how sure you are (0..1). Never include secrets; "
            "Lore redacts the ones it recognises." + detail
        )
