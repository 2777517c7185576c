"""Change notices between a database's server processes, on ``LISTEN/NOTIFY``: every replica, the
publisher included, hears each notice (under 8000 bytes) and tells its subscribers. Listening takes
one dedicated connection per store (idle for ever, so not pooled) and a thread; on a drop it
reconnects with growing waits, and notices meanwhile are lost, as with any dropped stream."""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import psycopg
from psycopg import sql
from sqlalchemy import Engine, text

from stores.postgres.db import direct_connection, unavailable_on_failure

logger = logging.getLogger("stores.postgres")

CHANNEL = "lore_notices"
MAX_PAYLOAD_BYTES = 7900  # Postgres refuses a payload of 8000 bytes or more
WAIT_S = 0.5  # how long one wait for notices lasts, so that close() is noticed
RECONNECT_FIRST_S = 0.2
RECONNECT_MAX_S = 5.0

_PUBLISH = text("SELECT pg_notify(:channel, :payload)")

Listener = Callable[[dict[str, Any]], None]


class PostgresNotices:
    """``NoticeFeed`` over a ``PostgresLessons``'s engine; ``close`` ends the listener."""

    def __init__(self, engine: Engine, channel: str = CHANNEL, *, listen_url: str | None = None) -> None:
        self._engine = engine
        self._listen_url = listen_url  # a direct URL when the engine's is a pooler's
        self._channel = channel
        self._lock = threading.Lock()
        self._listeners: dict[object, Listener] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._listening = threading.Event()  # set while the connection is LISTENing
        self._conn: psycopg.Connection[Any] | None = None

    def publish(self, notice: Mapping[str, Any]) -> None:
        """Send ``notice``; ``UnavailableError`` if unreachable, ``ValueError`` if too large."""
        payload = json.dumps(notice, separators=(",", ":"), ensure_ascii=False)
        if len(payload.encode()) > MAX_PAYLOAD_BYTES:
            raise ValueError(f"A notice must stay under {MAX_PAYLOAD_BYTES} bytes of JSON.")
        with unavailable_on_failure(), self._engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            conn.execute(_PUBLISH, {"channel": self._channel, "payload": payload})

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """``NoticeFeed.subscribe``; the first subscription starts the listening connection."""
        token = object()
        with self._lock:
            self._listeners[token] = listener
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._run, name="lore-notices", daemon=True)
                self._thread.start()
        return lambda: self._drop(token)

    def _drop(self, token: object) -> None:
        with self._lock:
            self._listeners.pop(token, None)

    def wait_listening(self, timeout: float) -> bool:
        """Whether listening, within ``timeout``, for callers that must not miss the next notice."""
        return self._listening.wait(timeout)

    def close(self) -> None:
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join(timeout=WAIT_S * 4 + RECONNECT_MAX_S)

    def _run(self) -> None:
        delay = RECONNECT_FIRST_S
        while not self._stop.is_set():
            try:
                with direct_connection(self._engine, self._listen_url) as conn:
                    conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self._channel)))
                    self._conn = conn
                    self._listening.set()
                    delay = RECONNECT_FIRST_S
                    while not self._stop.is_set():
                        for notify in conn.notifies(timeout=WAIT_S):
                            self._deliver(notify.payload)
            except Exception as exc:  # psycopg's errors, and whatever else must not end the thread
                if self._stop.is_set():
                    break
                logger.warning("change notices: listening connection lost (%s); reconnecting", exc)
            finally:
                self._listening.clear()
                self._conn = None
            self._stop.wait(delay)
            delay = min(delay * 2, RECONNECT_MAX_S)

    def _deliver(self, payload: str) -> None:
        try:
            notice = json.loads(payload)
        except ValueError:
            logger.warning("change notices: ignored a payload that is not JSON")
            return
        if not isinstance(notice, dict):
            return
        with self._lock:
            listeners = list(self._listeners.values())
        for listener in listeners:
            try:
                listener(notice)
            except Exception:  # one listener must not starve the others or end the thread
                logger.exception("change notices: a listener raised")

    def backend_pid(self) -> int | None:
        """The listening connection's server process (tests end it to check reconnection)."""
        conn = self._conn
        return conn.info.backend_pid if conn is not None else None
