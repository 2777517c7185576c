"""create_key / list_keys / revoke_key: root keys only, always within the caller's org."""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Annotated, Protocol

from mcp.server.mcpserver.tools import Tool
from pydantic import Field

from lore_mcp.auth import Caller, Forbidden, current_caller
from lore_mcp.services.keys import CreatedKey, KeyList, KeyOut
from lore_mcp.tools.registry import tools_of


class KeysBackend(Protocol):
    """What the key tools need answered (``KeyTools`` has the same methods)."""

    async def create_key(self, caller: Caller, name: str, project: str | None, root: bool) -> CreatedKey: ...

    async def list_keys(self, caller: Caller) -> KeyList: ...

    async def revoke_key(self, caller: Caller, key_id: str) -> KeyOut: ...


def tools_for(
    keys: KeysBackend,
    groups: Collection[str],
    local_caller: Callable[[], Caller | None],
) -> list[Tool]:
    """The key tools (group ``admin``) if ``groups`` has it, answered by ``keys``.

    ``local_caller`` is the trusted caller of a server without API keys (stdio), or None;
    it is asked at each call, since the server may be given one after its tools.
    """
    tools = KeyAdminTools(keys, local_caller)
    return tools_of(groups, tools.create_key, tools.list_keys, tools.revoke_key)


class KeyAdminTools:
    """The key tools bound to their backend and to who may use them."""

    def __init__(self, keys: KeysBackend, local_caller: Callable[[], Caller | None]) -> None:
        self.keys = keys
        self.local_caller = local_caller

    def root_caller(self) -> Caller:
        caller = current_caller.get() or self.local_caller()
        if caller is None:
            raise Forbidden("Key tools need a root API key.")
        return caller

    async def create_key(
        self,
        name: Annotated[str, Field(min_length=1, max_length=100, description="Who or what holds the key.")],
        project: Annotated[
            str | None, Field(max_length=64, description="Limit the key to this project; omit for all.")
        ] = None,
        root: Annotated[bool, Field(description="Also allow managing keys (all projects).")] = False,
    ) -> CreatedKey:
        """Create an API key in your org (root keys only). The key is shown once, in this result."""
        return await self.keys.create_key(self.root_caller(), name, project, root)

    async def list_keys(self) -> KeyList:
        """List your org's API keys, revoked ones included; secrets are never shown (root keys only)."""
        return await self.keys.list_keys(self.root_caller())

    async def revoke_key(
        self,
        id: Annotated[str, Field(max_length=64, description="A key id from list_keys.")],
    ) -> KeyOut:
        """Revoke an API key of your org; it stops working on its next request (root keys only)."""
        return await self.keys.revoke_key(self.root_caller(), id)
