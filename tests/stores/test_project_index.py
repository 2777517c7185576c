"""Issue 37: on Postgres a mid-sized project (``OWN_ROWS`` or more, under ``OWN_SHARE`` of the
table) gets an HNSW index of its own rows (pgvector 0.6 filters after its search): built with the
others after a bulk load, and in the background once such a project is first recalled. Recall then
searches it, and finds what an exact scan found, as does a save's near-duplicate search."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import psycopg
import pytest

from stores import open_postgres_store
from stores.engine.lessons import LessonDraft, RecallQuery, Scope
from stores.postgres import project_index
from tests.stores.test_bulk_import import MODEL, unit_rows
from tests.support.stores import empty_postgres

OWN = 300  # OWN_ROWS for these tests: HNSW over a few hundred rows still beats reading them all
OTHERS = 6000  # rows of another project, so that OWN + 50 are under OWN_SHARE (7.5 %) of the table


def own_indexes(url: str) -> dict[str, tuple[bool, int]]:
    """Each own index's validity and how many scans it has served."""
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT c.relname, i.indisvalid, s.idx_scan FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
            "JOIN pg_stat_user_indexes s ON s.indexrelid = i.indexrelid WHERE c.relname LIKE 'lessons_embedding_%'"
        ).fetchall()
    return {name: (valid, scans) for name, valid, scans in rows}


def until(check: Any, what: str) -> Any:
    """``check()`` once it is truthy: a build runs on its own thread, statistics reach other
    sessions within a second or so of a transaction; a minute is far beyond either."""
    deadline = time.monotonic() + 60
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.05)
    return found


@pytest.fixture
def url(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setattr(project_index, "OWN_ROWS", OWN)
    empty_postgres(postgres_url)
    yield postgres_url
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        for name in own_indexes(postgres_url):
            conn.execute(f"DROP INDEX {name}")


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


def test_a_mid_sized_project_gets_its_own_index_and_recall_searches_it(url: str) -> None:
    queries = unit_rows(5, 9)
    store = open_postgres_store(url)
    try:
        store.models.adopt(MODEL)
        fill(store, "others", unit_rows(OTHERS, 5))
        fill(store, "small", unit_rows(OWN - 1, 7))
        fill(store, "big", unit_rows(OWN + 50, 8))
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("ANALYZE lessons")  # as autovacuum would: a project's share is read from them
        answers(store, "others", queries)  # over OWN_SHARE: the table's index serves it
        assert own_indexes(url) == {}  # saves start no build; a recall's first look at the project does
        exact = answers(store, "big", queries)  # while "big" has no index of its own yet
        answers(store, "small", queries)  # under OWN_ROWS: no index is started for it
        ((name, _),) = until(lambda: own_indexes(url), "no build started").items()
        until(lambda: own_indexes(url)[name][0], "the build did not finish")
    finally:
        store.close()
    fresh = open_postgres_store(url)  # a new process's view: the index is there
    try:
        assert answers(fresh, "big", queries) == exact
        answers(fresh, "small", queries)
        # A save's near-duplicate search in "big" now goes through its index too: a twin merges.
        twin = LessonDraft(problem=f"big {OWN}", resolution="r", tags=("t",))
        assert fresh.save(Scope("local", "big"), twin, unit_rows(OWN + 50, 8)[OWN]).merged
    finally:
        fresh.close()  # its sessions report their statistics as they end
    searched = len(queries) + 1  # the recalls and the save
    until(
        lambda: own_indexes(url)[name][1] >= searched, "recall or a save did not search the project's index"
    )
    assert set(own_indexes(url)) == {name}  # none for "small" or "others"


def test_a_bulk_load_builds_the_indexes_of_the_projects_it_made_mid_sized(url: str) -> None:
    store = open_postgres_store(url)
    try:
        store.models.adopt(MODEL)
        fill(store, "seed", unit_rows(1, 6))
        with store.bulk("local", 10**6):
            fill(store, "others", unit_rows(OTHERS, 5))
            fill(store, "big", unit_rows(OWN, 8))
            fill(store, "small", unit_rows(OWN - 1, 7))
            assert own_indexes(url) == {}
        ((valid, _),) = own_indexes(url).values()
        assert valid
    finally:
        store.close()
