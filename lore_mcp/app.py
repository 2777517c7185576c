"""The composition root for every entry point; services are built and imported on first use
(``keys list`` makes no embedder, ``migrate`` imports no service)."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Collection
from functools import cached_property, partial
from typing import TYPE_CHECKING, Any

from lore_mcp.settings import Settings

if TYPE_CHECKING:
    from lore_mcp.embedding.embedder import Embedder
    from lore_mcp.services.keys import KeyService
    from lore_mcp.services.lessons import LessonService
    from lore_mcp.services.loop import LoopSettings
    from lore_mcp.services.structured import StructuredService
    from lore_mcp.services.transfer import Transfer
    from lore_mcp.tools.context import Services
    from lore_mcp.transport.admission import HeavyGate
    from lore_mcp.transport.notices import NoticeBus
    from lore_mcp.transport.remote import RemoteLoreServer
    from lore_mcp.transport.server import LogLevel, LoreServer
    from stores import Org, Store


def open_store(settings: Settings) -> Store:
    """The configured backend, migrated; ``StoreError`` or ``SystemExit`` when it cannot open."""
    from stores import ActivityBounds, RankingParams, open_local_store, open_postgres_store

    check_store(settings)
    ranking = RankingParams(half_life_days=settings.decay_half_life_days)
    activity = ActivityBounds(
        max_age_days=settings.activity_max_age_days, max_entries=settings.activity_max_entries
    )
    if settings.store == "postgres":
        assert settings.database_url is not None  # check_store
        return open_postgres_store(
            settings.database_url,
            pool_size=settings.pool_size,
            ranking_params=ranking,
            activity_bounds=activity,
            read_url=settings.database_read_url,
            direct_url=settings.database_direct_url,
        )
    return open_local_store(settings.db_path, ranking_params=ranking, activity_bounds=activity)


def check_store(settings: Settings) -> None:
    """``SystemExit`` saying why, before opening anything, if no store named can open here."""
    if settings.store == "postgres" and not settings.database_url:
        raise SystemExit("lore-memory: LORE_STORE=postgres needs LORE_DATABASE_URL (or --database-url).")
    if settings.store != "postgres" and (settings.database_read_url or settings.database_direct_url):
        raise SystemExit(
            "lore-memory: LORE_DATABASE_READ_URL and LORE_DATABASE_DIRECT_URL need LORE_STORE=postgres."
        )
    if settings.store == "remote":
        raise SystemExit(
            "lore-memory: LORE_STORE=remote forwards to a team server and has no database here; "
            "run this command where the team server's database is (LORE_STORE=local or postgres)."
        )


def build_server(
    lessons: LessonService | Services,
    *,
    keys: KeyService | None = None,
    tools: Collection[str] | None = None,
    **settings: Any,
) -> LoreServer:
    """``local_server`` over a made ``lessons`` service (``keys``: key tools) or ``Services``, for tests."""
    from lore_mcp.tools.context import Services
    from lore_mcp.transport.notices import NoticeBus

    services = lessons if isinstance(lessons, Services) else Services.over(lessons, keys)
    service = services.lessons
    bus, keyed = NoticeBus(service.store.notices), services.keys is not None
    return local_server(services, service.org, service.embedder, bus, keyed, tools, **settings)


def local_server(
    services: Services | Callable[[], Services],
    org: str,
    embedder: Embedder | None,
    bus: NoticeBus,
    keys: bool,
    tools: Collection[str] | None,
    **settings: Any,
) -> LoreServer:
    """The server of the ``tools`` groups (None: defaults), prompts and resources; ``services`` may
    be made on first use (a stdio server opens its store after the handshake).

    Key tools need ``keys`` (a key service): with API keys they serve root keys whatever ``tools``
    says; without (stdio) only with ``admin``, on ``org`` as trusted local caller. Change notices
    go through ``bus``: over the store's feed where it has one (Postgres: every process hears)."""
    from lore_mcp.auth import Caller
    from lore_mcp.tools.registry import DEFAULT_TOOL_GROUPS
    from lore_mcp.transport.server import lore_server

    groups = set(DEFAULT_TOOL_GROUPS if tools is None else tools)
    if "token_verifier" in settings:
        groups.add("admin")
    else:  # stdio (and --dev-no-auth): the local user is trusted, as a root of the server's org.
        settings["local_caller"] = Caller(key_id="local", org=org, name="local", project=None, root=True)
    return lore_server(services, groups, embedder=embedder, keys=keys, bus=bus, **settings)


def remote_server(
    api_url: str, api_key: str, *, default_project: str | None, tools: Collection[str], log_level: LogLevel
) -> RemoteLoreServer:
    """Remote mode's stdio server, forwarding each call to ``api_url`` (``ValueError`` if bad)."""
    from lore_mcp.settings import mcp_url
    from lore_mcp.transport.remote import RemoteConnection, RemoteLoreServer
    from lore_mcp.transport.server import lore_server

    server = lore_server(
        None,
        tools,
        server_class=RemoteLoreServer,
        remote=RemoteConnection(mcp_url(api_url), api_key),
        default_project=default_project,
        log_level=log_level,
    )
    assert isinstance(server, RemoteLoreServer)
    return server


def default_project(settings: Settings) -> str:
    """A call's default project: ``LORE_PROJECT``, else (``LORE_PROJECT_FROM_REPO``) the git repo."""
    if settings.project_from_repo and "project" not in settings.model_fields_set:
        from lore_mcp.services.workdir import workdir_of

        return workdir_of(os.getcwd()).project or settings.project
    return settings.project


