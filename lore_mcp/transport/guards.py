"""What the team server's guards share (sliding-window limits, failed logins, the client's address, JSON-RPC
errors carrying the refused request's id, so a client shows the reason on that call), ``AuthGuard``,
``RateLimit``, ``BusyGuard`` and ``StandingStreams``."""

from __future__ import annotations

import collections
import contextlib
import hashlib
import ipaddress
import json
import logging
import math
import time
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from lore_mcp.auth import KeyLookupUnavailable
from lore_mcp.key_tokens import caller_of
from lore_mcp.tools.registry import HEAVY_TOOLS, SPECS
from lore_mcp.transport.admission import QUEUE_FULL, Busy, HeavyGate
from stores import StoreError

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken, TokenVerifier
    from mcp.server.context import ServerRequestContext

    from lore_mcp.auth import Caller
    from stores import CallCounts

logger = logging.getLogger("lore_mcp.transport.http")

MCP_PATH = "/mcp"
HEALTH_PATH = "/healthz"
WINDOW_S = 60.0
FAILED_AUTH_PER_MINUTE = 30  # 401s per client address a minute; beyond, 429 before any lookup
FAILED_AUTH_DOOR = "failed-auth"  # how /mcp's failed logins are counted across replicas (``count_failure``)
MAX_TRACKED = 10_000  # addresses and keys tracked at once; beyond, the stalest are forgotten
RATE_LIMITED_JSONRPC_CODE = -32029  # these three in JSON-RPC's range for server-defined errors
UNAVAILABLE_JSONRPC_CODE = -32030
BUSY_JSONRPC_CODE = -32031
MESSAGE_KEY = "lore.jsonrpc"  # where the guards keep a POST's body as JSON, read off the wire once
PEER_KEY = "lore.peer"  # the TCP peer, kept in the ASGI scope for ``ForwardedClient``
UNAVAILABLE = (
    "UNAVAILABLE: The team server's database is unreachable or not answering, so it "
    "could not check the API key; nothing was done. Try again shortly."
)


