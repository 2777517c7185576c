"""Connecting to Postgres: the engine and pool, row-level security, errors.

The org boundary holds twice: queries name their org, and RLS shows a transaction only ``lore.org``'s
rows; superusers and BYPASSRLS roles skip policies, so they switch to ``lore_rls``. No call waits for
ever (``CONNECT_DEFAULTS``, ``SESSION_DEFAULTS``, and ``hang`` for a frozen server); unreachable, or out
of disk, memory or connections, becomes a named ``UnavailableError``."""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Iterator, Mapping
from typing import Any

import psycopg
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from stores.errors import UnavailableError
from stores.postgres.hang import HangWatch, connect_watched

logger = logging.getLogger("stores.postgres")

RLS_ROLE = "lore_rls"

# The connection record's ``info`` key holding the role each transaction takes (or None).
ROLE_INFO = "lore.role"
# psycopg prepares a statement its connection ran five times; through the pooler, never (PgBouncer
# 1.18 does not track prepared statements, so the next transaction's server connection lacks them).
CONNECT_ARGS: dict[str, Any] = {"prepare_threshold": None}


# Client side, in libpq's names; LORE_DATABASE_URL's query string wins over each.
CONNECT_DEFAULTS: dict[str, str] = {
    "connect_timeout": "5",  # seconds for a new connection to be answered (libpq's floor is 2)
    # Notice a server or network that vanished while a call waits on it (TCP only).
    "keepalives": "1",
    "keepalives_idle": "5",
    "keepalives_interval": "2",
    "keepalives_count": "3",
    "tcp_user_timeout": "10000",  # ms that sent data may go unacknowledged
}
# Server side, unless the URL's ``options`` sets it; migrations lift the statement limit.
SESSION_DEFAULTS: dict[str, str] = {"statement_timeout": "30s", "idle_in_transaction_session_timeout": "60s"}
POOL_TIMEOUT_S = 5.0  # how long a call waits for a pooled connection when all are busy
# Lack of disk, memory or connections (class 53) is reported like unreachability; calling it that
# sends a person to the network while the disk is full, so each is named with its SQLSTATE and fix.
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


def engine_for(url: str, pool_size: int, *, pooled: bool = False) -> Engine:
    """A psycopg engine knowing pgvector, dropping superuser powers, timing out (per transaction, pooled)."""
    sa_url = make_url(url)
    if sa_url.drivername in ("postgres", "postgresql"):
        sa_url = sa_url.set(drivername="postgresql+psycopg")
    engine = create_engine(
        sa_url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,  # a connection that died with the server is replaced, not used
        pool_timeout=POOL_TIMEOUT_S,
        # connect_args win over the URL's parameters, so only what the URL leaves out.
        connect_args={k: v for k, v in CONNECT_DEFAULTS.items() if k not in sa_url.query}
        | (CONNECT_ARGS if pooled else {}),
    )
    watch = HangWatch()
    session = session_settings(sa_url)
    event.listen(engine, "do_connect", lambda _d, _r, cargs, cparams: connect_watched(watch, cargs, cparams))

    def on_connect(dbapi_conn: Any, record: Any) -> None:
        record.info[ROLE_INFO] = _on_connect(dbapi_conn, {} if pooled else session, set_role=not pooled)

    event.listen(engine, "connect", on_connect)
    if pooled:
        settings_per_transaction(engine, session)
    return engine


def session_settings(url: URL) -> dict[str, str]:
    """``SESSION_DEFAULTS`` less those the URL's ``options`` parameter sets itself."""
    options = url.query.get("options", "")
    text_options = " ".join(options) if isinstance(options, tuple) else options
    named = {name.replace("-", "_") for name in re.findall(r"(?:-c\s*|--)([A-Za-z0-9_.-]+)=", text_options)}
    return {name: value for name, value in SESSION_DEFAULTS.items() if name not in named}


def _on_connect(dbapi_conn: Any, session: Mapping[str, str], *, set_role: bool) -> str | None:
    """Sets up a new connection; returns the role its transactions must take (or None)."""
    from pgvector.psycopg import register_vector

    with dbapi_conn.cursor() as cur:
        cur.execute("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user")
        privileged = bool(cur.fetchone()[0])
        cur.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (RLS_ROLE,))
        has_role = cur.fetchone() is not None
        if privileged and has_role and set_role:
            cur.execute(f"SET ROLE {RLS_ROLE}")
        if session:
            calls = ", ".join("set_config(%s, %s, false)" for _ in session)
            cur.execute(f"SELECT {calls}", [part for item in session.items() for part in item])
    dbapi_conn.commit()
    try:
        register_vector(dbapi_conn)
    except Exception:
        # Before the first migration the extension may not exist yet; migrate() re-registers.
        dbapi_conn.rollback()
    return RLS_ROLE if privileged and has_role else None


@contextlib.contextmanager
def transaction(engine: Engine, org: str | None) -> Iterator[Connection]:
    """One transaction with ``lore.org`` set, translating connection failures to UnavailableError."""
    with unavailable_on_failure(), engine.begin() as conn:
        if org is not None:
            conn.execute(text("SELECT set_config('lore.org', :org, true)"), {"org": org})
        yield conn


@contextlib.contextmanager
def unavailable_on_failure() -> Iterator[None]:
    """Turn every way of not getting an answer from Postgres into ``UnavailableError``."""
    try:
        yield
    except PoolTimeoutError as exc:
        logger.warning("postgres pool exhausted: %s", exc)
        raise UnavailableError(
            f"Every Postgres connection of this server stayed busy for {POOL_TIMEOUT_S:.0f} s "
            "(the database is slow or not answering); the call changed nothing. Try again shortly."
        ) from exc
    except OperationalError as exc:
        logger.warning("postgres unavailable: %s", exc.orig)
        # Unreachable, a statement timeout, or out of disk, memory or connections: named.
        raise UnavailableError(operational_sentence(exc.orig)) from exc
    except DBAPIError as exc:
        if exc.connection_invalidated:
            raise UnavailableError(
                "The connection to Postgres was lost; the call changed nothing. Try again."
            ) from exc
        raise


def as_owner(conn: Connection) -> None:
    """For this transaction only, act as the login role again (DDL needs the tables' owner)."""
    conn.exec_driver_sql("SET LOCAL ROLE NONE")


def settings_per_transaction(engine: Engine, session: Mapping[str, str]) -> None:
    """Set ``session`` and the role locally per transaction, behind a transaction-mode pooler such as
    PgBouncer (``LORE_DATABASE_DIRECT_URL``): a server connection is lent per transaction, so session
    settings would stay on one server connection. One more statement, the pooler's price."""

    def on_begin(conn: Connection) -> None:
        settings = dict(session)
        role = conn.info.get(ROLE_INFO)
        if role:
            settings["role"] = role
        dbapi_conn: Any = conn.connection.dbapi_connection  # psycopg's, which begins on its own
        if not settings or dbapi_conn is None:
            return
        calls = ", ".join("set_config(%s, %s, true)" for _ in settings)
        with dbapi_conn.cursor() as cur:
            cur.execute(f"SELECT {calls}", [part for item in settings.items() for part in item])

    event.listen(engine, "begin", on_begin)