def loop_settings(settings: Settings) -> LoopSettings:
    """What the agent-loop tools and hooks give and ask: each ``LORE_LOOP_<FIELD>`` setting."""
    from lore_mcp.services.loop import LoopSettings

    loop = {name.removeprefix("loop_"): value for name, value in settings if name.startswith("loop_")}
    return LoopSettings(**loop, half_life_days=settings.decay_half_life_days)


def open_app(settings: Settings) -> App:
    """``open_store`` and the services over it (raises as ``open_store`` does)."""
    return App(settings, open_store(settings))


class App(contextlib.AbstractContextManager["App"]):
    """One process's store and services; ``embedder`` overrides the settings' one. Without ``store``
    it is ``attach``ed later (a stdio server opens it beside the handshake) and uses wait for it."""

    def __init__(
        self, settings: Settings, store: Store | None = None, *, embedder: Embedder | None = None
    ) -> None:
        self.settings, self._store, self._embedder = settings, store, embedder
        self._attached = threading.Event()
        self._buses: list[NoticeBus] = []
        self._services: Services | None = None
        if store is not None:
            self._attached.set()

    @property
    def store(self) -> Store:
        self._attached.wait()
        if self._store is None:
            from stores import UnavailableError

            raise UnavailableError("The store could not be opened; the server's log says why.")
        return self._store

    def attach(self, store: Store | None) -> None:
        """The store opened after start-up (None: it could not open, as was reported)."""
        self._store = store
        for bus in self._buses:
            bus.feed = store.notices if store is not None else None
        self._attached.set()

    @cached_property
    def embedder(self) -> Embedder:
        """The configured model, not yet loading: ``start()`` it where traffic is expected."""
        if self._embedder is not None:
            return self._embedder
        from lore_mcp.embedding.embedder import embedder_for

        return embedder_for(self.settings)

    @cached_property
    def lessons(self) -> LessonService:
        """The lesson tools' logic, on the settings' org and default project."""
        from lore_mcp.services.lessons import LessonService

        project = default_project(self.settings)
        return LessonService(self.store, self.embedder, default_project=project, org=self.settings.org)

    @cached_property
    def keys(self) -> KeyService:
        """Orgs and API keys, for ``init``, ``keys`` and the admin tools."""
        from lore_mcp.services.keys import KeyService

        return KeyService(self.store.keys)

    @cached_property
    def transfer(self) -> Transfer:
        """Export and import of lesson files, over ``lessons``."""
        from lore_mcp.services.transfer import Transfer

        return Transfer(self.lessons)

    @cached_property
    def structured(self) -> StructuredService:
        """Schema, plan, apply and history, over ``lessons``."""
        from lore_mcp.services.structured import StructuredService

        return StructuredService(self.lessons)

    def server(
        self, *, with_keys: bool, log_level: LogLevel = "WARNING", shared: bool = False, **auth: Any
    ) -> LoreServer:
        """The settings' MCP server, its services made on first use; ``shared`` (a team server)
        caps heavy calls fairly by org. Whoever ``attach``es the store later starts the model."""
        from lore_mcp.transport.notices import NoticeBus

        bus = NoticeBus(self._store.notices if self._store is not None else None)
        self._buses.append(bus)
        return local_server(
            partial(self.services, with_keys),
            self.settings.org,
            self.embedder if self._store is not None else None,
            bus,
            with_keys,
            self.settings.tool_groups,
            request_timeout_s=self.settings.request_timeout_s,
            heavy_gate=self.heavy_gate() if shared else None,
            log_level=log_level,
            **auth,
        )

    def services(self, with_keys: bool) -> Services:
        """Every tool's services, made once (waiting for the store if it is still opening)."""
        if self._services is None:
            from lore_mcp.tools.context import Services

            keys = self.keys if with_keys else None
            self._services = Services(
                self.lessons, self.transfer, self.structured, keys, loop_settings(self.settings)
            )
        return self._services

    def heavy_gate(self) -> HeavyGate:
        """Heavy-call slots: Postgres two fewer than the pool (cheap calls always get a connection),
        SQLite two (one writes, one reads); one org at most half the cores, not to slow the rest."""
        from lore_mcp.transport.admission import HeavyGate

        total = max(1, self.settings.pool_size - 2) if self.settings.store == "postgres" else 2
        return HeavyGate(total, per_org=max(1, min(total - 1, (os.cpu_count() or 2) // 2)))

    def team_server(
        self,
        *,
        issuer_url: str | None,
        log_level: LogLevel = "WARNING",
        people_keys: frozenset[str] = frozenset(),
    ) -> LoreServer:
        """The streamable HTTP server, checking keys and OAuth tokens on every request;
        ``issuer_url`` None means no auth (``--dev-no-auth``); ``people_keys``: page-only keys."""
        if issuer_url is None:
            return self.server(with_keys=True, log_level=log_level, shared=True)
        from lore_mcp.transport.oauth.routes import team_auth

        verifier, auth = team_auth(
            self.store.keys,
            issuer_url,
            call_counts=self.store.call_counts,
            registration=self.settings.oauth_registration,
        )
        verifier.api_keys.people = people_keys
        return self.server(
            with_keys=True, log_level=log_level, shared=True, token_verifier=verifier, auth=auth
        )

    def health(self) -> Org | None:
        """``/healthz``: the org reads and a write can begin; else ``StoreError`` with the reason."""
        org = self.store.keys.get_org(self.settings.org)
        self.store.probe_write()
        return org

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
        if "embedder" in self.__dict__:  # made (cached_property): let a load in progress finish
            self.embedder.close()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
