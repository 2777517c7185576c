"""What to tell a person when Postgres answers a statement with an operational error.

Postgres reports lack of disk, memory or connections (class 53) like unreachability; calling
those "unreachable" sends a person to the network while the disk is full, so each is named with
its SQLSTATE and fix."""

from __future__ import annotations

import psycopg

UNREACHABLE = (
    "Postgres is unreachable or not answering right now; the call changed nothing. Try again shortly."
)
STATEMENT_TIMEOUT = (
    "Postgres stopped a statement that ran past its time limit (statement_timeout); "
    "the call changed nothing. Narrow the request, or try again when the database is less busy."
)
# SQLSTATE class 53 by code: what ran out, and what a person can do about it.
OUT_OF_RESOURCES = {
    "53100": "Postgres is out of disk space (SQLSTATE 53100, disk_full); the call changed nothing "
    "and nothing stored was lost. Free space on the database server's disk or grow its volume, "
    "then try again.",
    "53200": "Postgres ran out of memory (SQLSTATE 53200, out_of_memory); the call changed nothing. "
    "Try again shortly; if it keeps happening, give the database server more memory or lower its "
    "work_mem.",
    "53300": "Postgres has no connection free (SQLSTATE 53300, too_many_connections); the call "
    "changed nothing. Try again shortly; if it keeps happening, raise max_connections on the "
    "database server, or lower LORE_POOL_SIZE or the number of Lore servers.",
    "53400": "Postgres stopped the statement at one of its configured limits (SQLSTATE 53400, "
    "configuration_limit_exceeded, such as temp_file_limit); the call changed nothing. Narrow "
    "the request, or raise that limit on the database server.",
}

# A connect-time refusal has no SQLSTATE (libpq passes only text), so too_many_connections is
# known by its words: max_connections, CONNECTION LIMIT, superuser slots.
_NO_CONNECTION_FREE = ("too many clients", "too many connections", "connection slots are reserved")


def operational_sentence(error: BaseException | None) -> str:
    """The sentence for ``error``, the psycopg error under SQLAlchemy's ``OperationalError``."""
    if isinstance(error, psycopg.errors.QueryCanceled):
        return STATEMENT_TIMEOUT
    state = getattr(error, "sqlstate", None)
    if state is None and any(words in str(error).lower() for words in _NO_CONNECTION_FREE):
        state = "53300"
    if isinstance(state, str) and state.startswith("53"):
        return OUT_OF_RESOURCES.get(
            state,
            f"Postgres lacks the resources to run this (SQLSTATE {state}, insufficient resources); "
            "the call changed nothing. Check the database server's disk, memory and limits, then try again.",
        )
    return UNREACHABLE
