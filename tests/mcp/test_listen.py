"""Change notices on the current revision (``subscriptions/listen``, 2026-07-28), scoped to the
caller's org and project as legacy ``resources/subscribe`` is; log messages on the request's own
stream at the level the request asks for; and capabilities that say what each era is served
(``lore_mcp.transport.notices``, ``lore_mcp.transport.protocol_extras``).

Listeners are real ``mcp.Client`` s: in process, and over streamable HTTP against a running team
server. A listen stream's client drops an event equal to one still waiting to be read, so the
listeners here read every event at once into ``Heard``, and negatives are checked the way
``tests/mcp/test_tenant_ids.py`` checks them: a marker change made after the changes that must
not be heard arrives after theirs would have.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.client.subscriptions import ListenNotSupportedError, Subscription
from mcp.shared.exceptions import MCPError
from mcp_types import METHOD_NOT_FOUND, LoggingMessageNotificationParams

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.transport.server import LoreServer
from stores import Store, open_postgres_store
from tests.support.clients import no_deprecation_warnings
from tests.support.helpers import call
from tests.support.stores import empty_postgres
from tests.support.team import http_client, team_server

MODERN = "2026-07-28"
TAKEN = "01JTAKENBYA11STENERS000000"  # one id several orgs and projects hold here
TAKEN_URI = f"lore://lessons/{TAKEN}"
STATS = "lore://stats"


class Heard:
    """The URIs a listen stream was told changed, in order, read as they arrive."""

    def __init__(self) -> None:
        self.uris: list[str] = []

    async def read(self, sub: Subscription) -> None:
        async for event in sub:
            self.uris.append(str(getattr(event, "uri", type(event).__name__)))

    async def until(self, marker: str) -> list[str]:
        """Everything told up to and including ``marker`` (waiting up to 10 s for it), and
        then ``marker`` is forgotten so that the next ``until`` waits for a new one."""
        with anyio.fail_after(10):
            while marker not in self.uris:
                await anyio.sleep(0.01)
        told = self.uris[: self.uris.index(marker) + 1]
        del self.uris[: len(told)]
        return told

    async def all_of(self, *uris: str) -> None:
        """Wait (up to 10 s) until each of ``uris`` was told."""
        with anyio.fail_after(10):
            while not set(uris) <= set(self.uris):
                await anyio.sleep(0.01)


@asynccontextmanager
async def listening(client: Client, *uris: str, **kinds: bool) -> AsyncIterator[tuple[Subscription, Heard]]:
    """A listen stream of ``client`` watching ``uris``, read into a ``Heard`` by a task."""
    heard = Heard()
    async with (
        client.listen(resource_subscriptions=list(uris), **kinds) as sub,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(heard.read, sub)
        yield sub, heard
        tg.cancel_scope.cancel()


def lesson(problem: str, lesson_id: str = TAKEN) -> dict[str, Any]:
    return {"id": lesson_id, "problem": problem, "resolution": f"the fix for {problem}"}


async def saved(client: Client, problem: str, **arguments: Any) -> str:
    found = await call(client, "save_lesson", problem=problem, resolution=f"fix for {problem}", **arguments)
    return f"lore://lessons/{found['id']}"


# -- in process: what a listener hears, from writers of either era ---------------------------


async def test_a_listener_hears_changes_to_what_it_watches_and_nothing_else(server: LoreServer) -> None:
    async with Client(server, mode="legacy") as writer, Client(server, mode=MODERN) as listener:
        watched = await saved(writer, "pytest hangs on exit with a live thread")
        other = await saved(writer, "ruff and black disagree on a trailing comma")
        marker = await saved(writer, "a marker lesson")
        async with listening(listener, watched, STATS, marker, tools_list_changed=True) as (sub, heard):
            # Lore's lists never change, so only the resource subscriptions are honoured.
            assert sub.honored.resource_subscriptions == [watched, STATS, marker]
            assert sub.honored.tools_list_changed is None
            await call(writer, "upvote_lesson", id=watched.rsplit("/", 1)[1])
            await call(writer, "upvote_lesson", id=marker.rsplit("/", 1)[1])
            assert set(await heard.until(marker)) == {watched, STATS, marker}

            await call(writer, "recall_lessons", query="pytest hangs")  # reads change nothing
            await call(writer, "upvote_lesson", id=other.rsplit("/", 1)[1])  # only the stats
            await call(listener, "delete_lesson", id=marker.rsplit("/", 1)[1])  # the listener's own change
            told = await heard.until(marker)
            assert watched not in told and STATS in told


async def test_a_change_of_unknown_reach_tells_every_watched_resource(server: LoreServer) -> None:
    """revert_commit may touch anything in its project: each watched URI hears of it."""
    async with Client(server, mode=MODERN) as client:
        watched = await saved(client, "a lesson to revert")
        history = await call(client, "history", limit=1)
        async with listening(client, watched, STATS) as (_, heard):
            await call(client, "revert_commit", commit_id=history["commits"][0]["id"])
            await heard.all_of(watched, STATS)


async def test_listen_is_refused_on_the_legacy_handshake_and_subscribe_on_the_current_revision(
    server: LoreServer,
) -> None:
    async with Client(server, mode="legacy") as legacy, Client(server, mode=MODERN) as modern:
        with pytest.raises(ListenNotSupportedError):
            async with legacy.listen(resource_subscriptions=[STATS]):
                pass
        with no_deprecation_warnings():
            for request in (modern.subscribe_resource(STATS), modern.set_logging_level("debug")):
                with pytest.raises(MCPError) as refused:
                    await request
                assert refused.value.code == METHOD_NOT_FOUND


async def test_a_server_without_sessions_refuses_subscribe_and_set_level_on_the_handshake(
    store: Any, embedder: Embedder
) -> None:
    """``LORE_STATELESS_HTTP``: ``initialize`` offers neither (a subscription or a level would be
    forgotten when its request ends), so each is method not found, as on the current revision,
    not an empty result that looks like a subscription (issue 34)."""
    with team_server(store, embedder, stateless=True) as server:
        key = server.keys.init_org("acme").key
        async with http_client(server.url, key, mode="legacy") as client:
            assert client.server_capabilities is not None
            assert client.server_capabilities.logging is None
            for request in (
                client.subscribe_resource,
                client.unsubscribe_resource,
                lambda _: client.set_logging_level("debug"),
            ):
                with no_deprecation_warnings(), pytest.raises(MCPError) as refused:
                    await request(STATS)
                assert refused.value.code == METHOD_NOT_FOUND
                assert "keeps no sessions" in refused.value.error.message
            assert (await client.read_resource(STATS)).contents  # what a client does instead


# -- logs on the request's own stream ---------------------------------------------------------


class Logs:
    def __init__(self) -> None:
        self.messages: list[LoggingMessageNotificationParams] = []

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.messages.append(params)


@pytest.mark.parametrize("level", [None, "info", "debug"])
async def test_a_current_revision_request_hears_logs_at_and_above_the_level_it_asks_for(
    server: LoreServer, level: str | None
) -> None:
    logs = Logs()
    async with Client(server, mode=MODERN, log_level=level, logging_callback=logs) as client:  # type: ignore[arg-type]
        await call(client, "list_lessons")
        await anyio.sleep(0.1)
    if level == "debug":
        [log] = logs.messages
        assert log.level == "debug" and log.logger == "lore" and "list_lessons answered in" in log.data
    else:  # the duration is a debug message: nothing without an opt-in, nothing at info
        assert logs.messages == []


# -- what each era's handshake or discovery advertises ----------------------------------------


def assert_honest(client: Client, era: str) -> None:
    """Logging and resource subscriptions are served in both eras (setLevel / subscribe on the
    legacy handshake, per-request log levels / listen on 2026-07-28); no list ever changes."""
    assert client.protocol_version == era or (era == "legacy" and client.protocol_version != MODERN)
    capabilities = client.server_capabilities
    assert capabilities.logging is not None and capabilities.completions is not None
    assert capabilities.resources is not None and capabilities.resources.subscribe is True
    for listed in (capabilities.tools, capabilities.prompts, capabilities.resources):
        assert listed is not None and not listed.list_changed


async def test_capabilities_say_what_each_era_is_served_in_process(server: LoreServer) -> None:
    async with Client(server, mode="legacy") as legacy, Client(server, mode="auto") as modern:
        assert_honest(legacy, "legacy")
        assert_honest(modern, MODERN)


# -- over HTTP, with API keys: only the caller's org and project --------------------------------


async def test_over_http_a_listener_hears_only_its_own_org_and_project_and_logs_ride_its_requests(
    store: Store, embedder: Embedder
) -> None:
    with team_server(store, embedder) as team:
        root = team.keys.init_org("acme").key
        alice = team.keys.create_key("acme", name="alice", project="alpha", root=False).key
        bob = team.keys.create_key("acme", name="bob", project=None, root=False).key  # reads "default"
        globex = team.keys.init_org("globex").key
        async with AsyncExitStack() as stack:

            async def connect(key: str, mode: str, **options: Any) -> Client:
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
                )
                transport = streamable_http_client(team.url, http_client=http)
                return await stack.enter_async_context(Client(transport, mode=mode, **options))  # type: ignore[arg-type]

            writer, outsider = await connect(root, "legacy"), await connect(globex, MODERN)
            assert_honest(writer, "legacy")
            assert_honest(await connect(root, "auto"), MODERN)
            markers = {}
            for project in ("alpha", "beta", "default"):
                await call(writer, "import_lessons", lessons=[lesson(f"{project}'s lesson")], project=project)
                markers[project] = await saved(writer, f"{project} marker", project=project)
            await call(outsider, "import_lessons", lessons=[lesson("globex's lesson")])
            watchers = {"alpha": await connect(alice, MODERN), "default": await connect(bob, MODERN)}
            heard = {}
            for project, client in watchers.items():
                _, heard[project] = await stack.enter_async_context(
                    listening(client, TAKEN_URI, STATS, markers[project])
                )

            # The same id changing in a project neither listener reads, and in another org: nothing.
            await call(writer, "upvote_lesson", id=TAKEN, project="beta")
            await call(writer, "update_lesson", id=TAKEN, project="beta", problem="beta's, edited")
            await call(writer, "delete_lesson", id=TAKEN, project="beta")
            await call(outsider, "upvote_lesson", id=TAKEN)
            for project in ("alpha", "default"):  # alpha's marker changes before default's
                await call(writer, "upvote_lesson", id=markers[project].rsplit("/", 1)[1], project=project)
            for project in ("alpha", "default"):
                assert await heard[project].until(markers[project]) == [markers[project]]

            # Then the id in alpha, which only alice hears of, and in default, which only bob does.
            await call(writer, "upvote_lesson", id=TAKEN, project="alpha")
            await call(watchers["default"], "downvote_lesson", id=TAKEN)
            for project in ("alpha", "default"):
                await call(writer, "upvote_lesson", id=markers[project].rsplit("/", 1)[1], project=project)
            for project in ("alpha", "default"):
                told = await heard[project].until(markers[project])
                assert told.count(TAKEN_URI) == 1 and set(told) == {TAKEN_URI, STATS, markers[project]}

            logs = Logs()
            logged = await connect(bob, MODERN, log_level="debug", logging_callback=logs)
            await call(logged, "list_lessons")
            with anyio.fail_after(5):
                while not logs.messages:
                    await anyio.sleep(0.01)
            assert "list_lessons answered in" in logs.messages[0].data


async def test_a_revoked_keys_listen_stream_ends_and_hears_nothing_more(
    store: Store, embedder: Embedder
) -> None:
    with team_server(store, embedder) as team:
        root = team.keys.init_org("acme").key
        doomed = team.keys.create_key("acme", name="doomed", project=None, root=False)
        async with AsyncExitStack() as stack:
            clients = []
            for key in (root, doomed.key):
                http = await stack.enter_async_context(
                    httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
                )
                transport = streamable_http_client(team.url, http_client=http)
                clients.append(await stack.enter_async_context(Client(transport, mode=MODERN)))
            writer, listener = clients
            async with listener.listen(resource_subscriptions=[STATS]) as sub:
                await saved(writer, "heard while the key is good")
                event = await anext(sub)
                assert str(getattr(event, "uri", "")) == STATS
                await call(writer, "revoke_key", id=doomed.id)
                await saved(writer, "said after the key was revoked")
                with anyio.fail_after(10):  # the stream ends (gracefully) instead of telling it
                    assert [str(getattr(e, "uri", e)) async for e in sub] == []


# -- replicas on one Postgres: each its own store and bus ---------------------------------------


class Updated:
    """The URIs a legacy session was told changed (``notifications/resources/updated``)."""

    def __init__(self) -> None:
        self.uris: list[str] = []

    async def __call__(self, message: Any) -> None:
        if getattr(message, "method", "") == "notifications/resources/updated":
            self.uris.append(str(message.params.uri))


@pytest.fixture
def replicas(postgres_url: str, embedder: Embedder) -> Iterator[dict[str, LoreServer]]:
    """Servers as separate processes would build them on one database: ``a`` and ``b`` of the
    org ``local``, ``globex`` of another org; each on a store (and so a bus) of its own."""
    empty_postgres(postgres_url)
    stores = {name: open_postgres_store(postgres_url) for name in ("a", "b", "globex")}
    try:
        yield {
            name: build_server(
                LessonService(
                    store, embedder, default_project="default", org="globex" if name == "globex" else "local"
                )
            )
            for name, store in stores.items()
        }
    finally:
        for store in stores.values():
            store.close()


async def test_a_change_on_one_replica_reaches_listeners_of_both_eras_on_another_in_scope_only(
    replicas: dict[str, LoreServer],
) -> None:
    updated = Updated()
    async with (
        Client(replicas["a"], mode=MODERN) as writer,
        Client(replicas["globex"], mode="legacy") as outsider,
        Client(replicas["b"], mode=MODERN) as listener,
        Client(replicas["b"], mode="legacy", message_handler=updated) as subscriber,
    ):
        marker = await saved(writer, "a marker lesson")
        other_project = await saved(writer, "beta's lesson", project="beta")
        with no_deprecation_warnings():
            for uri in (STATS, marker, other_project):
                await subscriber.subscribe_resource(uri)
        async with listening(listener, STATS, marker, other_project) as (_, heard):
            await saved(writer, "a lesson of another project", project="beta")  # beta's stats
            await call(writer, "upvote_lesson", id=other_project.rsplit("/", 1)[1], project="beta")
            await saved(outsider, "a lesson of another org")
            await call(writer, "upvote_lesson", id=marker.rsplit("/", 1)[1])
            assert await heard.until(marker) == [marker]
            with anyio.fail_after(10):
                while marker not in updated.uris:
                    await anyio.sleep(0.01)
            # A notice's URIs reach a legacy session in the order it subscribed to them.
            assert updated.uris[: updated.uris.index(marker) + 1] == [STATS, marker]

            await saved(writer, "a lesson that changes the stats b shows")
            await heard.all_of(STATS)
            with anyio.fail_after(10):
                while STATS not in updated.uris:
                    await anyio.sleep(0.01)


async def test_a_replica_hears_again_after_its_listening_connection_drops(
    replicas: dict[str, LoreServer], postgres_url: str
) -> None:
    feed = replicas["b"].services.lessons.store.notices  # type: ignore[union-attr]
    async with (
        Client(replicas["a"], mode=MODERN) as writer,
        Client(replicas["b"], mode=MODERN) as listener,
        listening(listener, STATS) as (_, heard),
    ):
        dropped = feed.backend_pid()
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (dropped,))
        with anyio.fail_after(10):
            while feed.backend_pid() in (None, dropped):
                await anyio.sleep(0.02)
        await saved(writer, "a lesson saved after the drop")
        await heard.all_of(STATS)


async def test_closing_the_listen_streams_ends_them_gracefully(server: LoreServer) -> None:
    """What a shutting-down server does first, so that open streams do not hold up its drain."""
    assert server.listen_streams is not None
    async with Client(server, mode=MODERN) as client, client.listen(resource_subscriptions=[STATS]) as sub:
        server.listen_streams.close()
        with anyio.fail_after(5):
            assert [event async for event in sub] == []
