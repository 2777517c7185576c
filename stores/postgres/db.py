"""Connecting to Postgres: the engine and pool, row-level security, errors.

The org boundary holds twice: queries name their org, and RLS shows a transaction only ``lore.org``'s
rows; superusers and BYPASSRLS roles skip policies, so they switch to ``lore_rls``. No call waits for
ever (``CONNECT_DEFAULTS``, ``SESSION_DEFAULTS``, and ``HangWatch`` for a frozen server); unreachable, or out
of disk, memory or connections, becomes a named ``UnavailableError``."""

from __future__ import annotations

import contextlib
import logging
import os
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, cast

import psycopg
from psycopg.conninfo import make_conninfo
from sqlalchemy import Connection, Engine, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError

from stores.errors import UnavailableError

logger = logging.getLogger("stores.postgres")

RLS_ROLE = "lore_rls"

ROLE_INFO = "lore.role"  # the connection record's info key holding the role each transaction takes, or None
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
# Server side, unless the URL's ``options`` sets it; migrations lift the statement limit. A prepared statement
# gets a generic plan after five runs, blind to ``LIMIT :k`` and the project (HNSW became an exact scan).
SESSION_DEFAULTS: dict[str, str] = {
    "statement_timeout": "30s",
    "idle_in_transaction_session_timeout": "60s",
    "plan_cache_mode": "force_custom_plan",
}
POOL_TIMEOUT_S = 5.0  # how long a call waits for a pooled connection when all are busy
# Lack of disk, memory or connections (class 53) is named with its SQLSTATE and fix, not as unreachability.
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

# A connect-time refusal has no SQLSTATE (libpq passes only text): too_many_connections is known by its words.
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
    event.listen(engine, "do_connect", lambda _d, _r, cargs, cparams: watch.connect(cargs, cparams))

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


def direct_connection(engine: Engine, url: str | None = None) -> psycopg.Connection[Any]:
    """An unpooled autocommit connection (``url``: a direct one when ``engine``'s is a pooler's), for
    what a pool cannot hold: a listener idle for ever, an index built outside any transaction."""
    found = make_url(url or engine.url.render_as_string(hide_password=False))
    conninfo = found.set(drivername="postgresql").render_as_string(hide_password=False)
    extra = {k: v for k, v in CONNECT_DEFAULTS.items() if k not in found.query}
    return psycopg.connect(make_conninfo(conninfo, **extra), autocommit=True)


def as_owner(conn: Connection, *statements: str) -> None:
    """For this transaction only, act as the login role again (DDL needs the tables' owner), then
    run ``statements``, each its own (a statement's timer starts with it)."""
    for statement in ("SET LOCAL ROLE NONE", *statements):
        conn.exec_driver_sql(statement)


@contextlib.contextmanager
def unbounded(conn: Connection) -> Iterator[None]:
    """As the login role with no statement timeout or parallel workers (pgvector 0.6.0-0.8.1's parallel
    HNSW build can overflow a buffer, CVE-2026-3172), unwatched by ``HangWatch``, until the block ends:
    maintenance (index builds, migrations, a re-embed's swap) takes minutes, and a server busy with it
    can take over ``PROBE_TIMEOUT_S`` to answer a fresh connection (a million's build was cut so)."""
    as_owner(conn, "SET LOCAL statement_timeout = 0", "SET LOCAL max_parallel_maintenance_workers = 0")
    raw = cast(WatchedConnection, conn.connection.dbapi_connection)  # engine_for's, all
    raw.watched = False
    try:
        yield
    finally:
        raw.watched = True


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


SUSPECT_AFTER_S = 2.0  # a round trip this old makes the watcher ask whether the server still answers
# A fresh connection's wait before the server counts as frozen (connect_timeout's floor is 2 s).
PROBE_TIMEOUT_S = 2
PROBE_INTERVAL_S = 2.0  # a probe's verdict stands this long before the watcher probes again
TICK_S = 0.25
IDLE_EXIT_S = 10.0  # the watcher ends after this long with nothing to watch, and starts again on demand


