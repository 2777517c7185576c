"""A local file written before issue 22 opens and keeps everything: its vectors lived in
sqlite-vec's ``vec0`` table (sqlite-vec is no longer a dependency) and its rows named their
org ``org`` (both backends now say ``org_id``, so their statements are written once).

The old file is made the way old Lore left it: the vectors in a ``vec0`` table named
``lesson_vectors``, the org columns named ``org`` and the schema at version 5. Making one
needs sqlite-vec, so the test runs where it is still installed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sqlean

from stores import open_local_store
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
