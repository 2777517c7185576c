"""Opening the local SQLite file: binding, pragmas, migrations, transactions, timestamp text.

``sqlean.py`` brings one recent SQLite with FTS5 to every OS. Several processes may share a file: WAL
lets readers run beside the writer, and writes lock up front with ``BEGIN IMMEDIATE``, so none fails
half-way with "database is locked", waiting at most ``BUSY_TIMEOUT_MS`` or to the request's deadline
(the progress handler stops a statement there). A read-only file or a full disk answers
``UnavailableError`` naming the path and the fix."""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import sqlean

from stores import deadline
from stores.errors import UnavailableError
from stores.sqlite.files import Unwritable, unwritable

BUSY_TIMEOUT_MS = 30_000  # the longest a statement waits for another connection's lock, all retries included
# VM steps between progress-handler calls (well under a ms), how a statement sees the deadline.
PROGRESS_STEPS = 100_000
LOCKED_MESSAGE = (
    "The Lore database stayed locked by another process for too long; the call changed nothing. Try again."
)

if TYPE_CHECKING:
    # sqlean's connection is the standard library's, built with extension loading.
    from sqlite3 import Connection as Connection
else:
    Connection = sqlean.Connection


def format_ts(dt: datetime) -> str:
    """Fixed-width UTC text, so timestamps compare correctly as strings in SQL."""
    # isoformat, not strftime: strftime writes the year 1 as "1", not "0001".
    return dt.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


class TrackedConnection(sqlean.Connection):  # type: ignore[misc, unused-ignore]  # sqlean is untyped under --strict
    """A connection remembering its cursors, so a transaction finishes statements left before it: a
    half-read SELECT pins the snapshot, which made every ``BEGIN IMMEDIATE`` "locked" and wedged a writer."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.cursors: weakref.WeakSet[Any] = weakref.WeakSet()

    def cursor(self, *args: Any, **kwargs: Any) -> Any:
        cursor = super().cursor(*args, **kwargs)  # ``execute`` makes its cursor here too
        self.cursors.add(cursor)
        return cursor


def finish_statements(conn: Connection) -> None:
    """Close every cursor of ``conn`` (a ``TrackedConnection``): no statement pins a snapshot."""
    for cursor in list(getattr(conn, "cursors", ())):
        cursor.close()


def connect(path: Path | str) -> Connection:
    """Open a connection with Lore's pragmas set."""
    try:
        if str(path) != ":memory:":
            Path(path).parent.mkdir(parents=True, exist_ok=True)
        conn = sqlean.connect(
            str(path), isolation_level=None, check_same_thread=False, timeout=30, factory=TrackedConnection
        )
    except (sqlean.Error, OSError) as exc:
        raise _cannot_open(path, exc) from exc
    try:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_MS)}")
        conn.set_progress_handler(deadline.expired, PROGRESS_STEPS)
        # Switching to WAL (or reading a WAL database) needs the -wal and -shm files.
        _retry_locked(conn, lambda: conn.execute("PRAGMA journal_mode = WAL"))
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException as exc:
        conn.close()
        if isinstance(exc, sqlean.Error):
            raise _cannot_open(path, exc) from exc
        raise
    return conn  # type: ignore[no-any-return, unused-ignore]  # sqlean is untyped under --strict


def _cannot_open(path: Path | str, exc: BaseException) -> UnavailableError:
    """The sentence for a database that did not open: what is read-only, else SQLite's reason."""
    problem = unwritable(path)
    if problem is not None:
        return UnavailableError(problem.sentence("so Lore cannot open its database"))
    return UnavailableError(
        f"Cannot open the Lore database at {path}: {exc}. Check the path and its permissions."
    )


@contextlib.contextmanager
def writes_refused_as_unavailable(conn: Connection, consequence: str) -> Iterator[None]:
    """A read-only refusal (rolled back) becomes ``UnavailableError`` naming the file and fix."""
    try:
        yield
    except sqlean.OperationalError as exc:
        _raise_if_full(conn, exc, consequence)
        code = getattr(exc, "sqlite_errorcode", None)  # a file could not be written: SQLITE_READONLY
        if (code & 0xFF != 8) if code is not None else "readonly" not in str(exc).lower():
            raise
        path = _main_path(conn)
        problem = unwritable(path) or Unwritable(
            f"SQLite cannot write the Lore database {path or '(in memory)'} ({exc})",
            "check its permissions and the disk it is on, or set LORE_DB_PATH to a writable file",
        )
        raise UnavailableError(problem.sentence(consequence)) from exc


