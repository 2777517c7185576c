"""What the ``lore-memory`` commands share: opening the app, and saying why a command failed.

Every failure a command reports is one line on stderr starting ``lore-memory:``; the
exit status says how it ended (0 done, 1 failed, 2 refused its arguments).
"""

from __future__ import annotations

import sys

from lore_mcp.app import App, open_app
from lore_mcp.settings import Settings


def open_or_report(settings: Settings) -> App | None:
    """``open_app``, or None after printing why the store did not open (the command then exits 1)."""
    from stores import StoreError

    try:
        return open_app(settings)
    except StoreError as exc:
        print(f"lore-memory: {exc}", file=sys.stderr)
        return None


def report_failure(exc: BaseException) -> int:
    """Print ``exc`` as its code and sentence (``describe`` logs anything unexpected); returns 1."""
    from lore_mcp.errors import describe

    code, message = describe(exc)
    print(f"lore-memory: {code}: {message}", file=sys.stderr)
    return 1
