"""A local file written before issue 22 opens and keeps everything: its vectors lived in
sqlite-vec's ``vec0`` table (sqlite-vec is no longer a dependency) and its rows named their
org ``org`` (both backends now say ``org_id``, so their statements are written once).

The old file is made the way old Lore left it: the vectors in a ``vec0`` table named
``lesson_vectors``, the org columns named ``org`` and the schema at version 5. Making one
needs sqlite-vec, so the test runs where it is still installed.

The file's vectors stay float32 BLOBs; the process holds them as int8 (``VectorIndex``) and
rescores its candidates from the file, so a search ranks as float32 exact search does, through
saves, deletes, another process's writes and reopening.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import numpy as np
import pytest
import sqlean

from lore_mcp.embedding.embedder import Embedder
from stores import Store, open_local_store
from stores.engine.lessons import LessonDraft, RecallQuery, Scope
from tests.support.helpers import vector

ALPHA = Scope("acme", "alpha")


def as_sqlite_vec_left_it(path: Path) -> dict[int, bytes]:
    """Move a file's vectors into a ``vec0`` table, its org columns back to ``org`` and its
    schema back to version 5."""
    sqlite_vec = pytest.importorskip("sqlite_vec")
    conn = sqlean.connect(str(path), isolation_level=None)
    try:
        conn.enable_load_extension(True)
        sqlite_vec.load(conn)
        vectors = dict(conn.execute("SELECT pk, embedding FROM lesson_embeddings"))
        dim = len(next(iter(vectors.values()))) // 4
        conn.execute("BEGIN")
        conn.execute(f"CREATE VIRTUAL TABLE lesson_vectors USING vec0 (embedding float[{dim}])")
        conn.execute(
            "INSERT INTO lesson_vectors (rowid, embedding) SELECT pk, embedding FROM lesson_embeddings"
        )
        conn.execute("DROP TABLE lesson_embeddings")
        for table in (
            "lessons",
            "mem_tables",
            "mem_rows",
            "commits",
            "commit_targets",
            "snapshots",
            "api_keys",
        ):
            conn.execute(f"ALTER TABLE {table} RENAME COLUMN org_id TO org")
        conn.execute("DELETE FROM schema_migrations WHERE version > 5")
        conn.execute("COMMIT")
    finally:
        conn.close()
    return vectors


def test_a_file_with_sqlite_vec_vectors_keeps_them_all(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    store = open_local_store(path)
    ids = [
        store.save(ALPHA, LessonDraft(f"problem {n}", "resolution"), vector(f"v{n}")).id for n in range(40)
    ]
    store.delete(ALPHA, ids[3])
    store.close()
    before = as_sqlite_vec_left_it(path)

    store = open_local_store(path)
    reader = store._backend.conns.reader
    try:
        tables = {r[0] for r in reader.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert not any(name.startswith("lesson_vectors") for name in tables)
        assert dict(reader.execute("SELECT pk, embedding FROM lesson_embeddings")) == before
        assert reader.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        org_columns = {r[1] for r in reader.execute("PRAGMA table_info(commits)")} & {"org", "org_id"}
        assert org_columns == {"org_id"}
        with store.transaction(ALPHA, write=False) as tx:
            assert len(tx.commits(None, 100, None)) == 41  # 40 saves and a delete
        hits = store.recall(ALPHA, RecallQuery(text="unrelated words", vector=vector("v7"), limit=1))
        assert [hit.lesson.id for hit in hits] == [ids[7]]
        saved = store.save(ALPHA, LessonDraft("a new problem", "r"), vector("new"))
        assert np.frombuffer(
            reader.execute("SELECT embedding FROM lesson_embeddings ORDER BY pk DESC").fetchone()[0],
            dtype=np.float32,
        ).shape == (len(vector("new")),)
        assert store.get(ALPHA, saved.id).problem == "a new problem"
    finally:
        store.close()


BETA = Scope("acme", "beta")


def exact_nearest(path: Path, scope: Scope, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    """The float32 cosine top ``k`` of the scope's stored vectors, computed here from the file."""
    conn = sqlean.connect(str(path))
    try:
        rows = conn.execute(
            "SELECT e.pk, e.embedding FROM lesson_embeddings AS e JOIN lessons AS l ON l.pk = e.pk "
            "WHERE l.org_id = ? AND l.project = ?",
            (scope.org, scope.project),
        ).fetchall()
    finally:
        conn.close()
    matrix = np.stack([np.frombuffer(blob, np.float32) for _, blob in rows])
    sims = (matrix / np.linalg.norm(matrix, axis=1, keepdims=True)) @ (query / np.linalg.norm(query))
    return sorted(
        ((pk, float(s)) for (pk, _), s in zip(rows, sims, strict=True)), key=lambda p: (-p[1], p[0])
    )[:k]


