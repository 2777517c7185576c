"""The composition root: the one place that opens the store and builds the services.

Every entry point gets its store and services here: ``lore-memory mcp`` over stdio
and over HTTP, the administration commands, ``doctor``, and tests that want what a
command would build. Wiring then lives once, and no entry point borrows another's
helpers.

Services are built on first use, and their modules imported then: ``keys list``
opens the store without making an embedder or importing the lesson tools, and
``migrate`` without importing the services at all.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING, Any

from lore_mcp.settings import Settings
from stores import Store
from stores.engine.keys import Org

if TYPE_CHECKING:
    from lore_mcp.embedding.embedder import Embedder
    from lore_mcp.services.keys import KeyService, KeyTools
    from lore_mcp.services.lessons import LessonService
    from lore_mcp.services.structured import StructuredService
    from lore_mcp.services.transfer import Transfer
    from lore_mcp.transport.admission import HeavyGate
    from lore_mcp.transport.server import LogLevel, LoreServer


def open_store(settings: Settings) -> Store:
    """The configured backend, migrated and ready. Raises ``StoreError`` with a sentence for
    people, or ``SystemExit`` when the settings name no database this process can open."""
    from stores import RankingParams, open_local_store, open_postgres_store

    ranking = RankingParams(half_life_days=settings.decay_half_life_days)
    if settings.store == "postgres":
        if not settings.database_url:
            raise SystemExit("lore-memory: LORE_STORE=postgres needs LORE_DATABASE_URL (or --database-url).")
        store = open_postgres_store(
            settings.database_url, pool_size=settings.pool_size, ranking_params=ranking
        )
        return store
    if settings.store == "local":
        return open_local_store(settings.db_path, ranking_params=ranking)
    raise SystemExit(
        "lore-memory: LORE_STORE=remote forwards to a team server and has no database here; "
        "run this command where the team server's database is (LORE_STORE=local or postgres)."
    )


def open_app(settings: Settings) -> App:
    """``open_store`` and the services over it (raises as ``open_store`` does)."""
    return App(settings, open_store(settings))


class App:
    """One opened store and the services over it, for one process; ``close`` closes the store.

    ``embedder`` replaces the one the settings ask for (tests share one loaded model).
    """

    def __init__(self, settings: Settings, store: Store, *, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.store = store
        self._embedder = embedder

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

        settings = self.settings
        return LessonService(self.store, self.embedder, default_project=settings.project, org=settings.org)

    @cached_property
    def keys(self) -> KeyService:
        """Orgs and API keys, for ``init``, ``keys`` and the admin tools."""
        from lore_mcp.services.keys import KeyService

        return KeyService(self.store.keys)

    @cached_property
    def key_tools(self) -> KeyTools:
        """The root-only admin tools over ``keys``."""
        from lore_mcp.services.keys import KeyTools

        return KeyTools(self.keys)

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
        """The MCP server of the settings' tool groups; ``with_keys`` adds the admin tools'
        service, ``shared`` (a team server) caps heavy calls fairly between orgs and keys,
        ``auth`` goes to ``build_server`` (token verifier and auth settings)."""
        from lore_mcp.transport.server import build_server

        lessons = self.lessons
        return build_server(
            lessons,
            keys=self.key_tools if with_keys else None,
            tools=self.settings.tool_groups,
            log_level=log_level,
            request_timeout_s=self.settings.request_timeout_s,
            heavy_gate=self.heavy_gate() if shared else None,
            **auth,
        )

    def heavy_gate(self) -> HeavyGate:
        """Slots for heavy calls: on Postgres two pooled connections fewer than the pool, so key
        checks and cheap calls always find one; on SQLite two (one writes, one reads). One org
        holds at most half the machine's cores' worth: heavy calls are CPU work in this
        process, and an org that took every core would slow every other org's calls."""
        import os

        from lore_mcp.transport.admission import HeavyGate

        total = max(1, self.settings.pool_size - 2) if self.settings.store == "postgres" else 2
        return HeavyGate(total, per_org=max(1, min(total - 1, (os.cpu_count() or 2) // 2)))

    def team_server(self, *, issuer_url: str | None, log_level: LogLevel = "WARNING") -> LoreServer:
        """The server for streamable HTTP: API keys checked on every request, their issuer
        ``issuer_url``; None serves without authentication (``--dev-no-auth``)."""
        if issuer_url is None:
            return self.server(with_keys=True, log_level=log_level, shared=True)
        from mcp.server.auth.settings import AuthSettings
        from pydantic import AnyHttpUrl

        from lore_mcp.auth import ApiKeyVerifier

        return self.server(
            with_keys=True,
            log_level=log_level,
            shared=True,
            token_verifier=ApiKeyVerifier(self.store.keys),
            # Lore's keys are its own, not OAuth: no metadata routes, just bearer checks.
            auth=AuthSettings(issuer_url=AnyHttpUrl(issuer_url), resource_server_url=None),
        )

    def health(self) -> Org | None:
        """What ``/healthz`` checks: the served org can be read (which fails when the store is
        down) and a write can begin (which fails when the writer is stuck or the database
        cannot be written); both raise ``StoreError`` with the reason."""
        org = self.store.keys.get_org(self.settings.org)
        self.store.probe_write()
        return org

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> App:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
