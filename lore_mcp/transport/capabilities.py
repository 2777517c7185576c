"""What each era's handshake advertises, so a client is promised only what it will be served.

The SDK derives capabilities from the handlers a server registers. Two of its answers promise
more than Lore delivers:

- ``server/discover`` (2026-07-28) sets ``listChanged`` wherever ``subscriptions/listen`` is
  served; Lore's tool, prompt and resource lists never change while it runs, so it never sends
  those notices (and its listen streams do not honour them). ``honest_discover`` drops them.
- ``initialize`` on a server without sessions (``LORE_STATELESS_HTTP``) still advertises
  ``logging`` and ``resources.subscribe``; but with no session, ``logging/setLevel`` and
  ``resources/subscribe`` are forgotten when their request ends and nothing ever follows.
  ``sessionless_handshake`` drops both, so a handshake-era client knows to re-read instead, and
  answers those methods (and ``resources/unsubscribe``) method not found, as the current
  revision does, rather than an empty result that looks like a subscription.
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
    """Make ``initialize`` advertise neither ``logging`` nor ``resources.subscribe``, and their
    methods answer method not found (see the module docstring); 2026-07-28's ``server/discover``
    is left as it is, since its logs ride each request and its notices ride
    ``subscriptions/listen``, neither needing a session."""
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