class HangWatch:
    """Notices a Postgres that stopped answering, and cuts off the calls waiting on it.

    Timeouts and keepalives need a live peer; a server frozen on a live host (SIGSTOP, swap death, a paused
    VM) acknowledges packets but never answers, so a call would wait for ever holding a connection and a
    thread. psycopg routes every blocking round trip through ``Connection.wait``, which is watched: after
    ``SUSPECT_AFTER_S`` the watcher asks for a fresh connection. Any answer means merely slow; none within
    ``PROBE_TIMEOUT_S`` means frozen, and every wait that long has its socket shut down, so psycopg raises,
    nothing commits and the caller gets ``UNAVAILABLE``. Until a connection is answered again new ones get
    only ``PROBE_TIMEOUT_S``; nothing is refused in advance, so recovery needs no restart."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[object, tuple[psycopg.Connection[Any], float]] = {}
        self._thread: threading.Thread | None = None
        self._connect_args: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        self._verdict_at = -float("inf")  # when the server last answered, or failed to answer, a connection
        self._answered = True
        self.connection_class: type[WatchedConnection] = type(
            "WatchedConnection", (WatchedConnection,), {"hang_watch": self}
        )

    def started(self, conn: psycopg.Connection[Any]) -> object:
        token = object()
        with self._lock:
            self._waiting[token] = (conn, time.monotonic())
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._watch, name="lore-postgres-hang-watch", daemon=True
                )
                self._thread.start()
        return token

    def finished(self, token: object) -> None:
        with self._lock:
            self._waiting.pop(token, None)

    def connect(self, cargs: tuple[Any, ...], cparams: dict[str, Any]) -> psycopg.Connection[Any]:
        """What the engine's ``do_connect`` returns: a ``WatchedConnection``, quick to give up while the
        last attempt, however long ago, went unanswered; its arguments kept, so a probe connects alike."""
        with self._lock:
            self._connect_args = (tuple(cargs), dict(cparams))
            doubtful = not self._answered
        params = {**cparams, "connect_timeout": PROBE_TIMEOUT_S} if doubtful else cparams
        try:
            conn = self.connection_class.connect(*cargs, **params)
        except psycopg.Error as exc:
            # An error the server sent (bad password, too many clients) is an answer.
            self.note(answered=exc.sqlstate is not None)
            raise
        self.note(answered=True)
        return conn

    def note(self, *, answered: bool) -> None:
        """Record whether the server answered a connection just now."""
        with self._lock:
            self._verdict_at, self._answered = time.monotonic(), answered

    def _watch(self) -> None:
        idle_since = time.monotonic()
        while True:
            time.sleep(TICK_S)
            now = time.monotonic()
            with self._lock:
                if self._waiting:
                    idle_since = now
                elif now - idle_since > IDLE_EXIT_S:
                    self._thread = None
                    return
                suspects = [
                    t for t, (_, started) in self._waiting.items() if now - started >= SUSPECT_AFTER_S
                ]
            if suspects and not self._server_answers(now):
                self._cut(suspects)

    def _server_answers(self, now: float) -> bool:
        with self._lock:
            if now - self._verdict_at < PROBE_INTERVAL_S:
                return self._answered
        answered = self._probe()
        self.note(answered=answered)
        if not answered:
            logger.warning(
                "Postgres did not answer a new connection within %s s; cutting off the calls waiting on it",
                PROBE_TIMEOUT_S,
            )
        return answered

    def _probe(self) -> bool:
        if self._connect_args is None:
            return True  # never connected: nothing to compare with, so never cut
        cargs, cparams = self._connect_args
        try:
            psycopg.Connection.connect(*cargs, **{**cparams, "connect_timeout": PROBE_TIMEOUT_S}).close()
        except psycopg.Error as exc:
            # An error the server sent (too many clients, starting up) proves it is alive.
            return exc.sqlstate is not None
        return True

    def _cut(self, tokens: list[object]) -> None:
        with self._lock:
            for token in tokens:
                entry = self._waiting.pop(token, None)
                if entry is not None:
                    _shut_down(entry[0])


def _shut_down(conn: psycopg.Connection[Any]) -> None:
    """Shut the socket under libpq so its wait reads end-of-file; ``shutdown``, not ``close``,
    so libpq's thread never touches a freed or reused descriptor (libpq closes it later)."""
    with contextlib.suppress(OSError, psycopg.Error):
        fd = conn.pgconn.socket
        with socket.socket(fileno=os.dup(fd)) as sock:
            sock.shutdown(socket.SHUT_RDWR)


class WatchedConnection(psycopg.Connection[Any]):
    """psycopg's connection reporting round trips to its engine's ``HangWatch``; a subclass per
    engine names the watch, so it is in place before the first round trip."""

    hang_watch: HangWatch
    watched = True  # False inside ``unbounded``

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        if not self.watched:
            return super().wait(*args, **kwargs)
        token = self.hang_watch.started(self)
        try:
            return super().wait(*args, **kwargs)
        finally:
            self.hang_watch.finished(token)
