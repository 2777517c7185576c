"""Tool calls per API key (and failed logins per address) in Postgres, so every team-server process
shares a key's rate limit. A fixed window per key from its first call, not clock minutes that split a
burst: one atomic ``INSERT … ON CONFLICT DO UPDATE`` per count, so two processes never both take the
last call, and database time keeps skewed replicas agreeing (at worst twice the limit in 60 s).
Refused calls are not counted, so retrying does not push a window on. UNLOGGED: no WAL flush per
count (0.8 ms a ``take``; logged, 4 ms); a crash only gives fresh windows."""

from __future__ import annotations

import logging
import threading
import time

from sqlalchemy import Engine, text

from stores.postgres.db import unavailable_on_failure

logger = logging.getLogger("stores.postgres")

PRUNE_EVERY_S = 600.0  # how often one process deletes the rows of keys idle for an hour

# ``hit`` counts the calls if the window ended or has room, else returns nothing, and the outer
# query reads from the pre-insert snapshot when the refused key's window ends.
_TAKE = text("""
    WITH hit AS (
        INSERT INTO call_counts AS c (key_id, window_start, calls)
        VALUES (:key_id, statement_timestamp(), :calls)
        ON CONFLICT (key_id) DO UPDATE SET
            window_start = CASE WHEN c.window_start <= statement_timestamp() - make_interval(secs => :window)
                THEN statement_timestamp() ELSE c.window_start END,
            calls = CASE WHEN c.window_start <= statement_timestamp() - make_interval(secs => :window)
                THEN excluded.calls ELSE c.calls + excluded.calls END
        WHERE c.window_start <= statement_timestamp() - make_interval(secs => :window)
            OR c.calls + excluded.calls <= :limit
        RETURNING c.calls
    )
    SELECT (SELECT calls FROM hit) AS counted,
        extract(epoch FROM (SELECT window_start FROM call_counts WHERE key_id = :key_id)
            + make_interval(secs => :window) - statement_timestamp()) AS wait""")

_PRUNE = text("DELETE FROM call_counts WHERE window_start < statement_timestamp() - interval '1 hour'")


class PostgresCallCounts:
    """``stores.store.CallCounts`` on the engine of a ``PostgresLessons``."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        self._pruned_at = time.monotonic()
        self._prune_lock = threading.Lock()

    def take(self, key_id: str, calls: int, limit: int, window_s: int) -> float | None:
        """``CallCounts.take`` in autocommit: one round trip once a connection is in hand."""
        if calls > limit:
            return float(window_s)  # could never fit; nothing to ask the database
        params = {"key_id": key_id, "calls": calls, "limit": limit, "window": window_s}
        with unavailable_on_failure(), self._engine.connect() as conn:
            conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            counted, wait = conn.execute(_TAKE, params).one()
            with self._prune_lock:  # at most one call per ``PRUNE_EVERY_S`` per process prunes
                now = time.monotonic()
                due = now - self._pruned_at >= PRUNE_EVERY_S
                if due:
                    self._pruned_at = now
            if due:
                conn.execute(_PRUNE)
        return max(0.0, float(wait)) if counted is None and wait is not None else None
