"""Tool calls counted per key in Postgres (``stores.postgres.call_counts``): the limit holds
across stores (server processes) counting at once, a window ends, refused calls are not counted,
and idle keys' rows are pruned. SQLite offers no shared count."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from stores import open_local_store, open_postgres_store
from tests.support.stores import open_store


@pytest.fixture
def pg(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Any]:
    store = open_store("postgres", tmp_path, request)
    yield store
    store.close()


def test_a_window_gives_exactly_the_limit_and_refused_calls_are_not_counted(pg: Any) -> None:
    counts = pg.call_counts
    assert [counts.take("k1", 1, 3, 60) for _ in range(3)] == [None, None, None]
    wait = counts.take("k1", 1, 3, 60)
    assert wait is not None and 55 < wait <= 60
    # Another key counts on its own.
    assert counts.take("k2", 1, 3, 60) is None
    # Several calls at once (a batch) fit only whole.
    assert counts.take("k2", 2, 3, 60) is None
    assert counts.take("k2", 1, 3, 60) is not None
    assert counts.take("k3", 4, 3, 60) == 60  # more than the limit can never fit
    assert counts.take("k3", 3, 3, 60) is None


def test_a_new_window_starts_once_the_old_one_has_ended(pg: Any, postgres_url: str) -> None:
    counts = pg.call_counts
    assert counts.take("k", 1, 2, 60) is None
    assert counts.take("k", 1, 2, 60) is None
    assert counts.take("k", 1, 2, 60) is not None
    # The window ends without a minute's wait, and without racing a short one: its start moves back.
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE call_counts SET window_start = window_start - interval '60 seconds' WHERE key_id = 'k'"
        )
    assert counts.take("k", 1, 2, 60) is None
    assert counts.take("k", 1, 2, 60) is None
    assert counts.take("k", 1, 2, 60) is not None


def test_stores_counting_at_once_share_one_limit(pg: Any, postgres_url: str) -> None:
    other = open_postgres_store(postgres_url)
    allowed: list[bool] = []
    lock = threading.Lock()

    def spend(store: Any) -> None:
        for _ in range(10):
            taken = store.call_counts.take("shared", 1, 25, 60) is None
            with lock:
                allowed.append(taken)

    try:
        threads = [threading.Thread(target=spend, args=(s,)) for s in (pg, other) * 3]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    finally:
        other.close()
    assert len(allowed) == 60
    assert allowed.count(True) == 25


def test_rows_of_idle_keys_are_pruned_now_and_then(pg: Any, postgres_url: str) -> None:
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO call_counts VALUES ('revoked', now() - interval '2 hours', 5), "
            "('recent', now() - interval '10 minutes', 5)"
        )
        counts = pg.call_counts
        assert counts.take("k", 1, 5, 60) is None  # not yet due: nothing pruned
        remaining = {r[0] for r in conn.execute("SELECT key_id FROM call_counts")}
        assert remaining == {"revoked", "recent", "k"}
        counts._pruned_at -= 3600
        assert counts.take("k", 1, 5, 60) is None
        remaining = {r[0] for r in conn.execute("SELECT key_id FROM call_counts")}
        assert remaining == {"recent", "k"}


def test_sqlite_offers_no_shared_count(tmp_path: Path) -> None:
    store = open_local_store(tmp_path / "lore.db")
    try:
        assert store.call_counts is None
    finally:
        store.close()


def test_the_count_table_writes_no_wal(pg: Any, postgres_url: str) -> None:
    """Unlogged, so a count's commit waits for no disk flush (see ``stores.postgres.call_counts``)."""
    with psycopg.connect(postgres_url) as conn:
        persistence = conn.execute(
            "SELECT relpersistence FROM pg_class WHERE relname = 'call_counts'"
        ).fetchone()
    assert persistence == ("u",)
