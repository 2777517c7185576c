"""``SqlTx.together``: several inserts in one round trip write exactly what they would one by one.

A save writes its commit, the commit's targets and the call's activity entry this way; on
Postgres as one statement of data-modifying ``WITH`` parts whose parameters are renamed so that
the same name in two parts (``:org`` in every one) binds each part's own value.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy

from stores.engine.sql import SqlTx
from stores.postgres.sql import PostgresSqlTx
from stores.sqlite.db import connect
from stores.sqlite.sql import LocalSqlTx

WRITES = [
    ("INSERT INTO t (org, n, note) VALUES (:org, :n, :note)", {"org": "a", "n": 1, "note": "x:y"}),
    (
        "INSERT INTO t (org, n, note) VALUES (:org, :n, :note) ON CONFLICT DO NOTHING",
        {"org": "b", "n": 2, "note": None},
    ),
    ("INSERT INTO t (org, n, note) VALUES (:org, :n, :note)", {"org": "c", "n": 3, "note": ":org"}),
]


@pytest.fixture(params=["local", "postgres"])
def sql(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[SqlTx, Any]]:
    create = "CREATE TABLE t (org TEXT NOT NULL, n INTEGER PRIMARY KEY, note TEXT)"
    if request.param == "local":
        conn = connect(tmp_path / "t.db")
        conn.execute(create)
        yield LocalSqlTx(conn), lambda q: conn.execute(q).fetchall()
        conn.close()
        return
    engine = sqlalchemy.create_engine(
        request.getfixturevalue("postgres_url").replace("postgresql://", "postgresql+psycopg://", 1)
    )
    with engine.connect() as conn:
        conn.execute(
            sqlalchemy.text("CREATE TEMPORARY TABLE t (org TEXT NOT NULL, n INTEGER PRIMARY KEY, note TEXT)")
        )
        yield PostgresSqlTx(conn), lambda q: [tuple(r) for r in conn.execute(sqlalchemy.text(q))]
        conn.rollback()
    engine.dispose()


def test_together_writes_each_insert_with_its_own_values(sql: tuple[SqlTx, Any]) -> None:
    tx, query = sql
    tx.together(WRITES)
    assert sorted(query("SELECT org, n, note FROM t")) == [("a", 1, "x:y"), ("b", 2, None), ("c", 3, ":org")]


def test_together_of_one_write_and_of_none(sql: tuple[SqlTx, Any]) -> None:
    tx, query = sql
    tx.together([])
    tx.together(WRITES[:1])
    assert query("SELECT org, n, note FROM t") == [("a", 1, "x:y")]


def test_together_refuses_what_is_not_an_insert(sql: tuple[SqlTx, Any]) -> None:
    tx, query = sql
    with pytest.raises(ValueError, match="INSERT"):
        tx.together([*WRITES[:1], ("DELETE FROM t WHERE org = :org", {"org": "a"})])
    assert query("SELECT org FROM t") == []
