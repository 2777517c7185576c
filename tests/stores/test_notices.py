"""Change notices between processes on one Postgres database (``stores.postgres.notices``): what one
store publishes, every store on the database hears, itself included, as the JSON object it was;
a payload too large for ``pg_notify`` is refused before it is sent; a dropped listening connection
is opened again; ``close`` ends the listening thread."""

from __future__ import annotations

import itertools
import queue
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from stores import Store, open_postgres_store
from stores.postgres.notices import MAX_PAYLOAD_BYTES, PostgresNotices
from tests.support.stores import empty_postgres


@pytest.fixture
def two(postgres_url: str) -> Iterator[tuple[Store, Store]]:
    empty_postgres(postgres_url)
    a, b = open_postgres_store(postgres_url), open_postgres_store(postgres_url)
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def feed_of(store: Store) -> PostgresNotices:
    feed = store.notices
    assert isinstance(feed, PostgresNotices)
    return feed


def heard_by(feed: PostgresNotices) -> queue.Queue[dict[str, Any]]:
    got: queue.Queue[dict[str, Any]] = queue.Queue()
    feed.subscribe(got.put)
    assert feed.wait_listening(10)
    return got


def test_every_store_on_the_database_hears_what_one_publishes(two: tuple[Store, Store]) -> None:
    a, b = feed_of(two[0]), feed_of(two[1])
    at_a, at_b = heard_by(a), heard_by(b)
    notices = [{"org": "acme", "project": None, "uris": ["lore://stats"]}, {"org": None, "uris": None}]
    for notice in notices:
        a.publish(notice)
    for got in (at_a, at_b):
        assert [got.get(timeout=10) for _ in notices] == notices  # in the order sent
    with pytest.raises(ValueError):
        a.publish({"uris": ["x" * MAX_PAYLOAD_BYTES]})
    a.publish({"after": "the refused one"})
    assert at_b.get(timeout=10) == {"after": "the refused one"}


def test_a_dropped_listening_connection_listens_again(two: tuple[Store, Store], postgres_url: str) -> None:
    a, b = feed_of(two[0]), feed_of(two[1])
    at_b = heard_by(b)
    dropped = b.backend_pid()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (dropped,))
    deadline = time.monotonic() + 10
    while b.backend_pid() in (None, dropped):
        assert time.monotonic() < deadline, "the listening connection was not opened again"
        time.sleep(0.02)
    # A notice published while the connection is being opened again is lost (NOTIFY keeps none
    # for a listener that is not there): what must hold is that b hears again, so publish until
    # it does, within a bound that only a feed that never listens again reaches.
    deadline = time.monotonic() + 60
    for n in itertools.count():
        assert time.monotonic() < deadline, "the listening connection never heard a notice again"
        a.publish({"n": n})
        try:
            heard = at_b.get(timeout=2)
        except queue.Empty:
            continue
        # On a busy machine an earlier notice may arrive after its two seconds: any of them counts.
        assert heard in [{"n": i} for i in range(n + 1)]
        break


def test_close_ends_the_listening_thread(postgres_url: str) -> None:
    store = open_postgres_store(postgres_url)
    feed = feed_of(store)
    before = set(threading.enumerate())
    heard_by(feed)
    [thread] = [t for t in threading.enumerate() if t not in before and t.name == "lore-notices"]
    store.close()
    assert feed.backend_pid() is None and not thread.is_alive()
