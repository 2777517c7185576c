"""``stores.engine.structured.ProjectTx`` on the local SQLite file.

Tables live in ``mem_tables`` (catalog) and ``mem_rows`` (one JSON object per
row); commits in ``commits`` with their targets in ``commit_targets``. Every
statement is bound to one org and project, so a plan can reach nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from stores import deadline
from stores.engine.lessons import Scope
from stores.engine.plans import Column
from stores.engine.structured import Commit, TableDef
from stores.sqlite.db import Connection

_CHUNK = 500


class LocalProjectTx:
    """One project inside a transaction the caller holds on ``conn``."""

    def __init__(self, conn: Connection, scope: Scope, restore_lesson: Callable[[str, Any], None]) -> None:
        self.conn = conn
        self.scope = scope
        self._restore_lesson = restore_lesson
        self._tables: dict[str, TableDef] | None = None
        self._rows: dict[str, dict[int, dict[str, Any]]] = {}

    @property
    def _key(self) -> tuple[str, str]:
        return self.scope.org, self.scope.project

    def tables(self) -> dict[str, TableDef]:
        if self._tables is None:
            rows = self.conn.execute(
                "SELECT name, columns, next_id FROM mem_tables WHERE org = ? AND project = ? ORDER BY name",
                self._key,
            )
            self._tables = {
                name: TableDef(columns=tuple(Column(**c) for c in json.loads(cols)), next_id=next_id)
                for name, cols, next_id in rows
            }
        return self._tables

    def rows(self, table: str) -> dict[int, dict[str, Any]]:
        if table not in self._rows:
            cur = self.conn.execute(
                "SELECT row_id, data FROM mem_rows WHERE org = ? AND project = ? AND table_name = ? "
                "ORDER BY row_id",
                (*self._key, table),
            )
            rows = {}
            for row_id, data in cur:
                deadline.check()
                rows[row_id] = json.loads(data)
            self._rows[table] = rows
        return self._rows[table]

    def put_table(self, name: str, table: TableDef | None) -> None:
        self._tables = None
        self._rows.pop(name, None)
        if table is None:
            self.conn.execute(
                "DELETE FROM mem_tables WHERE org = ? AND project = ? AND name = ?", (*self._key, name)
            )
            self.conn.execute(
                "DELETE FROM mem_rows WHERE org = ? AND project = ? AND table_name = ?", (*self._key, name)
            )
            return
        columns = json.dumps([c.as_dict() for c in table.columns])
        self.conn.execute(
            "INSERT INTO mem_tables (org, project, name, columns, next_id) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (org, project, name) DO UPDATE SET columns = excluded.columns, next_id = excluded.next_id",
            (*self._key, name, columns, table.next_id),
        )

    def put_rows(self, table: str, changes: Mapping[int, dict[str, Any] | None]) -> None:
        self._rows.pop(table, None)
        gone = [(*self._key, table, row_id) for row_id, values in changes.items() if values is None]
        kept = [(*self._key, table, row_id, json.dumps(v)) for row_id, v in changes.items() if v is not None]
        self.conn.executemany(
            "DELETE FROM mem_rows WHERE org = ? AND project = ? AND table_name = ? AND row_id = ?", gone
        )
        self.conn.executemany("INSERT OR REPLACE INTO mem_rows VALUES (?, ?, ?, ?, ?)", kept)

    def last_commit(self) -> tuple[str, int] | None:
        row = self.conn.execute(
            "SELECT id, seq FROM commits WHERE org = ? AND project = ? ORDER BY seq DESC LIMIT 1", self._key
        ).fetchone()
        return (row[0], row[1]) if row else None

    def add_commit(self, commit: Commit) -> None:
        self.conn.execute(
            "INSERT INTO commits (id, org, project, seq, parent, kind, message, actor, created_at, "
            "schema_hash_before, schema_hash_after, effects) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
            (
                commit.id,
                *self._key,
                commit.seq,
                commit.parent,
                commit.kind,
                commit.message,
                commit.actor,
                commit.created_at.isoformat(),
                commit.schema_hash_before,
                commit.schema_hash_after,
                json.dumps(commit.effects),
            ),
        )
        self.conn.executemany(
            "INSERT OR IGNORE INTO commit_targets (org, project, target, seq) VALUES (?, ?, ?, ?)",
            [(*self._key, t, commit.seq) for t in commit.targets],
        )

    def get_commit(self, commit_id: str) -> Commit | None:
        rows = self._commits(
            "SELECT * FROM commits WHERE id = ? AND org = ? AND project = ?", (commit_id, *self._key)
        )
        return rows[0] if rows else None

    def later_commits_touching(self, seq: int, targets: list[str]) -> list[str]:
        found: dict[int, str] = {}
        for start in range(0, len(targets), _CHUNK):
            chunk = targets[start : start + _CHUNK]
            marks = ",".join("?" * len(chunk))
            cur = self.conn.execute(
                "SELECT DISTINCT c.seq, c.id FROM commit_targets AS t JOIN commits AS c "
                "ON c.org = t.org AND c.project = t.project AND c.seq = t.seq "
                f"WHERE t.org = ? AND t.project = ? AND t.seq > ? AND t.target IN ({marks})",
                (*self._key, seq, *chunk),
            )
            found.update(dict(cur.fetchall()))
        return [found[s] for s in sorted(found)]

    def commits(self, target: str | None, limit: int, before_seq: int | None) -> list[Commit]:
        params: list[Any] = list(self._key)
        sql = "SELECT c.* FROM commits AS c WHERE c.org = ? AND c.project = ?"
        if target is not None:
            sql += (
                " AND EXISTS (SELECT 1 FROM commit_targets AS t WHERE t.org = c.org AND t.project = c.project "
                "AND t.seq = c.seq AND t.target = ?)"
            )
            params.append(target)
        if before_seq is not None:
            sql += " AND c.seq < ?"
            params.append(before_seq)
        sql += " ORDER BY c.seq DESC LIMIT ?"
        params.append(limit)
        return self._commits(sql, params)

    def put_snapshot(self, seq: int, state: dict[str, Any]) -> None:
        self.conn.execute(
            "INSERT OR REPLACE INTO snapshots (org, project, seq, state) VALUES (?, ?, ?, ?)",
            (*self._key, seq, json.dumps(state)),
        )

    def restore_lesson(self, lesson_id: str, image: Mapping[str, Any] | None) -> None:
        self._restore_lesson(lesson_id, image)

    def existing_lesson_ids(self, ids: Sequence[str]) -> set[str]:
        found: set[str] = set()
        for start in range(0, len(ids), _CHUNK):
            chunk = list(ids[start : start + _CHUNK])
            marks = ", ".join("?" * len(chunk))
            # A lesson's key is (org, project, id): what other projects hold is none of this one's business.
            found.update(
                r[0]
                for r in self.conn.execute(
                    f"SELECT id FROM lessons WHERE org = ? AND project = ? AND id IN ({marks})",
                    [*self._key, *chunk],
                )
            )
        return found

    def org_projects(self) -> list[str]:
        rows = self.conn.execute(
            "SELECT project FROM lessons WHERE org = ? UNION SELECT project FROM commits WHERE org = ? "
            "ORDER BY 1",
            (self.scope.org, self.scope.org),
        )
        return [r[0] for r in rows]

    def _commits(self, sql: str, params: Any) -> list[Commit]:
        cur = self.conn.execute(sql, params)
        names = [d[0] for d in cur.description]
        out = []
        for values in cur.fetchall():
            row = dict(zip(names, values, strict=True))
            effects = json.loads(row["effects"])
            out.append(
                Commit(
                    id=row["id"],
                    seq=row["seq"],
                    parent=row["parent"],
                    kind=row["kind"],
                    message=row["message"],
                    actor=row["actor"],
                    created_at=datetime.fromisoformat(row["created_at"]),
                    schema_hash_before=row["schema_hash_before"],
                    schema_hash_after=row["schema_hash_after"],
                    effects=effects,
                )
            )
        return out
