"""What each call records in the activity log, and a failure's entry.

The services decide what a call records (``note``): its kind, the caller's key id and the
client's name (redacted and cut short like every stored name; never a secret), and for a
recall the redacted query and what came back. The store appends the entry in the transaction
of the call's effect. A call that fails records only its error code (``failures_recorded``),
after its transaction rolled back, so a failed call changes nothing stored but the log.
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
    """The client's name as the log keeps it: printable, at most ``MAX_CLIENT_CHARS``, and
    redacted (a client may put anything in its ``clientInfo``)."""
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
    """Record the code of a failure in the block (whose transaction has rolled back by then) as
    the call's entry, then raise it; an ``UNAVAILABLE`` failure records nothing. Recording is
    best-effort: a log that cannot be written does not change the call's answer."""
    try:
        yield
    except Exception as exc:
        code = error_code(exc)
        if code == UNAVAILABLE:
            # The database could not be reached or written, or the call ran out of time: its
            # entry would only queue behind what just failed.
            raise
        try:
            # Held in memory and written later (Store.append_activity): no thread, no deadline.
            store.append_activity(scope, recorded.failed(code))
        except Exception as log_exc:  # the call's own failure is the answer
            logger.warning("could not record a failed %s in the activity log: %s", recorded.kind, log_exc)
        raise
