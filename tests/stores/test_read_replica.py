"""Reads on a real streaming replica (``LORE_DATABASE_READ_URL``, ``stores.postgres.routing``).

A pgserver primary and a hot standby made from it with ``pg_basebackup -R``
(``tests/support/standby.py``). With the standby's replay paused, what it has not replayed is
missing from recall, ``list`` and read-only project transactions, so those read there, while
``get``, the activity log and every write still answer from the primary; with the primary
stopped, recall and listings still answer and a save fails. Skipped without pgserver's
``pg_basebackup``, failed under ``CI=true``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from stores import Scope, Store, UnavailableError, open_postgres_store
from stores.engine.activity import ActivityNote, ActivityQuery
from stores.engine.lessons import LessonDraft, RecallQuery
from tests.support.helpers import vector
from tests.support.standby import caught_up, primary_and_standby, stop

HERE = Scope(org="acme", project="alpha")


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str, str]]:
    folder = Path(tmp_path_factory.mktemp("replica"))
    with primary_and_standby(folder) as found:
        yield found


@pytest.fixture
def store(servers: tuple[Any, str, str]) -> Iterator[Store]:
    _, primary_url, standby_url = servers
    opened = open_postgres_store(primary_url, read_url=standby_url)
    try:
        yield opened
    finally:
        opened.close()


def save(store: Store, problem: str) -> str:
    return store.save(
        HERE, LessonDraft(problem=problem, resolution="restart it"), vector(problem).tolist()
    ).id


def problems(store: Store) -> list[str]:
    hits = store.recall(HERE, RecallQuery(text="kafka lag", vector=vector("kafka lag one").tolist()))
    return sorted(h.lesson.problem for h in hits)


def replay(standby_url: str, on: bool) -> None:
    with psycopg.connect(standby_url, autocommit=True) as conn:
        conn.execute("SELECT pg_wal_replay_resume()" if on else "SELECT pg_wal_replay_pause()")


def test_reads_lag_on_the_replica_and_the_rest_reads_the_primary(
    store: Store, servers: tuple[Any, str, str]
) -> None:
    _, primary_url, standby_url = servers
    save(store, "kafka lag one")
    caught_up(primary_url, standby_url)
    replay(standby_url, on=False)
    try:
        late = save(store, "kafka lag two")  # a write: on the primary, the replica is read-only
        store.append_activity(HERE, ActivityNote(kind="recall", lesson_ids=(late,)))
        assert problems(store) == ["kafka lag one"]  # recall has not seen it yet
        assert [x.problem for x in store.list(HERE, (), 10, None).lessons] == ["kafka lag one"]
        with store.transaction(HERE, write=False) as tx:
            assert len(tx.commits(None, 10, None)) == 1
        assert store.get(HERE, late).problem == "kafka lag two"  # update and merge read through get
        entries = store.activity(HERE, ActivityQuery(kinds=("recall",))).entries
        assert [e.note.lesson_ids for e in entries] == [(late,)]  # the activity log reads its own writes
    finally:
        replay(standby_url, on=True)
    caught_up(primary_url, standby_url)
    assert problems(store) == ["kafka lag one", "kafka lag two"]


def test_with_the_primary_stopped_reads_still_answer_and_writes_fail(
    store: Store, servers: tuple[Any, str, str]
) -> None:
    primary, primary_url, standby_url = servers
    save(store, "kafka lag three")
    caught_up(primary_url, standby_url)
    stop(primary)
    assert "kafka lag three" in problems(store)
    assert "kafka lag three" in [x.problem for x in store.list(HERE, (), 10, None).lessons]
    with pytest.raises(UnavailableError):
        save(store, "kafka lag four")
