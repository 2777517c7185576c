"""The ``lore-memory`` command: serving MCP and local administration.

Every setting is an environment variable (``LORE_*``) and the same-named flag of
``lore-memory mcp``; flags win. The CLI is for running and administering Lore,
never a second API: everything an agent does goes through MCP tools.
"""

from __future__ import annotations

import argparse
import contextlib
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
    ("--org", "org", "org served over stdio and administered by init/keys/export/import"),
    ("--api-url", "api_url", "team server URL (remote mode)"),
    ("--api-key", "api_key", "API key (remote mode)"),
    ("--embedding-model", "embedding_model", "sentence-transformers model name or path"),
    ("--embedding-url", "embedding_url", "OpenAI-compatible embeddings URL, e.g. http://localhost:11434/v1"),
    ("--embedding-api-key", "embedding_api_key", "API key for --embedding-url, sent as Bearer"),
    ("--embedding-dimension", "embedding_dimension", "vector length --embedding-url must return"),
    ("--embedding-timeout-s", "embedding_timeout_s", "seconds per --embedding-url request, retries included"),
    ("--embedding-batch-size", "embedding_batch_size", "texts per request to --embedding-url"),
    ("--decay-half-life-days", "decay_half_life_days", "half-life of time decay in recall ranking"),
    ("--rate-limit-per-minute", "rate_limit_per_minute", "tool calls per minute per API key"),
    ("--drain-timeout-s", "drain_timeout_s", "seconds SIGTERM lets HTTP requests finish before exiting"),
    ("--pool-size", "pool_size", "Postgres connections per server process"),
    ("--tools", "tools", "tool groups to serve: lessons,structured,history[,admin]"),
    ("--request-timeout-s", "request_timeout_s", "seconds a tool call may run before it answers UNAVAILABLE"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lore-memory", description="Memory for AI agents over MCP.")
    parser.add_argument("--version", action="version", version=f"lore-memory {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    mcp = sub.add_parser("mcp", help="serve MCP (stdio by default, or streamable HTTP)")
    mcp.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="MCP transport (default stdio)"
    )
    mcp.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8765, help="HTTP: port (default 8765)")
    mcp.add_argument(
        "--dev-no-auth",
        action="store_true",
        help="HTTP, development only: serve without API keys, as the org LORE_ORG; refused unless "
        "--host is a loopback address (for MCP conformance suites and inspectors that cannot send headers)",
    )
    migrate = sub.add_parser("migrate", help="create or upgrade the database schema, then exit")
    init = sub.add_parser("init", help="create the org and its root API key (team server)")
    init.add_argument("--org-name", default=None, help="display name of the org (default: its id)")
    init.add_argument("--json", action="store_true", help="print one JSON object with id and key")
    keys = sub.add_parser("keys", help="create, list and revoke API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key; it is printed once, never again")
    create.add_argument("--name", required=True, help="who or what holds the key")
    create.add_argument("--project", dest="key_project", default=None, help="limit the key to this project")
    create.add_argument("--root", action="store_true", help="a root key: every project, and key management")
    create.add_argument("--json", action="store_true", help="print one JSON object with id and key")
    listing = keys_sub.add_parser("list", help="list the org's keys (never their secrets)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    revoke = keys_sub.add_parser("revoke", help="revoke a key; it stops working on its next request")
    revoke.add_argument("key_id", metavar="ID", help="the key's id (see keys list)")
    revoke.add_argument("--json", action="store_true", help="print JSON")
    export = sub.add_parser("export", help="write lessons (and --with-history commits) as JSON Lines")
    export.add_argument("--project", dest="export_project", default=None, help="one project (default: all)")
    export.add_argument("--out", default=None, help="file to write (default: stdout)")
    export.add_argument("--with-history", action="store_true", help="also write every commit")
    importing = sub.add_parser("import", help="import an export file; importing twice adds nothing")
    importing.add_argument("file", metavar="FILE", help="a JSON Lines file written by `lore-memory export`")
    importing.add_argument(
        "--project", dest="import_project", default=None, help="put every lesson in this project"
    )
    importing.add_argument(
        "--strict",
        action="store_true",
        help="any malformed line aborts the import before anything is written",
    )
    importing.add_argument(
        "--from",
        dest="import_from",
        default="lore",
        choices=["lore", "server-memory", "mcp-memory-service"],
        help="what wrote FILE: lore-memory export (default), @modelcontextprotocol/server-memory's "
        "JSONL knowledge graph, or mcp-memory-service's JSON export",
    )
    doctor = sub.add_parser(
        "doctor", help="check the model, SQLite, the database or team server; say what to fix"
    )
    reembed = sub.add_parser(
        "reembed",
        help="embed every lesson again with the configured model and switch the store to it "
        "(resumable; the switch is one commit)",
    )
    reembed.add_argument(
        "--batch-size", type=int, default=None, help="lessons encoded and kept per transaction (default 256)"
    )
    for command in (mcp, migrate, init, create, listing, revoke, export, importing, doctor, reembed):
        command.add_argument(
            "--log-level",
            default="WARNING",
            choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
            type=str.upper,
            help="stderr log level (default WARNING)",
        )
        for flag, field, help_text in _SETTING_FLAGS:
            if command in (create, export, importing) and field == "project":
                continue  # their own --project means something else
            command.add_argument(
                flag, dest=field, default=None, help=f"{help_text} (env LORE_{field.upper()})"
            )
    return parser


def settings_from(args: argparse.Namespace) -> Settings:
    """Environment first, then any flags given on the command line."""
    overrides = {
        field: getattr(args, field)
        for _, field, _ in _SETTING_FLAGS
        if getattr(args, field, None) is not None
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
        if args.transport == "http":
            return serve_http(
                settings,
                host=args.host,
                port=args.port,
                log_level=args.log_level.upper(),
                no_auth=args.dev_no_auth,
            )
        return serve(settings, log_level=args.log_level.upper())
    if args.command == "migrate":
        return migrate(settings)
    if args.command in ("init", "keys"):
        return administer_keys(args, settings)
    if args.command == "doctor":
        from lore_mcp.doctor import run_checks

        return 0 if run_checks(settings) else 1
    if args.command == "export":
        return export_lessons(args, settings)
    if args.command == "import":
        return import_lessons(args, settings)
    if args.command == "reembed":
        return reembed_lessons(args, settings)
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
        "lore-memory: LORE_STORE=remote forwards to a team server and has no database here; "
        "run this command where the team server's database is (LORE_STORE=local or postgres)."
    )


def open_store_or_report(settings: Settings) -> Any:
    """``open_store``, or None after printing why it failed (for commands that then exit 1)."""
    from stores import StoreError

    try:
        return open_store(settings)
    except StoreError as exc:
        print(f"lore-memory: {exc}", file=sys.stderr)
        return None


def migrate(settings: Settings) -> int:
    """Bring the configured database to the current schema; running it again is harmless."""

    store = open_store_or_report(settings)
    if store is None:
        return 1
    store.close()
    where = settings.db_path if settings.store == "local" else "Postgres"
    print(f"lore-memory: {where} is at the current schema.", file=sys.stderr)
    return 0


def serve(settings: Settings, *, log_level: Any = "WARNING") -> int:
    """Open the store and serve; the model loads on a background thread from the start."""
    import anyio

    from lore_mcp.embedding import embedder_for
    from lore_mcp.lessons_service import LessonService
    from lore_mcp.server import build_server

    if settings.store == "remote":
        return serve_remote(settings, log_level=log_level)
    store = open_store_or_report(settings)
    if store is None:
        return 1
    embedder = embedder_for(settings)
    # The default model loads in about 0.3 s, mostly inside ONNX Runtime: starting now rather
    # than after the first answer makes the first save wait less and initialize no longer.
    embedder.start()
    try:
        service = LessonService(store, embedder, default_project=settings.project, org=settings.org)
        from lore_mcp.keys_service import KeyService, KeyTools

        keys = KeyTools(KeyService(store.keys)) if "admin" in settings.tool_groups else None
        server = build_server(
            service,
            keys=keys,
            tools=settings.tool_groups,
            log_level=log_level,
            request_timeout_s=settings.request_timeout_s,
        )
        anyio.run(server.run_stdio_async)
    except KeyboardInterrupt:
        pass
    finally:
        store.close()
    return 0


def serve_remote(settings: Settings, *, log_level: Any) -> int:
    """stdio, forwarding every call to the team server at LORE_API_URL (see ``lore_mcp.remote``)."""
    import anyio

    from lore_mcp import remote

    if not settings.api_url or not settings.api_key:
        print("lore-memory: LORE_STORE=remote needs LORE_API_URL and LORE_API_KEY.", file=sys.stderr)
        return 2
    try:
        remote.mcp_url(settings.api_url)
    except ValueError as exc:
        print(f"lore-memory: {exc}", file=sys.stderr)
        return 2
    project = settings.project if "project" in settings.model_fields_set else None
    with contextlib.suppress(KeyboardInterrupt):
        anyio.run(
            lambda: remote.serve_remote(
                settings.api_url or "",
                settings.api_key or "",
                default_project=project,
                tools=settings.tool_groups,
                log_level=log_level,
            )
        )
    return 0


def serve_http(
    settings: Settings, *, host: str, port: int, log_level: Any = "WARNING", no_auth: bool = False
) -> int:
    """The team server: streamable HTTP with API keys (see ``lore_mcp.http``)."""
    import anyio
    from mcp.server.auth.settings import AuthSettings

    from lore_mcp import http
    from lore_mcp.auth import ApiKeyVerifier
    from lore_mcp.embedding import embedder_for
    from lore_mcp.keys_service import KeyService, KeyTools
    from lore_mcp.lessons_service import LessonService
    from lore_mcp.server import build_server

    if settings.store == "remote":
        print(
            "lore-memory: a team server serves its own store; use LORE_STORE=local or postgres.",
            file=sys.stderr,
        )
        return 2
    if no_auth and not http.is_loopback(host):
        print(
            f"lore-memory: --dev-no-auth serves without API keys, so it only binds a loopback address "
            f"(127.0.0.1, ::1, localhost), not {host!r}.",
            file=sys.stderr,
        )
        return 2
    store = open_store_or_report(settings)
    if store is None:
        return 1
    embedder = embedder_for(settings)
    embedder.start()  # a server expects traffic; load the model now rather than on the first call
    url_host = f"[{host}]" if ":" in host else host
    try:
        service = LessonService(store, embedder, default_project=settings.project, org=settings.org)
        auth: dict[str, Any] = (
            {}
            if no_auth
            else {
                "token_verifier": ApiKeyVerifier(store.keys),
                # Lore's keys are its own, not OAuth: no metadata routes, just bearer checks.
                "auth": AuthSettings(issuer_url=f"http://{url_host}:{port}", resource_server_url=None),
            }
        )
        if no_auth:
            print(
                f"lore-memory: WARNING: serving WITHOUT authentication (--dev-no-auth) as org {settings.org!r}.",
                file=sys.stderr,
            )
        server = build_server(
            service,
            keys=KeyTools(KeyService(store.keys)),
            tools=settings.tool_groups,
            log_level=log_level,
            request_timeout_s=settings.request_timeout_s,
            **auth,
        )
        print(f"lore-memory: serving MCP at http://{url_host}:{port}{http.MCP_PATH}", file=sys.stderr)
        anyio.run(
            lambda: http.serve_http(
                server,
                host=host,
                port=port,
                health=lambda: store.keys.get_org(settings.org),
                store_name=settings.store,
                rate_limit_per_minute=settings.rate_limit_per_minute,
                log_level=log_level,
                drain_timeout_s=settings.drain_timeout_s,
            )
        )
    except KeyboardInterrupt:
        pass
    finally:
        store.close()
    return 0


def administer_keys(args: argparse.Namespace, settings: Settings) -> int:
    """`init` and `keys create|list|revoke`, on the configured database."""
    import json

    from lore_mcp.errors import LoreError
    from lore_mcp.keys_service import KeyService
    from stores import StoreError

    store = open_store_or_report(settings)
    if store is None:
        return 1
    service = KeyService(store.keys)
    try:
        if args.command == "init":
            created = service.init_org(settings.org, name=args.org_name)
            return _print_created(created, args.json, first=True)
        if args.keys_command == "create":
            created = service.create_key(
                settings.org, name=args.name, project=args.key_project, root=args.root
            )
            return _print_created(created, args.json, first=False)
        if args.keys_command == "list":
            listed = service.list_keys(settings.org)
            if args.json:
                print(json.dumps({"keys": [k.model_dump(mode="json") for k in listed]}, indent=2))
            else:
                _print_key_table(listed)
            return 0
        revoked = service.revoke_key(settings.org, args.key_id)
        if args.json:
            print(revoked.model_dump_json(indent=2))
        else:
            print(f"Revoked {revoked.name} ({revoked.id}); it stops working on its next request.")
        return 0
    except (LoreError, StoreError) as exc:
        from lore_mcp.errors import describe

        code, message = describe(exc)
        print(f"lore-memory: {code}: {message}", file=sys.stderr)
        return 1
    finally:
        store.close()


def _print_created(created: Any, as_json: bool, *, first: bool) -> int:
    if as_json:
        print(created.model_dump_json(indent=2))
        return 0
    what = f"org {created.org!r} and its root key" if first else f"key {created.name!r}"
    print(f"Created {what}.\n")
    print(f"  id:      {created.id}")
    print(f"  key:     {created.key}")
    print(f"  project: {created.project or '(all projects)'}{'  root' if created.root else ''}\n")
    print("The key is shown this once; Lore keeps only its SHA-256. Store it in a secret manager.")
    return 0


def _print_key_table(keys: Sequence[Any]) -> None:
    if not keys:
        print("No keys yet: run `lore-memory init`.")
        return
    print(f"{'ID':26}  {'NAME':20}  {'PREFIX':17}  {'PROJECT':16}  {'ROOT':4}  {'LAST USED':20}  REVOKED")
    for k in keys:
        last = k.last_used_at.strftime("%Y-%m-%d %H:%M:%S") if k.last_used_at else "never"
        revoked = k.revoked_at.strftime("%Y-%m-%d %H:%M:%S") if k.revoked_at else ""
        print(
            f"{k.id:26}  {k.name[:20]:20}  {k.prefix:17}  {(k.project or '*')[:16]:16}  "
            f"{'yes' if k.root else 'no':4}  {last:20}  {revoked}"
        )


def _transfer(settings: Settings, store: Any) -> Any:
    from lore_mcp.embedding import embedder_for
    from lore_mcp.lessons_service import LessonService
    from lore_mcp.transfer import Transfer

    service = LessonService(store, embedder_for(settings), default_project=settings.project)
    return Transfer(service)


def export_lessons(args: argparse.Namespace, settings: Settings) -> int:
    """`lore-memory export`: JSON Lines to --out or stdout; counts to stderr."""
    import json

    from lore_mcp.lessons_service import check_project
    from stores import StoreError

    try:
        project = check_project(args.export_project) if args.export_project else None
        store = open_store(settings)
    except StoreError as exc:
        print(f"lore-memory: {exc}", file=sys.stderr)
        return 1
    except Exception as exc:
        print(f"lore-memory: VALIDATION_ERROR: {exc}", file=sys.stderr)
        return 2
    counts = {"lesson": 0, "commit": 0}
    out = open(args.out, "w", encoding="utf-8") if args.out else sys.stdout  # noqa: SIM115
    try:
        for line in _transfer(settings, store).export_lines(
            settings.org, project, with_history=args.with_history
        ):
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            counts[line["type"]] += 1
    except StoreError as exc:
        print(f"lore-memory: {exc}", file=sys.stderr)
        return 1
    finally:
        if out is not sys.stdout:
            out.close()
        store.close()
    history = f" and {counts['commit']} commits" if args.with_history else ""
    print(f"lore-memory: exported {counts['lesson']} lessons{history}.", file=sys.stderr)
    return 0


def import_lessons(args: argparse.Namespace, settings: Settings) -> int:
    """`lore-memory import FILE`: checks every line, re-embeds in batches with a progress bar."""
    from tqdm import tqdm

    from lore_mcp.errors import describe
    from lore_mcp.lessons_service import check_project

    try:
        project = check_project(args.import_project) if args.import_project else None
        with open(args.file, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        print(f"lore-memory: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    except Exception as exc:
        print(f"lore-memory: VALIDATION_ERROR: {describe(exc)[1]}", file=sys.stderr)
        return 2
    lines, foreign = text.splitlines(), []
    if args.import_from != "lore":  # another server's export, as Lore lesson lines
        from lore_mcp.importers import convert

        converted = convert(args.import_from, text)
        lines, foreign = converted.lines, converted.errors
        if args.strict and foreign:
            lines = []  # nothing is written; the report below says why
    store = open_store_or_report(settings)
    if store is None:
        return 1
    try:
        transfer = _transfer(settings, store)
        with tqdm(unit="lesson", file=sys.stderr, disable=None) as bar:

            def started(total: int) -> None:
                bar.reset(total=total)

            report = transfer.import_file(
                lines,
                org=settings.org,
                project=project,
                strict=args.strict,
                started=started,
                progress=bar.update,
            )
    except Exception as exc:  # describe() logs anything unexpected
        code, message = describe(exc)
        print(f"lore-memory: {code}: {message}", file=sys.stderr)
        return 1
    finally:
        store.close()
    report.errors[:0] = foreign
    for error in report.errors:
        print(f"lore-memory: {error}", file=sys.stderr)
    if args.strict and report.errors:
        print(
            f"lore-memory: {len(report.errors)} malformed lines; nothing was imported (--strict).",
            file=sys.stderr,
        )
        return 1
    redacted = f"; redacted {', '.join(sorted(report.redacted))}" if report.redacted else ""
    print(
        f"lore-memory: imported {report.added} lessons, skipped {report.skipped} already present, "
        f"{len(report.errors)} malformed lines skipped, {report.commits} commit lines not replayed, "
        f"{report.merged} merged into a stored lesson they added nothing to{redacted}.",
        file=sys.stderr,
    )
    return 1 if report.errors else 0


def reembed_lessons(args: argparse.Namespace, settings: Settings) -> int:
    """`lore-memory reembed`: every lesson of the store embedded with the configured model,
    a progress bar on stderr, then one commit that switches the store to that model."""
    from tqdm import tqdm

    from lore_mcp.embedding import embedder_for
    from lore_mcp.errors import describe
    from lore_mcp.reembed import BATCH_SIZE, reembed_store

    batch_size = args.batch_size if args.batch_size is not None else BATCH_SIZE
    if not 1 <= batch_size <= 10_000:
        print("lore-memory: VALIDATION_ERROR: --batch-size must be between 1 and 10000.", file=sys.stderr)
        return 2
    store = open_store_or_report(settings)
    if store is None:
        return 1
    try:
        with tqdm(unit="lesson", file=sys.stderr, disable=None) as bar:

            def started(done: int, total: int) -> None:
                bar.reset(total=total)
                bar.update(done)

            report = reembed_store(
                store, embedder_for(settings), batch_size=batch_size, started=started, progress=bar.update
            )
    except Exception as exc:  # describe() logs anything unexpected
        code, message = describe(exc)
        print(f"lore-memory: {code}: {message}", file=sys.stderr)
        return 1
    finally:
        store.close()
    model = f"{report.model.name} ({report.model.dimension} dimensions)"
    if not report.switched:
        print(f"lore-memory: the store already records {model}; nothing to re-embed.", file=sys.stderr)
        return 0
    kept = f" ({report.kept} kept from an earlier run)" if report.kept else ""
    print(
        f"lore-memory: re-embedded {report.reembedded} lessons{kept} with {model} in "
        f"{report.seconds:.1f} s; the store now records {model}.",
        file=sys.stderr,
    )
    return 0