def searched(store: Store, scope: Scope, query: np.ndarray, k: int) -> list[tuple[int, float]]:
    backend = store._backend  # type: ignore[attr-defined]
    with backend.conns.reading() as conn:
        return backend._vectors.search(conn, scope, query, k, now=time.time())[0]  # type: ignore[no-any-return]


def assert_ranked_as_exact(store: Store, path: Path, queries: np.ndarray) -> None:
    for query in queries:
        got, want = searched(store, ALPHA, query, 10), exact_nearest(path, ALPHA, query, 10)
        assert [pk for pk, _ in got] == [pk for pk, _ in want]
        assert np.allclose([s for _, s in got], [s for _, s in want], atol=1e-5)


def test_the_int8_index_ranks_as_float32_search_through_saves_deletes_and_reopening(
    tmp_path: Path, embedder: Embedder
) -> None:
    words = itertools.product(
        ("cache", "queue", "index", "token", "socket", "worker", "schema", "backup"),
        ("stalls", "leaks memory", "times out", "drops writes", "retries forever"),
        ("after a deploy", "under load", "on restart", "at midnight", "behind the proxy", "in CI"),
    )
    texts = [" ".join(w) for w in words]  # 240 lessons, many close to each other
    vectors = embedder.encode_documents(texts)
    queries = np.stack(
        [embedder.encode_query(q) for q in ("cache stalls", "socket times out in CI", "backup")]
    )
    # And 20 around a query, closer to each other than int8's error: only rescoring orders them.
    noise = np.random.default_rng(3).standard_normal((20, queries.shape[1])).astype(np.float32)
    texts += [f"lesson {i} of a tight cluster" for i in range(20)]
    vectors += list(queries[1] + 0.001 * noise)
    path = tmp_path / "lore.db"
    store, other = open_local_store(path), open_local_store(path)
    saved = store.save_many(
        ALPHA, [(LessonDraft(problem=t, resolution="fixed"), v) for t, v in zip(texts, vectors, strict=True)]
    )
    store.save_many(
        BETA,
        [
            (LessonDraft(problem=t, resolution="other"), v)
            for t, v in zip(texts[:50], vectors[:50], strict=True)
        ],
    )
    assert not any(r.merged for r in saved)
    assert_ranked_as_exact(store, path, queries)
    assert searched(store, BETA, queries[0], 60) == exact_nearest(path, BETA, queries[0], 60)

    for result in saved[::3]:  # deletes shrink the index; another process's saves grow it
        store.delete(ALPHA, result.id)
    again = [f"{t}, seen again" for t in texts[:40]]
    other.save_many(
        ALPHA,
        [
            (LessonDraft(problem=t, resolution="x"), v)
            for t, v in zip(again, embedder.encode_documents(again), strict=True)
        ],
    )
    assert_ranked_as_exact(store, path, queries)
    assert len(store._backend._vectors._index) == len(saved) - len(saved[::3]) + 40 + 50  # type: ignore[attr-defined]
    store.close()
    other.close()

    reopened = open_local_store(path)
    assert_ranked_as_exact(reopened, path, queries)
    reopened.close()
