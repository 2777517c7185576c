"""Noticing a Postgres that stopped answering, and cutting off the calls waiting on it.

Timeouts and keepalives need a live peer; a server frozen on a live host (SIGSTOP, swap death, a paused
VM) acknowledges packets but never answers, so a call would wait for ever holding a connection and a
thread. psycopg routes every blocking round trip through ``Connection.wait``, which is watched: after
``SUSPECT_AFTER_S`` the watcher asks for a fresh connection. Any answer means merely slow; none within
``PROBE_TIMEOUT_S`` means frozen, and every wait that long has its socket shut down, so psycopg raises,
nothing commits and the caller gets ``UNAVAILABLE``. Until a connection is answered again new ones get
only ``PROBE_TIMEOUT_S``; nothing is refused in advance, so recovery needs no restart."""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
from typing import Any

import psycopg

logger = logging.getLogger("stores.postgres")

SUSPECT_AFTER_S = 2.0  # a round trip this old makes the watcher ask whether the server still answers
# A fresh connection's wait before the server counts as frozen (connect_timeout's floor is 2 s).
PROBE_TIMEOUT_S = 2
PROBE_INTERVAL_S = 2.0  # a probe's verdict stands this long before the watcher probes again
TICK_S = 0.25
# The watcher thread ends after this long with nothing to watch, and starts again on demand.
IDLE_EXIT_S = 10.0


class HangWatch:
    """Watches one engine's round trips; see the module docstring."""

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

    def remember_connect_args(self, cargs: tuple[Any, ...], cparams: dict[str, Any]) -> None:
        """How the engine connects, so a probe connects the same way."""
        self._connect_args = (tuple(cargs), dict(cparams))

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

    def doubtful(self) -> bool:
        """Whether the last connection attempt, however long ago, went unanswered."""
        with self._lock:
            return not self._answered

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
            conn = psycopg.Connection.connect(*cargs, **{**cparams, "connect_timeout": PROBE_TIMEOUT_S})
        except psycopg.Error as exc:
            # An error the server sent (too many clients, starting up) proves it is alive.
            return exc.sqlstate is not None
        conn.close()
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

    def wait(self, *args: Any, **kwargs: Any) -> Any:
        token = self.hang_watch.started(self)
        try:
            return super().wait(*args, **kwargs)
        finally:
            self.hang_watch.finished(token)


def connect_watched(
    watch: HangWatch, cargs: tuple[Any, ...], cparams: dict[str, Any]
) -> psycopg.Connection[Any]:
    """What the engine's ``do_connect`` returns: a ``WatchedConnection``, quick to give up while in doubt."""
    watch.remember_connect_args(cargs, cparams)
    params = {**cparams, "connect_timeout": PROBE_TIMEOUT_S} if watch.doubtful() else cparams
    try:
        conn = watch.connection_class.connect(*cargs, **params)
    except psycopg.Error as exc:
        # An error the server sent (bad password, too many clients) is an answer.
        watch.note(answered=exc.sqlstate is not None)
        raise
    watch.note(answered=True)
    return conn
