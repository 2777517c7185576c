"""What each era's handshake advertises, so a client is promised only what it will be served
(the SDK derives capabilities from the registered handlers, and promises more than Lore does):

- ``honest_discover``: ``server/discover`` without ``listChanged``; Lore's lists never change at run time.
- ``sessionless_handshake``: without sessions a log level or subscription dies with its request, so
  ``initialize`` offers neither and those methods answer method not found (not a subscription that never
  notifies); a handshake-era client then knows to re-read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, DiscoverResult

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.lowlevel import Server


def honest_discover(inner: Any) -> Any:
    """``server/discover`` as the SDK answers it (``inner``), less the ``listChanged`` flags."""

    async def discover(ctx: ServerRequestContext[Any, Any], params: Any) -> DiscoverResult:
        result: DiscoverResult = await inner(ctx, params)
        capabilities = result.capabilities
        update: dict[str, Any] = {}
        for name in ("tools", "prompts", "resources"):
            capability = getattr(capabilities, name)
            if capability is not None:
                update[name] = capability.model_copy(update={"list_changed": False})
        return result.model_copy(update={"capabilities": capabilities.model_copy(update=update)})

    return discover


def sessionless_handshake(lowlevel: Server[Any]) -> None:
    """See the module docstring; ``server/discover`` stays: its logs and listen need no session."""
    options = lowlevel.create_initialization_options

    def without_session_features(*args: Any, **kwargs: Any) -> Any:
        result = options(*args, **kwargs)
        capabilities = result.capabilities
        update: dict[str, Any] = {"logging": None}
        if capabilities.resources is not None:
            update["resources"] = capabilities.resources.model_copy(update={"subscribe": False})
        return result.model_copy(update={"capabilities": capabilities.model_copy(update=update)})

    lowlevel.create_initialization_options = without_session_features  # type: ignore[method-assign]
    for method in SESSION_METHODS:
        entry = lowlevel.get_request_handler(method)
        if entry is not None:  # kept registered: 2026-07-28's discover derives ``logging`` from it
            lowlevel.add_request_handler(method, entry.params_type, _not_offered)


SESSION_METHODS = ("logging/setLevel", "resources/subscribe", "resources/unsubscribe")


async def _not_offered(ctx: Any, params: Any) -> Any:
    raise MCPError(
        METHOD_NOT_FOUND,
        "Method not found: this server keeps no sessions, so it holds no subscriptions or log "
        "levels; re-read resources instead.",
    )
