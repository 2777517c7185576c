"""Shared by commands: opening the app and failing as ``lore-memory: CODE: sentence`` (exit 1;
2 for refused arguments; tracebacks only with ``--debug``)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Literal

from lore_mcp.app import App, open_app
from lore_mcp.settings import Settings

if TYPE_CHECKING:
    from stores import Unwritable

# On an unwritable local database: refuse (it writes), warn (a server: reads work, saves answer
# UNAVAILABLE), or say nothing (read-only).
ReadOnly = Literal["refuse", "warn", "allow"]


def open_or_report(settings: Settings, *, read_only: ReadOnly = "refuse") -> App | None:
    """``open_app``, or None after printing why the store cannot open or be written (exit 1)."""
    from stores import StoreError

    try:
        app = open_app(settings)
    except StoreError as exc:
        report_failure(exc)
        return None
    problem = read_only_problem(settings) if read_only != "allow" else None
    if problem is not None:
        if read_only == "refuse":
            say(f"UNAVAILABLE: {problem.sentence('so this command cannot run')}")
            app.close()
            return None
        say(
            "WARNING: UNAVAILABLE: "
            + problem.sentence("so recall works but every save will answer UNAVAILABLE")
        )
    return app


def read_only_problem(settings: Settings) -> Unwritable | None:
    """What keeps this user from writing the local database (None on Postgres, or when nothing does)."""
    if settings.store != "local":
        return None
    from stores import unwritable

    return unwritable(settings.db_path)


def say(text: str, status: int = 0) -> int:
    """``lore-memory: text`` on stderr (progress, counts, refusals); returns the exit ``status``."""
    print(f"lore-memory: {text}", file=sys.stderr)
    return status


def report_failure(exc: BaseException) -> int:
    """Print ``exc`` as its code and sentence (``describe`` logs anything unexpected); returns 1."""
    from lore_mcp.errors import describe

    code, message = describe(exc)
    return say(f"{code}: {message}", 1)
