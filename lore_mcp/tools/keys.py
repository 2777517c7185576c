"""create_key / list_keys / revoke_key: root keys only (stdio: the local user), in the caller's org."""

from __future__ import annotations

from typing import Annotated

import anyio.to_thread
from mcp.server.mcpserver import Context
from pydantic import Field

from lore_mcp.auth import Caller
from lore_mcp.services.keys import CreatedKey, KeyList, KeyOut
from lore_mcp.services.recording import failures_recorded
from lore_mcp.tools.context import Call, call_of
from stores import ActivityNote, Scope


async def create_key(
    ctx: Context,
    name: Annotated[str, Field(min_length=1, max_length=100, description="Who or what holds the key.")],
    project: Annotated[
        str | None, Field(max_length=64, description="Limit the key to this project; omit for all.")
    ] = None,
    root: Annotated[bool, Field(description="Also allow managing keys (all projects).")] = False,
) -> CreatedKey:
    """Create an API key in your org (root keys only). The key is shown once, in this result."""
    call = call_of(ctx)
    caller = call.root("create keys")
    scope, recorded = key_change(call, caller)
    async with failures_recorded(call.services.lessons.store, scope, recorded):
        activity = (scope.project, recorded)
        return await anyio.to_thread.run_sync(
            lambda: call.keys.create_key(caller.org, name=name, project=project, root=root, activity=activity)
        )


async def list_keys(ctx: Context) -> KeyList:
    """List your org's API keys, revoked ones included; secrets are never shown (root keys only)."""
    call = call_of(ctx)
    return KeyList(keys=await anyio.to_thread.run_sync(call.keys.list_keys, call.root("list keys").org))


async def revoke_key(
    ctx: Context, id: Annotated[str, Field(max_length=64, description="A key id from list_keys.")]
) -> KeyOut:
    """Revoke an API key of your org; it stops working on its next request (root keys only)."""
    call = call_of(ctx)
    caller = call.root("revoke keys")
    scope, recorded = key_change(call, caller)
    async with failures_recorded(call.services.lessons.store, scope, recorded):
        activity = (scope.project, recorded)
        return await anyio.to_thread.run_sync(lambda: call.keys.revoke_key(caller.org, id, activity=activity))


def key_change(call: Call, caller: Caller) -> tuple[Scope, ActivityNote]:
    """Keys belong to the org, so their changes are logged in the default project, seen by root
    keys only (``ActivityService.recent``)."""
    scope = call.services.lessons.scope(None, call.who.caller)
    return Scope(caller.org, scope.project, scope.actor), call.who.note("key")
