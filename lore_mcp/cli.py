"""The ``lore-memory`` command: serving MCP and local administration.

Every setting is an environment variable (``LORE_*``) and the same-named flag of
``lore-memory mcp``; flags win. The CLI is for running and administering Lore,
never a second API: everything an agent does goes through MCP tools.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from typing import Any

from lore_mcp import __version__
from lore_mcp.settings import Settings

# Flags of `lore-memory mcp`, one per setting: (flag, settings field, help).
_SETTING_FLAGS = [
    ("--store", "store", "backend: local (default), postgres or remote"),
    ("--db-path", "db_path", "SQLite file of the local store"),
    ("--database-url", "database_url", "Postgres URL"),
    ("--project", "project", "project used when a tool call names none"),
    ("--api-url", "api_url", "team server URL (remote mode)"),
    ("--api-key", "api_key", "API key (remote mode)"),
    ("--embedding-model", "embedding_model", "sentence-transformers model name or path"),
    ("--decay-half-life-days", "decay_half_life_days", "half-life of time decay in recall ranking"),
    ("--rate-limit-per-minute", "rate_limit_per_minute", "tool calls per minute per API key"),
    ("--pool-size", "pool_size", "Postgres connections per server process"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lore-memory", description="Memory for AI agents over MCP.")
    parser.add_argument("--version", action="version", version=f"lore-memory {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    mcp = sub.add_parser("mcp", help="serve MCP (stdio by default)")
    mcp.add_argument("--transport", choices=["stdio"], default="stdio", help="MCP transport (default stdio)")
    migrate = sub.add_parser("migrate", help="create or upgrade the database schema, then exit")
    for command in (mcp, migrate):
        command.add_argument(
            "--log-level",
            default="WARNING",
            choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
            type=str.upper,
            help="stderr log level (default WARNING)",
        )
        for flag, field, help_text in _SETTING_FLAGS:
            command.add_argument(
                flag, dest=field, default=None, help=f"{help_text} (env LORE_{field.upper()})"
            )
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    """Environment first, then any flags given on the command line."""
    overrides = {
        field: getattr(args, field) for _, field, _ in _SETTING_FLAGS if getattr(args, field) is not None
    }
    return Settings(**overrides)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, level=args.log_level.upper(), format="%(levelname)s %(name)s: %(message)s"
    )
    try:
        settings = settings_from(args)
    except Exception as exc:  # pydantic's message names the setting and what is wrong
        print(f"lore-memory: invalid configuration: {exc}", file=sys.stderr)
        return 2
    if args.command == "mcp":
        return serve(settings, log_level=args.log_level.upper())
    if args.command == "migrate":
        return migrate(settings)
    parser.error(f"unknown command {args.command}")
    return 2


def open_store(settings: Settings) -> Any:
    """The configured backend, migrated and ready (raises StoreError with a sentence for people)."""
    from stores import RankingParams, open_local_store, open_postgres_store

    ranking = RankingParams(half_life_days=settings.decay_half_life_days)
    if settings.store == "postgres":
        if not settings.database_url:
            raise SystemExit("lore-memory: LORE_STORE=postgres needs LORE_DATABASE_URL (or --database-url).")
        return open_postgres_store(
            settings.database_url, pool_size=settings.pool_size, ranking_params=ranking
        )
    if settings.store == "local":
        return open_local_store(settings.db_path, ranking_params=ranking)
    raise SystemExit(
        f"lore-memory: LORE_STORE={settings.store} is not available in this version; use local or postgres."
    )


def migrate(settings: Settings) -> int:
    """Bring the configured database to the current schema; running it again is harmless."""
    from stores import StoreError

    try:
        store = open_store(settings)
    except StoreError as exc:
        print(f"lore-memory: {exc}", file=sys.stderr)
        return 1
    store.close()
    where = settings.db_path if settings.store == "local" else "Postgres"
    print(f"lore-memory: {where} is at the current schema.", file=sys.stderr)
    return 0


def serve(settings: Settings, *, log_level: Any = "WARNING") -> int:
    """Open the store and serve; the model loads in the background (see LoadModelAfterFirstRequest)."""
    import anyio

    from lore_mcp.embedding import Embedder
    from lore_mcp.lessons_service import LessonService
    from lore_mcp.server import build_server
    from stores import StoreError

    try:
        store = open_store(settings)
    except StoreError as exc:
        print(f"lore-memory: {exc}", file=sys.stderr)
        return 1
    embedder = Embedder(settings.embedding_model)
    try:
        service = LessonService(store, embedder, default_project=settings.project)
        server = build_server(service, log_level=log_level)
        anyio.run(server.run_stdio_async)
    except KeyboardInterrupt:
        pass
    finally:
        store.close()
    return 0
