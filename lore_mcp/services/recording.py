"""Activity-log entries (``note``), appended in the transaction of the call's effect; a failed
call records only its error code after rollback, so it changes nothing stored but the log."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pydantic import ValidationError

from lore_mcp.auth import Caller
from lore_mcp.errors import INTERNAL_ERROR, UNAVAILABLE, LoreError, describe
from lore_mcp.redaction import fit, redact
from stores import ActivityNote, Scope, StoreError

if TYPE_CHECKING:  # the lesson store's module loads numpy: not before a stdio server's handshake
    from stores import Store

logger = logging.getLogger("lore_mcp.activity")

MAX_CLIENT_CHARS = 100


def clean_client(name: str | None) -> str | None:
    """The client's name printable, cut, redacted (``clientInfo`` may hold anything)."""
    if not isinstance(name, str):
        return None
    printable = "".join(c for c in name if c.isprintable()).strip()
    return None if not printable else fit(redact(printable[: MAX_CLIENT_CHARS * 2]).text, MAX_CLIENT_CHARS)


@dataclass(frozen=True)
class Who:
    """Who makes a call: its API key (None: no keys, the server's own org) and client's name."""

    caller: Caller | None = None
    client: str | None = None

    def note(self, kind: str, **fields: object) -> ActivityNote:
        """What a call of ``kind`` records of its caller (the key's id; none over stdio) and client."""
        key_id = self.caller.key_id if self.caller is not None else None
        person = self.caller is not None and self.caller.person
        client = clean_client(self.client)
        return ActivityNote(kind=kind, key_id=key_id, client=client, person=person, **fields)  # type: ignore[arg-type]


NO_KEY = Who()  # the default: no API key (the server's own org), no client name


def error_code(exc: BaseException) -> str:
    """The stable code a failure reaches the client with (``lore_mcp.errors.describe``)."""
    # Anything else is described (and logged) once, where the server answers the call.
    return describe(exc)[0] if isinstance(exc, LoreError | StoreError | ValidationError) else INTERNAL_ERROR


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