def _main_path(conn: Connection) -> str:
    return next((row[2] for row in conn.execute("PRAGMA database_list") if row[1] == "main"), "")


def _raise_if_full(conn: Connection, exc: BaseException, consequence: str) -> None:
    """SQLITE_FULL as ``UnavailableError`` naming disk and fix; it rolled back, so nothing is lost."""
    code = getattr(exc, "sqlite_errorcode", None)
    if not isinstance(exc, sqlean.OperationalError) or code is None or code & 0xFF != 13:
        return
    problem = Unwritable(
        f"The disk holding the Lore database {_main_path(conn) or '(in memory)'} is full (SQLite: {exc})",
        "free space on that disk, or set LORE_DB_PATH to a file on a disk with room, "
        "then try again; nothing stored was lost",
    )
    raise UnavailableError(problem.sentence(consequence)) from exc


@contextlib.contextmanager
def write_transaction(
    conn: Connection, *, refused: str = "so the call changed nothing"
) -> Iterator[Connection]:
    """``BEGIN IMMEDIATE`` to ``COMMIT``, rolled back on any exception (``refused``: what one meant)."""
    deadline.check()
    finish_statements(conn)  # nothing left from before pins an old snapshot
    with writes_refused_as_unavailable(conn, refused):
        _retry_locked(conn, lambda: conn.execute("BEGIN IMMEDIATE"))
        try:
            yield conn
            _retry_locked(conn, lambda: conn.execute("COMMIT"))
        except BaseException as exc:
            finish_statements(conn)
            # An interrupted write may already have rolled the transaction back itself.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            _raise_late(exc)
            raise


@contextlib.contextmanager
def read_transaction(conn: Connection) -> Iterator[Connection]:
    """A deferred transaction, so reads share one snapshot (not one an unfinished statement pinned)."""
    deadline.check()
    finish_statements(conn)
    conn.execute("BEGIN")
    try:
        yield conn
    except BaseException as exc:
        _raise_late(exc)
        _raise_if_full(conn, exc, "so the call could not finish")  # a sort's temporary file
        raise
    finally:
        if conn.in_transaction:
            conn.execute("COMMIT")


def _raise_late(exc: BaseException) -> None:
    """Raise ``DeadlineExceeded`` for a statement the progress handler stopped at the deadline."""
    if isinstance(exc, sqlean.OperationalError) and "interrupt" in str(exc).lower() and deadline.expired():
        raise deadline.DeadlineExceeded() from exc


def _retry_locked(conn: Connection, fn: Callable[[], Any]) -> Any:
    """Run ``fn``, waiting at most ``BUSY_TIMEOUT_MS`` (or to the deadline) for a lock: SQLite reports
    "locked" at once in a few cases (lock upgrade, WAL recovery), so those are retried."""
    start = time.monotonic()
    pause = 0.01
    try:
        while True:
            conn.execute(f"PRAGMA busy_timeout = {max(1, int(_time_left(start) * 1000))}")
            try:
                return fn()
            except sqlean.OperationalError as exc:
                message = str(exc).lower()
                if "locked" not in message and "busy" not in message:
                    raise
            time.sleep(min(pause, _time_left(start)))
            pause = min(pause * 2, 0.5)
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_MS)}")


def _time_left(start: float) -> float:
    """Seconds left to wait; ``DeadlineExceeded`` past the deadline, else ``UnavailableError``."""
    budget = BUSY_TIMEOUT_MS / 1000 - (time.monotonic() - start)
    left = deadline.remaining()
    wait, by_deadline = (left, True) if left is not None and left < budget else (budget, False)
    if wait <= 0:
        raise deadline.DeadlineExceeded() if by_deadline else UnavailableError(LOCKED_MESSAGE)
    return wait