class SlidingWindowLimiter:
    """At most ``limit`` hits per key per ``window`` s (exact sliding log), per process: replicas differ."""

    def __init__(self, limit: int, window: float = WINDOW_S, clock: Callable[[], float] = time.monotonic):
        self.limit, self.window, self.clock = limit, window, clock
        self._hits: dict[str, collections.deque[float]] = {}

    def hit(self, key: str, calls: int = 1) -> float | None:
        """Record ``calls`` hits if they all fit (None); else the seconds until they would."""
        wait = self.wait(key, calls)
        if wait is None:
            self.record(key, calls)
        return wait

    def wait(self, key: str, calls: int = 1) -> float | None:
        """``hit`` without recording anything."""
        if calls > self.limit:
            return self.window
        hits = self._hits.get(key)
        if not hits:
            return None
        now = self.clock()
        while hits and hits[0] <= now - self.window:
            hits.popleft()
        excess = len(hits) + calls - self.limit
        # Room for them once the oldest of the hits in the way have left the window.
        return hits[min(excess, calls) - 1] + self.window - now if excess > 0 else None

    def record(self, key: str, calls: int = 1) -> None:
        """Count hits whatever the limit (for events that have already happened)."""
        if key not in self._hits and len(self._hits) >= MAX_TRACKED:  # forget idle keys, or the oldest half
            cutoff = self.clock() - self.window
            self._hits = {k: hits for k, hits in self._hits.items() if hits and hits[-1] > cutoff}
            if len(self._hits) >= MAX_TRACKED:
                self._hits = dict(list(self._hits.items())[len(self._hits) // 2 :])
        self._hits.setdefault(key, collections.deque()).extend([self.clock()] * calls)

    def fill(self, key: str) -> None:
        """Count ``key``'s limit as spent now (spent on other replicas), so ``wait`` refuses it."""
        missing = self.limit - len(self._hits.get(key, ()))
        if missing > 0:
            self.record(key, missing)


async def count_failure(
    limiter: SlidingWindowLimiter, address: str, shared: CallCounts | None, *, door: str
) -> None:
    """Count a failed login here and, with ``shared``, as ``<door>:<address>`` for every replica. Once spent
    there, this replica's fills too, so N replicas allow about limit + N a minute, not N times it."""
    limiter.record(address)
    if shared is None:
        return
    try:
        wait = await anyio.to_thread.run_sync(
            shared.take, f"{door}:{address}", 1, limiter.limit, int(limiter.window)
        )
    except Exception as exc:
        logger.warning("could not count a failed authentication across replicas: %s", exc)
        return
    if wait is not None:
        limiter.fill(address)


async def request_id(scope: Scope, receive: Receive) -> str | int | None:
    """The JSON-RPC id of a refused POST, so the client matches the error to its call (else None)."""
    return jsonrpc_id((await jsonrpc_message(scope, receive))[0]) if scope.get("method") == "POST" else None


def jsonrpc_id(message: Any) -> str | int | None:
    """The id of a single JSON-RPC request (None for a notification, a batch or anything else)."""
    found = message.get("id") if isinstance(message, dict) else None
    return found if isinstance(found, str | int) and not isinstance(found, bool) else None


def jsonrpc_error(status: int, code: int, message: str, retry: int, id: str | int | None) -> JSONResponse:
    """An HTTP error with a JSON-RPC body, so MCP clients show the reason, not a bare status."""
    data = {"data": {"retry_after": retry}} if status == 429 else {}
    body = {"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message, **data}}
    return JSONResponse(body, status, headers={"Retry-After": str(retry)})


async def refuse_too_many(
    scope: Scope, receive: Receive, send: Send, wait: float, why: str, advice: str = ""
) -> None:
    """429 ``RATE_LIMITED`` with ``Retry-After``: more than ``why``, try again in ``wait`` s."""
    retry_after = max(1, math.ceil(wait))
    message = f"RATE_LIMITED: more than {why}; retry after {retry_after} s{advice}."
    refused = await request_id(scope, receive)
    await jsonrpc_error(429, RATE_LIMITED_JSONRPC_CODE, message, retry_after, refused)(scope, receive, send)


def client_address(scope: Scope) -> str:
    """Whom failed logins count against: the client's IP (IPv6: its /64), as a trusted proxy names it."""
    client = scope.get("client")
    host = client[0] if client else "unknown"
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host
    plain = address if isinstance(address, ipaddress.IPv4Address) else address.ipv4_mapped
    return str(plain) if plain is not None else str(ipaddress.ip_network(f"{address}/64", strict=False))


class ForwardedClient:
    """uvicorn's ``ProxyHeadersMiddleware``, but a forwarded entry that is not an IP (``unknown``) names
    nobody and the client stays the proxy: else each such token would get a failed-login count of its own."""

    def __init__(self, app: ASGIApp, trusted_hosts: list[str]) -> None:
        self.app = app
        addressed: Any = self._addressed  # uvicorn types an ASGI app more narrowly than Starlette
        self.proxy: Any = ProxyHeadersMiddleware(addressed, trusted_hosts=trusted_hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        scope[PEER_KEY] = scope.get("client")
        await self.proxy(scope, receive, send)

    async def _addressed(self, scope: Scope, receive: Receive, send: Send) -> None:
        client = scope.get("client")
        if client is not None and client is not scope[PEER_KEY]:
            try:
                ipaddress.ip_address(client[0])
            except ValueError:
                scope["client"] = scope[PEER_KEY]
        await self.app(scope, receive, send)


def has_authorization(scope: Scope) -> bool:
    return any(name == b"authorization" for name, _ in scope.get("headers", ()))


def bearer_digest(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"authorization" and value[:7].lower() == b"bearer ":
            return hashlib.sha256(value[7:]).hexdigest()
    return None


def authenticated_post(scope: Scope) -> Caller | None:
    """The caller of an authenticated POST, the only request that can hold a tool call."""
    user = scope.get("user") if scope["type"] == "http" else None
    caller = caller_of(user.access_token) if isinstance(user, AuthenticatedUser) else None
    return caller if scope.get("method") == "POST" else None


class CallLimiter:
    """A key's allowance of ``limit`` tool calls a minute: on Postgres in ``counts`` (a fixed window per key,
    one statement per call), so N replicas give a key its limit, not N times it (an unreachable database
    lets calls through: they will say it is down); on SQLite (one process) in memory."""

    def __init__(self, limit: int, counts: CallCounts | None = None) -> None:
        self.limit, self._counts = limit, counts
        self._window = SlidingWindowLimiter(limit)

    async def take(self, key_id: str, calls: int) -> float | None:
        """Count ``calls`` if they fit (None); else the seconds until they would."""
        if self._counts is None:
            return self._window.hit(key_id, calls)
        try:
            return await anyio.to_thread.run_sync(self._counts.take, key_id, calls, self.limit, int(WINDOW_S))
        except StoreError as exc:
            logger.warning("rate limit not checked, the database did not answer: %s", exc)
            return None


def tool_calls(message: Any) -> int:
    """One per ``tools/call`` of a message or batch: handshakes and listings are free."""
    batch = message if isinstance(message, list) else [message]
    return sum(1 for item in batch if isinstance(item, dict) and item.get("method") == "tools/call")


class RateLimit:
    """Inside auth: past ``limiter.limit`` tool calls per key a minute (one per batch element; handshakes and
    listings are free), 429 ``RATE_LIMITED``. Only an authenticated POST can hold a tool call, so only its
    body is read (once)."""

    def __init__(self, app: ASGIApp, limiter: CallLimiter) -> None:
        self.app, self.limiter = app, limiter

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = authenticated_post(scope)
        if caller is None or not scope.get("path", "").startswith(MCP_PATH):
            await self.app(scope, receive, send)
            return
        message, receive = await jsonrpc_message(scope, receive)
        calls = tool_calls(message)
        # A person on Lore's page (``Caller.person``) has a second, equal budget under the same key: curating
        # never spends what the key's agents may call, nor gets more than a key.
        budget = f"{caller.key_id}/page" if caller.person else caller.key_id
        wait = await self.limiter.take(budget, calls) if calls else None
        if wait is not None:
            who = "on Lore's page" if caller.person else "with this API key"
            why = f"{self.limiter.limit} tool calls in a minute {who}"
            await refuse_too_many(scope, receive, send, wait, why)
            return
        await self.app(scope, receive, send)


class AuthGuard:
    """Outside the SDK's auth, to see what the bearer check answers and raises: a lookup that could not be
    made is 503 ``UNAVAILABLE``, not 401 (the key may be fine). Past the per-address failed-login limit, 429
    before any lookup, unless its key was accepted before, so one misconfigured client behind a shared
    address does not lock out its neighbours."""

    def __init__(
        self, app: ASGIApp, failures: SlidingWindowLimiter, shared: CallCounts | None = None
    ) -> None:
        self.app, self.failures, self.shared = app, failures, shared
        self._accepted: collections.OrderedDict[str, None] = collections.OrderedDict()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        address = client_address(scope)
        path = scope.get("path", "")
        if path.startswith(MCP_PATH) or (path == HEALTH_PATH and has_authorization(scope)):
            wait = self.failures.wait(address)
            if wait is not None and bearer_digest(scope) not in self._accepted:
                why = f"{self.failures.limit} failed authentications in a minute from this address"
                await refuse_too_many(scope, receive, send, wait, why, " with a valid API key")
                return
        started = read = False

        async def watch(message: Any) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                if message["status"] == 401:
                    await count_failure(self.failures, address, self.shared, door=FAILED_AUTH_DOOR)
                else:
                    self._accept(scope)
            await send(message)

        async def reading() -> Any:
            nonlocal read
            read = True
            return await receive()

        try:
            await self.app(scope, reading, watch)
        except KeyLookupUnavailable:
            if started:
                raise
            # The key is checked before the body is read, so the body is normally still there.
            refused = None if read else await request_id(scope, receive)
            await jsonrpc_error(503, UNAVAILABLE_JSONRPC_CODE, UNAVAILABLE, 5, refused)(scope, receive, send)

    def _accept(self, scope: Scope) -> None:
        """Remember the key of an answered request, which the lock lets through (see above)."""
        digest = bearer_digest(scope) if isinstance(scope.get("user"), AuthenticatedUser) else None
        if digest is not None:
            self._accepted[digest] = None
            self._accepted.move_to_end(digest)
            while len(self._accepted) > MAX_TRACKED:
                self._accepted.popitem(last=False)


class BusyGuard:
    """Inside auth: a heavy call ``gate`` would refuse (org queue full) gets 429, ``Retry-After`` and
    ``BUSY: …`` here, since MCP answers a tool call with a stream that can no longer carry the header.
    The body is read only while the caller's org is at that bound."""

    def __init__(self, app: ASGIApp, gate: HeavyGate) -> None:
        self.app, self.gate = app, gate

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        caller = authenticated_post(scope)
        if caller is None or not self.gate.queue_full(caller.org):
            await self.app(scope, receive, send)
            return
        message, receive = await jsonrpc_message(scope, receive)
        params = message.get("params") if isinstance(message, dict) else None
        name = params.get("name") if isinstance(params, dict) else None
        if name not in HEAVY_TOOLS or message.get("method") != "tools/call":
            await self.app(scope, receive, send)
            return
        busy = Busy(self.gate.retry_after_s(), why=QUEUE_FULL)
        refusal = f"{busy.code}: {busy.message}"
        answer = jsonrpc_error(429, BUSY_JSONRPC_CODE, refusal, busy.retry_after_s, jsonrpc_id(message))
        await answer(scope, receive, send)


async def jsonrpc_message(scope: Scope, receive: Receive) -> tuple[Any, Receive]:
    """A POST's body as JSON (None when not JSON, over the SDK's size limit, or deeper than the recursion
    limit: the SDK then answers it) and a ``receive`` handing it on as sent; the first guard to ask reads
    it off the wire and keeps it in the scope for the others."""
    if MESSAGE_KEY not in scope:
        body, receive = await buffered(receive, limit=DEFAULT_MAX_REQUEST_BODY_SIZE)
        try:
            scope[MESSAGE_KEY] = json.loads(body) if body is not None else None
        except (ValueError, RecursionError):
            scope[MESSAGE_KEY] = None
    return scope[MESSAGE_KEY], receive


async def buffered(receive: Receive, *, limit: int) -> tuple[bytes | None, Receive]:
    """The whole body (None past ``limit`` bytes: reading stops), and a ``receive`` replaying it."""
    body, more = bytearray(), True
    after: list[Message] = []
    while more and len(body) <= limit:
        message = await receive()
        if message["type"] == "http.request":
            body += message.get("body", b"")
            more = bool(message.get("more_body"))
        else:
            after.append(message)  # the client left: the app hears of it after the body
            more = False
    pending: list[Message] = [{"type": "http.request", "body": bytes(body), "more_body": more}, *after]

    async def replay() -> Message:
        return pending.pop(0) if pending else await receive()

    return (bytes(body) if len(body) <= limit and not more else None), replay


def credential_of(token: AccessToken) -> str:
    """What revocation names: the Lore key behind the token, else the token's client."""
    caller = caller_of(token)
    return caller.key_id if caller is not None else token.client_id


async def still_verifies(verifier: TokenVerifier, token: AccessToken) -> bool:
    """Whether ``token`` still verifies as the same unexpired credential; a failed check is a no."""
    try:
        current = await verifier.verify_token(token.token)
    except Exception as exc:  # KeyLookupUnavailable and whatever a verifier raises
        logger.warning("could not verify a standing stream's credential: %s", exc)
        return False
    if current is None or credential_of(current) != credential_of(token):
        return False
    return current.expires_at is None or current.expires_at >= int(time.time())


class StandingStreams:
    """A ``GET /mcp`` stream carries notices long after it was authenticated, so before any message passes
    (a notice, or the 15 s ping) it re-verifies: one revoked anywhere, or uncheckable (database down), ends
    as a complete response and the client is asked for its key again; a revocation here ends them at once.
    ``middleware`` goes inside the SDK's auth, to see the caller."""

    def __init__(self, path: str, verifier: TokenVerifier | None) -> None:
        self.path, self.verifier = path, verifier
        self._open: dict[str, set[anyio.CancelScope]] = {}

    def middleware(self, app: ASGIApp) -> ASGIApp:
        async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
            user = scope.get("user")
            get = scope["type"] == "http" and scope.get("method") == "GET"
            if get and scope.get("path", "").startswith(self.path) and isinstance(user, AuthenticatedUser):
                await self._serve(app, user.access_token, scope, receive, send)
            else:
                await app(scope, receive, send)

        return guarded

    async def _serve(
        self, app: ASGIApp, token: AccessToken, scope: Scope, receive: Receive, send: Send
    ) -> None:
        credential, verifier = credential_of(token), self.verifier
        assert verifier is not None  # an authenticated user means the SDK's auth, with its verifier
        started = finished = False

        async def checked(message: Message) -> None:
            nonlocal started, finished
            body = message["type"] == "http.response.body"
            if body and message.get("body") and not await still_verifies(verifier, token):
                logger.info("ending a standing stream: its credential no longer verifies")
                stream.cancel()  # the message is dropped; the stream ends at the next checkpoint
                return
            await send(message)
            started = started or message["type"] == "http.response.start"
            finished = finished or (body and not message.get("more_body"))

        with anyio.CancelScope() as stream:
            self._open.setdefault(credential, set()).add(stream)
            try:
                await app(scope, receive, checked)
            finally:
                streams = self._open.get(credential, set())
                streams.discard(stream)
                if not streams:
                    self._open.pop(credential, None)
        if stream.cancelled_caught and started and not finished:
            with contextlib.suppress(OSError):  # the client may be gone already
                await send({"type": "http.response.body", "body": b"", "more_body": False})

    def close(self, credential: str) -> None:
        """End every standing stream of ``credential`` now."""
        for stream in list(self._open.get(credential, ())):
            stream.cancel()

    async def after_revoke(self, ctx: ServerRequestContext[Any, Any], call_next: Any) -> Any:
        """Once a tool that ``revokes`` (registry) has revoked a key, end its streams."""
        result = await call_next(ctx)
        spec = SPECS.get(str((ctx.params or {}).get("name")))
        if ctx.method == "tools/call" and spec is not None and spec.revokes and isinstance(result, Mapping):
            revoked = (result.get("structuredContent") or {}).get("id")
            if not result.get("isError") and isinstance(revoked, str):
                self.close(revoked)
        return result
