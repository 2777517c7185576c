"""Issue 37: on Postgres a large project (``OWN_ROWS`` or more) gets an HNSW index of its own rows, and
there is no index of the whole table (pgvector 0.6 filters after its search): built with the others
after a bulk load, after a re-embed, and in the background once such a project is first recalled or
saved to. Recall then searches it, and finds what an exact scan found, as does a save's near-duplicate
search; a smaller project is scanned exactly."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest
import sqlalchemy

from stores import open_postgres_store
from stores.engine.lessons import LessonDraft, RecallQuery, Scope
from stores.postgres import project_index
from stores.postgres.db import unbounded
from stores.postgres.sql import PostgresSqlTx
from tests.stores.test_bulk_import import MODEL, unit_rows
from tests.support.stores import empty_postgres, own_indexes, until

OWN = 300  # OWN_ROWS for these tests: HNSW over a few hundred rows still beats reading them all


@pytest.fixture
def url(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(project_index, "OWN_ROWS", OWN)
    empty_postgres(postgres_url)
    yield postgres_url
    empty_postgres(postgres_url)


def fill(store: Any, project: str, vectors: np.ndarray) -> None:
    """In batches of 500: one write, HNSW's upkeep included, stays well inside the statement timeout."""
    drafts = [LessonDraft(problem=f"{project} {i}", resolution="r", tags=("t",)) for i in range(len(vectors))]
    items = list(zip(drafts, vectors, strict=True))
    for start in range(0, len(items), 500):
        store.save_many(Scope("local", project), items[start : start + 500])


def answers(store: Any, project: str, queries: np.ndarray) -> list[set[str]]:
    now = datetime.now(UTC) + timedelta(days=1)
    found = []
    for vector in queries:
        query = RecallQuery(text="", limit=10, now=now).with_vector(vector)
        found.append({hit.lesson.problem for hit in store.recall(Scope("local", project), query)})
    return found


def exact_store(url: str) -> Any:
    """A store on a login whose plans take no index scan: every recall is an exact scan."""
    return open_postgres_store(url + ("&" if "?" in url else "?") + "options=-c%20enable_indexscan%3Doff")


def test_a_large_project_gets_its_own_index_and_recall_searches_it(url: str) -> None:
    queries = unit_rows(5, 9)
    store = open_postgres_store(url)
    try:
        store.models.adopt(MODEL)
        fill(store, "others", unit_rows(OWN - 1, 5))
        fill(store, "small", unit_rows(OWN - 1, 7))
        fill(store, "big", unit_rows(OWN + 50, 8))
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE lessons")  # as autovacuum would
    exact = exact_store(url)
    try:
        wanted = answers(exact, "big", queries)
    finally:
        exact.close()
    store = open_postgres_store(url)  # a new process's first look at "big" starts its build
    try:
        assert answers(store, "big", queries) == wanted  # meanwhile, by an exact scan
        answers(store, "small", queries)  # under OWN_ROWS: no index is started for it
        ((name, _),) = until(lambda: own_indexes(url), "no build started").items()
        until(lambda: own_indexes(url)[name][0], "the build did not finish")
    finally:
        store.close()
    fresh = open_postgres_store(url)  # a new process's view: the index is there
    try:
        assert answers(fresh, "big", queries) == wanted
        answers(fresh, "small", queries)
        # A save's near-duplicate search in "big" goes through its index too: a twin merges.
        twin = LessonDraft(problem=f"big {OWN}", resolution="r", tags=("t",))
        assert fresh.save(Scope("local", "big"), twin, unit_rows(OWN + 50, 8)[OWN]).merged
    finally:
        fresh.close()  # its sessions report their statistics as they end
    searched = len(queries) + 1  # the recalls and the save
    until(
        lambda: own_indexes(url)[name][1] >= searched, "recall or a save did not search the project's index"
    )
    assert set(own_indexes(url)) == {name}  # none for "small" or "others"


def test_a_save_to_a_large_project_without_its_index_starts_the_build(url: str) -> None:
    store = open_postgres_store(url)
    try:
        store.models.adopt(MODEL)
        fill(store, "big", unit_rows(OWN, 8))
    finally:
        store.close()
    store = open_postgres_store(url)
    try:
        store.save(Scope("local", "big"), LessonDraft(problem="one more", resolution="r"), unit_rows(1, 3)[0])
        ((name, _),) = until(lambda: own_indexes(url), "no build started").items()
        until(lambda: own_indexes(url)[name][0], "the build did not finish")
    finally:
        store.close()


def test_a_bulk_load_builds_the_indexes_of_the_projects_it_made_large(url: str) -> None:
    store = open_postgres_store(url)
    try:
        store.models.adopt(MODEL)
        fill(store, "seed", unit_rows(1, 6))
        with store.bulk("local", 10**6):
            fill(store, "others", unit_rows(OWN - 1, 5))
            fill(store, "big", unit_rows(OWN, 8))
            fill(store, "small", unit_rows(OWN - 1, 7))
            fill(store, "bigger", unit_rows(OWN + 200, 9))
            assert own_indexes(url) == {}
        assert [valid for valid, _ in own_indexes(url).values()] == [True, True]  # "big" and "bigger"
    finally:
        store.close()


def test_index_builds_get_the_memory_of_their_rows_and_no_parallel_workers(url: str) -> None:
    """pgvector 0.6.0-0.8.1's parallel HNSW build can overflow a buffer (CVE-2026-3172)."""
    store = open_postgres_store(url)
    engine = sqlalchemy.create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    try:
        store.models.adopt(MODEL)
        fill(store, "big", unit_rows(3 * OWN, 8))
        fill(store, "small", unit_rows(OWN - 1, 7))
        fill(store, "bare", unit_rows(OWN, 9))  # its vectors dropped below: a re-embed's new column has none
        with engine.connect() as conn:
            conn.execute(sqlalchemy.text("SELECT set_config('lore.org', 'local', false)"))
            conn.execute(sqlalchemy.text("UPDATE lessons SET embedding = NULL WHERE project = 'bare'"))
            builds = project_index.large_builds(PostgresSqlTx(conn))
            scope_key = sqlalchemy.text("SELECT lore_scope_key('local', :p)")
            key, bare = (conn.execute(scope_key, {"p": p}).scalar_one() for p in ("big", "bare"))
            conn.rollback()
        mb = 64 + 3 * OWN * (1024 + 4 * unit_rows(1, 1).shape[1]) // 2**20  # 64 MB, 1 KB and the vector a row
        memory = "SET LOCAL maintenance_work_mem = '{}MB'"
        assert builds == [
            (memory.format(mb), project_index.create(key)),
            (memory.format(64), project_index.create(bare)),
        ]
        with engine.begin() as conn, unbounded(conn):
            assert conn.exec_driver_sql("SHOW max_parallel_maintenance_workers").scalar() == "0"
    finally:
        engine.dispose()
        store.close()


def test_an_upgraded_store_drops_the_index_of_the_whole_table(url: str) -> None:
    """Migration 19: a database of an earlier version loses its table-wide HNSW index (every save
    kept it up, and no search takes it now)."""
    store = open_postgres_store(url)
    try:
        store.models.adopt(MODEL)
        fill(store, "seed", unit_rows(3, 6))
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("DELETE FROM schema_migrations WHERE version = 19")
        conn.execute("CREATE INDEX lessons_embedding ON lessons USING hnsw (embedding vector_cosine_ops)")
    open_postgres_store(url).close()
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('lessons_embedding')").fetchone() == (None,)
        assert conn.execute("SELECT count(*) FROM schema_migrations WHERE version = 19").fetchone() == (1,)
