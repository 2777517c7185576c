"""Activity-log entries (``note``), appended in the transaction of the call's effect; a failed
call records only its error code after rollback, so it changes nothing stored but the log.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from pydantic import ValidationError

from lore_mcp.auth import Caller
from lore_mcp.errors import INTERNAL_ERROR, UNAVAILABLE, LoreError, describe
from lore_mcp.redaction import fit, redact
from stores import ActivityNote, Scope, Store, StoreError

logger = logging.getLogger("lore_mcp.activity")

MAX_CLIENT_CHARS = 100


def clean_client(name: str | None) -> str | None:
    """The client's name printable, cut, redacted (``clientInfo`` may hold anything)."""
    if not isinstance(name, str):
        return None
    printable = "".join(c for c in name if c.isprintable()).strip()
    if not printable:
        return None
    return fit(redact(printable[: MAX_CLIENT_CHARS * 2]).text, MAX_CLIENT_CHARS)


def note(kind: str, caller: Caller | None, client: str | None, **fields: object) -> ActivityNote:
    """What a call of ``kind`` records of its caller (the key's id; none over stdio) and client."""
    key_id = caller.key_id if caller is not None else None
    person = caller is not None and caller.person
    return ActivityNote(kind=kind, key_id=key_id, client=clean_client(client), person=person, **fields)  # type: ignore[arg-type]


def error_code(exc: BaseException) -> str:
    """The stable code a failure reaches the client with (``lore_mcp.errors.describe``)."""
    if isinstance(exc, LoreError | StoreError | ValidationError):
        return describe(exc)[0]
    return INTERNAL_ERROR  # described (and logged) once, where the server answers the call


@contextlib.asynccontextmanager
async def failures_recorded(store: Store, scope: Scope, recorded: ActivityNote) -> AsyncIterator[None]:
    """Record a failure's code (after rollback) and re-raise; best-effort, ``UNAVAILABLE`` none."""
    try:
        yield
    except Exception as exc:
        code = error_code(exc)
        if code == UNAVAILABLE:
            # Database down or call timed out: the entry would only queue behind the failure.
            raise
        try:
            # Held in memory and written later (Store.append_activity): no thread, no deadline.
            store.append_activity(scope, recorded.failed(code))
        except Exception as log_exc:  # the call's own failure is the answer
            logger.warning("could not record a failed %s in the activity log: %s", recorded.kind, log_exc)
        raise
