"""The ``lore-memory`` command. Every ``LORE_*`` setting is also a flag (flags win). It runs and
administers Lore, never a second API: what an agent does goes through MCP tools."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeAlias

from lore_mcp import __version__

if TYPE_CHECKING:  # imported when a command runs: pydantic's settings cost `--help` 0.2 s
    from lore_mcp.settings import Settings

# Flags of `lore-memory mcp`, one per setting: its field (``_flag`` names it) and help.
_SETTING_FLAGS = {
    "store": "backend: local (default), postgres or remote",
    "db_path": "SQLite file of the local store",
    "database_url": "Postgres URL",
    "database_read_url": "Postgres URL of a read replica for recall and listings",
    "database_direct_url": "direct Postgres URL when --database-url is PgBouncer",
    "project": "project used when a tool call names none",
    "org": "org served over stdio and administered by init/keys/export/import",
    "api_url": "team server URL (remote mode)",
    "api_key": "API key (remote mode)",
    "embedding_model": "sentence-transformers model name or path",
    "embedding_url": "OpenAI-compatible embeddings URL, e.g. http://localhost:11434/v1",
    "embedding_api_key": "API key for --embedding-url, sent as Bearer",
    "embedding_dimension": "vector length --embedding-url must return",
    "embedding_timeout_s": "seconds per --embedding-url request, retries included",
    "embedding_batch_size": "texts per request to --embedding-url",
    "decay_half_life_days": "half-life of time decay in recall ranking",
    "rate_limit_per_minute": "tools/call requests per API key per minute, shared by every server process on "
    "one Postgres; discovery, listings, resources and notifications are free",
    "drain_timeout_s": "seconds SIGTERM lets HTTP requests finish before exiting",
    "trusted_proxies": "proxies whose X-Forwarded-For is believed (IPs, networks)",
    "stateless_http": "true: serve handshake-era HTTP clients without sessions, "
    "for replicas with no affinity",
    "request_state_secret": "key every replica seals requestState with (32+ characters; "
    "comma-separated to rotate)",
    "oauth_registration": "who may register OAuth clients at /register: open (default, within limits) "
    "or key (an API key)",
    "pool_size": "Postgres connections per server process",
    "tools": "tool groups to serve: lessons,structured,history[,activity][,admin][,loop]",
    "project_from_repo": "true: the git repository's name is the project",
    "loop_inject": "false: hooks give agents no lessons",
    "loop_session_chars": "characters of lessons at most at session start",
    "loop_prompt_chars": "characters of lessons at most with a prompt",
    "loop_prompt_min_score": "recall score a prompt's lesson needs",
    "loop_capture": "false: stop hooks never ask the agent to save",
    "loop_asks_per_hour": "asks to save per caller and hour at most",
    "loop_dry_run": "true: stop hooks only record what they would ask",
    "activity_max_age_days": "days the activity log keeps an entry",
    "activity_max_entries": "activity log entries kept per project",
    "request_timeout_s": "seconds a tool call may run before it answers UNAVAILABLE",
}

# What add_subparsers returns: each command is added to it.
Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def path_argument(text: str) -> Path:
    """A path on the command line, expanded as every path setting is (``settings.expand_path``)."""
    from lore_mcp.settings import expand_path

    try:
        return expand_path(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lore-memory", description="Memory for AI agents over MCP.")
    parser.add_argument("--version", action="version", version=f"lore-memory {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    serving = _serving_commands(sub)
    keys = _key_commands(sub)
    moving = _transfer_commands(sub)
    upkeep = _upkeep_commands(sub)
    loop = _loop_commands(sub)
    # These take --project for what they act on, not for the setting of that name.
    own_project = {keys[0], *moving, *loop[1:]}
    for command in (*serving, *keys, *moving, *upkeep, *loop):
        _add_common_flags(command, settings_project=command not in own_project)
    return parser


def _serving_commands(sub: Commands) -> list[argparse.ArgumentParser]:
    """mcp, ui, migrate, init."""
    mcp = sub.add_parser("mcp", help="serve MCP (stdio by default, or streamable HTTP)")
    mcp.add_argument(
        "--transport", choices=["stdio", "http"], default="stdio", help="MCP transport (default stdio)"
    )
    mcp.add_argument("--host", default="127.0.0.1", help="HTTP: address to bind (default 127.0.0.1)")
    mcp.add_argument("--port", type=int, default=8765, help="HTTP: port (default 8765)")
    mcp.add_argument(
        "--public-url",
        help="HTTP: the base URL clients reach the server at (https://lore.example.com, no path), its OAuth "
        "issuer with /mcp the resource; default http://HOST:PORT, where OAuth is offered only on loopback",
    )
    mcp.add_argument(
        "--dev-no-auth",
        action="store_true",
        help="HTTP, development only: serve without API keys, as the org LORE_ORG; refused unless "
        "--host is a loopback address (for MCP conformance suites and inspectors that cannot send headers)",
    )
    ui = sub.add_parser("ui", help="open the page for people on this machine's store, in the browser")
    ui.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: one the system picks)")
    ui.add_argument("--no-browser", action="store_true", help="only print the page's URL")
    migrate = sub.add_parser("migrate", help="create or upgrade the database schema, then exit")
    init = sub.add_parser("init", help="create the org and its root API key (team server)")
    init.add_argument("--org-name", help="display name of the org (default: its id)")
    init.add_argument("--json", action="store_true", help="print one JSON object with id and key")
    return [mcp, ui, migrate, init]


def _key_commands(sub: Commands) -> list[argparse.ArgumentParser]:
    """keys create, keys list, keys revoke (create first)."""
    keys = sub.add_parser("keys", help="create, list and revoke API keys")
    keys_sub = keys.add_subparsers(dest="keys_command", required=True)
    create = keys_sub.add_parser("create", help="create a key; it is printed once, never again")
    create.add_argument("--name", required=True, help="who or what holds the key")
    create.add_argument("--project", dest="key_project", help="limit the key to this project")
    create.add_argument("--root", action="store_true", help="a root key: every project, and key management")
    create.add_argument("--json", action="store_true", help="print one JSON object with id and key")
    listing = keys_sub.add_parser("list", help="list the org's keys (never their secrets)")
    listing.add_argument("--json", action="store_true", help="print JSON")
    revoke = keys_sub.add_parser("revoke", help="revoke a key; it stops working on its next request")
    revoke.add_argument("key_id", metavar="ID", help="the key's id (see keys list)")
    revoke.add_argument("--json", action="store_true", help="print JSON")
    return [create, listing, revoke]


def _transfer_commands(sub: Commands) -> list[argparse.ArgumentParser]:
    """export, import."""
    export = sub.add_parser("export", help="write lessons (and --with-history commits) as JSON Lines")
    export.add_argument("--project", dest="export_project", help="one project (default: all)")
    export.add_argument("--out", type=path_argument, help="file to write (default: stdout)")
    export.add_argument("--with-history", action="store_true", help="also write every commit")
    export.add_argument(
        "--with-vectors",
        action="store_true",
        help="also write each lesson's vector and the model that made it: an import into a store of "
        "that model embeds nothing",
    )
    importing = sub.add_parser("import", help="import an export file; importing twice adds nothing")
    importing.add_argument(
        "file", metavar="FILE", type=path_argument, help="a JSON Lines file written by `lore-memory export`"
    )
    importing.add_argument("--project", dest="import_project", help="put every lesson in this project")
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
    return [export, importing]


def _upkeep_commands(sub: Commands) -> list[argparse.ArgumentParser]:
    """doctor, reembed."""
    doctor = sub.add_parser(
        "doctor", help="check the model, SQLite, the database or team server; say what to fix"
    )
    reembed = sub.add_parser(
        "reembed",
        help="embed every lesson again with the configured model and switch the store to it "
        "(resumable; the switch is one commit)",
    )
    reembed.add_argument(
        "--batch-size", type=int, help="lessons encoded and kept per transaction (default 256)"
    )
    return [doctor, reembed]


def _loop_commands(sub: Commands) -> list[argparse.ArgumentParser]:
    """hook (what a client runs), hooks install, hooks uninstall."""
    hook = sub.add_parser(
        "hook", help="answer a client's hook: hook input JSON on stdin, its answer on stdout"
    )
    hook.add_argument("event", choices=["session-start", "prompt", "stop", "pre-compact"])
    hook.add_argument(
        "--client",
        choices=["claude-code", "cursor"],
        help="the answer's format (default: cursor where CURSOR_VERSION is set, else claude-code)",
    )
    hooks = sub.add_parser("hooks", help="add Lore's hooks to a client's settings, or remove them")
    hooks_sub = hooks.add_subparsers(dest="hooks_command", required=True)
    made = []
    for name, text in (("install", "merge Lore's hooks in"), ("uninstall", "remove exactly Lore's hooks")):
        command = hooks_sub.add_parser(name, help=f"{text} (other hooks stay as they are)")
        command.add_argument("client", choices=["claude-code", "cursor"])
        command.add_argument(
            "--project",
            dest="in_project",
            action="store_true",
            help="this project's settings (.claude/settings.json, .cursor/hooks.json) instead of the user's",
        )
        made.append(command)
    return [hook, *made]


def _add_common_flags(command: argparse.ArgumentParser, *, settings_project: bool) -> None:
    """--log-level, --debug and the settings' flags (``_SETTING_FLAGS``), on every command."""
    command.add_argument(
        "--debug",
        action="store_true",
        help="print the traceback of an unexpected error (on the terminal and in logs); "
        "without it each failure is one line",
    )
    command.add_argument(
        "--log-level",
        default="WARNING",
        choices=["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
        type=str.upper,
        help="stderr log level (default WARNING)",
    )
    for field, help_text in _SETTING_FLAGS.items():
        if field == "project" and not settings_project:
            continue  # their own --project means something else
        command.add_argument(_flag(field), dest=field, help=f"{help_text} (env LORE_{field.upper()})")


def _flag(field: str) -> str:
    return "--" + field.replace("_", "-")


def settings_from(args: argparse.Namespace) -> Settings:
    """Environment first, then any flags given on the command line."""
    from lore_mcp.settings import Settings

    given = {field: getattr(args, field, None) for field in _SETTING_FLAGS}
    return Settings(**{field: value for field, value in given.items() if value is not None})


def configuration_problem(exc: Exception) -> str:
    """A settings error as one line naming variables and flags, never values (keys may be)."""
    from pydantic import ValidationError

    if not isinstance(exc, ValidationError):
        return str(exc)
    parts = []
    for err in exc.errors(include_url=False, include_input=False):
        field = str(err["loc"][0]) if err["loc"] else ""
        name = f"LORE_{field.upper()} ({_flag(field)})" if field in _SETTING_FLAGS else field or "settings"
        parts.append(f"{name}: {err['msg'].removeprefix('Value error, ').rstrip('.')}")
    return "; ".join(parts)


class _OneLineFormatter(logging.Formatter):
    """Log lines with the exception's type and text instead of tracebacks (``--debug`` keeps them)."""

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_info and record.exc_info[1] is not None:
            exc = record.exc_info[1]
            record = logging.makeLogRecord(
                {**record.__dict__, "exc_info": None, "exc_text": None, "stack_info": None}
            )
            record.msg = f"{record.getMessage()}: {type(exc).__name__}: {exc} (--debug shows the traceback)"
            record.args = None
        return super().format(record)


def main(argv: Sequence[str] | None = None) -> int:
    """Run one command; a failure is one ``lore-memory: CODE: sentence`` stderr line."""
    args = build_parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    form = "%(levelname)s %(name)s: %(message)s"
    handler.setFormatter(logging.Formatter(form) if args.debug else _OneLineFormatter(form))
    logging.basicConfig(level=args.log_level.upper(), handlers=[handler])
    try:
        return _run(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:
        if args.debug:
            traceback.print_exc()
        print(
            f"lore-memory: INTERNAL_ERROR: {args.command} stopped on an unexpected error "
            f"({type(exc).__name__}: {exc}); run it again with --debug to see where.",
            file=sys.stderr,
        )
        return 1


# "module:name" in lore_mcp.cli, imported only when run, so `--help` and `keys list` stay quick.
_COMMANDS = {
    "mcp": "serve:run_mcp",
    "ui": "ui:run_ui",
    "migrate": "admin:migrate",
    "init": "admin:administer_keys",
    "keys": "admin:administer_keys",
    "hook": "hooks:run_loop_command",
    "hooks": "hooks:run_loop_command",
    "doctor": "doctor:run_doctor",
    "export": "transfer:export_lessons",
    "import": "transfer:import_lessons",
    "reembed": "transfer:reembed_lessons",
}


def _run(args: argparse.Namespace) -> int:
    try:
        settings = settings_from(args)
    except Exception as exc:  # pydantic's errors, one line naming each setting
        print(
            f"lore-memory: VALIDATION_ERROR: invalid configuration: {configuration_problem(exc)}.",
            file=sys.stderr,
        )
        # A client reads a hook's status 2 as "block": the prompt refused, the agent kept from stopping.
        return 0 if args.command == "hook" else 2
    module, name = _COMMANDS[args.command].split(":")
    command: Callable[[argparse.Namespace, Settings], int] = getattr(
        importlib.import_module(f"lore_mcp.cli.{module}"), name
    )
    return command(args, settings)
