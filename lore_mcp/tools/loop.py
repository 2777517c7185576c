"""The agent-loop tools the clients' hooks call, answering as Claude Code hook output, so an
``mcp_tool`` hook injects with no process per prompt; ``{}`` when nothing fits."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import Context
from pydantic import Field

from lore_mcp.tools.context import Project, Text, call_of

SessionId = Annotated[str, Field(min_length=1, max_length=200, description="The client's id of the session.")]
Name = Annotated[str | None, Field(max_length=200)]


async def session_context(
    ctx: Context,
    session_id: SessionId,
    repository: Annotated[Name, Field(description="The repository's name, if the session is in one.")] = None,
    branch: Annotated[Name, Field(description="Its checked-out branch.")] = None,
    project: Project = None,
) -> dict[str, Any]:
    """For hooks at session start: the project's best lessons and those about the repository and
    branch, within the server's budget, as a Claude Code hook answer."""
    call = call_of(ctx)
    return await call.services.loop.answer(
        "session_context",
        session_id=session_id,
        repository=repository,
        branch=branch,
        project=project,
        who=call.who,
    )


async def prompt_context(
    ctx: Context,
    prompt: Annotated[Text, Field(description="The person's prompt, as the hook received it.")],
    session_id: SessionId,
    project: Project = None,
) -> dict[str, Any]:
    """For hooks on each prompt: lessons that clearly match it and were not given earlier in the
    session, as a Claude Code hook answer; {} when none does."""
    call = call_of(ctx)
    return await call.services.loop.answer(
        "prompt_context", prompt=prompt, session_id=session_id, project=project, who=call.who
    )


async def ask_to_save(
    ctx: Context,
    session_id: SessionId,
    signal: Annotated[
        str, Field(min_length=1, max_length=500, description="What the hook saw, in a few words.")
    ],
    remember: Annotated[
        bool, Field(description="The person wrote #remember: ask whatever the hour's count.")
    ] = False,
    project: Project = None,
) -> dict[str, Any]:
    """For stop hooks: whether to ask the agent to save what the session learned (the server's
    settings and this hour's asks decide); records the ask in the activity log."""
    call = call_of(ctx)
    return await call.services.loop.answer(
        "ask_to_save", session_id=session_id, signal=signal, remember=remember, project=project, who=call.who
    )
