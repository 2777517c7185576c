"""``stores.engine.structured.ProjectTx`` on Postgres; the sibling of ``stores.sqlite.structured``.

The same tables (``mem_tables``, ``mem_rows``, ``commits``, ``commit_targets``,
``snapshots``), each under the org row-level security policy as well as the
explicit org and project filters below.

Under a request deadline (``stores.deadline``) the transaction's
``statement_timeout`` is set to the time left, so Postgres itself stops a
statement that would run past it; the cancelled statement aborts the
transaction, which rolls back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sqlalchemy import Connection, CursorResult, TextClause, text
from sqlalchemy.exc import DBAPIError

from stores import deadline
from stores.engine.json_numbers import jsonb_text
from stores.engine.lessons import Scope
from stores.engine.plans import Column
from stores.engine.structured import Commit, TableDef

_SCOPE = "org_id = :org AND project = :project"
# SQLSTATE query_canceled: what a statement stopped by statement_timeout raises.
_QUERY_CANCELED = "57014"


class PostgresProjectTx:
    """One project inside a transaction the caller holds on ``conn``."""

    def __init__(self, conn: Connection, scope: Scope, restore_lesson: Callable[[str, Any], None]) -> None:
        self.conn = conn
        self.scope = scope
        self._restore_lesson = restore_lesson
        self._tables: dict[str, TableDef] | None = None
        self._rows: dict[str, dict[int, dict[str, Any]]] = {}
        self._timeout_set = False

    @property
    def _key(self) -> dict[str, str]:
        return {"org": self.scope.org, "project": self.scope.project}

    def tables(self) -> dict[str, TableDef]:
        if self._tables is None:
            rows = self._execute(
                text(f"SELECT name, columns, next_id FROM mem_tables WHERE {_SCOPE} ORDER BY name"), self._key
            )
            self._tables = {
                r.name: TableDef(columns=tuple(Column(**c) for c in r.columns), next_id=r.next_id)
                for r in rows
            }
        return self._tables

    def rows(self, table: str) -> dict[int, dict[str, Any]]:
        if table not in self._rows:
            cur = self._execute(
                text(f"SELECT row_id, data FROM mem_rows WHERE {_SCOPE} AND table_name = :t ORDER BY row_id"),
                {**self._key, "t": table},
            )
            rows = {}
            for r in cur:
                deadline.check()
                rows[r.row_id] = r.data
            self._rows[table] = rows
        return self._rows[table]

    def put_table(self, name: str, table: TableDef | None) -> None:
        self._tables = None
        self._rows.pop(name, None)
        params = {**self._key, "name": name}
        if table is None:
            self._execute(text(f"DELETE FROM mem_tables WHERE {_SCOPE} AND name = :name"), params)
            self._execute(text(f"DELETE FROM mem_rows WHERE {_SCOPE} AND table_name = :name"), params)
            return
        self._execute(
            text(
                "INSERT INTO mem_tables (org_id, project, name, columns, next_id) "
                "VALUES (:org, :project, :name, CAST(:columns AS jsonb), :next_id) "
                "ON CONFLICT (org_id, project, name) DO UPDATE SET columns = excluded.columns, next_id = excluded.next_id"
            ),
            {**params, "columns": jsonb_text([c.as_dict() for c in table.columns]), "next_id": table.next_id},
        )

    def put_rows(self, table: str, changes: Mapping[int, dict[str, Any] | None]) -> None:
        self._rows.pop(table, None)
        gone = [{**self._key, "t": table, "id": row_id} for row_id, v in changes.items() if v is None]
        kept = [
            {**self._key, "t": table, "id": row_id, "data": jsonb_text(v)}
            for row_id, v in changes.items()
            if v is not None
        ]
        if gone:
            self._execute(
                text(f"DELETE FROM mem_rows WHERE {_SCOPE} AND table_name = :t AND row_id = :id"), gone
            )
        if kept:
            self._execute(
                text(
                    "INSERT INTO mem_rows (org_id, project, table_name, row_id, data) "
                    "VALUES (:org, :project, :t, :id, CAST(:data AS jsonb)) "
                    "ON CONFLICT (org_id, project, table_name, row_id) DO UPDATE SET data = excluded.data"
                ),
                kept,
            )

    def last_commit(self) -> tuple[str, int] | None:
        row = self._execute(
            text(f"SELECT id, seq FROM commits WHERE {_SCOPE} ORDER BY seq DESC LIMIT 1"), self._key
        ).first()
        return (row.id, row.seq) if row else None

    def add_commit(self, commit: Commit) -> None:
        self._execute(
            text(
                "INSERT INTO commits (id, org_id, project, seq, parent, kind, message, actor, created_at, "
                "schema_hash_before, schema_hash_after, effects) VALUES (:id, :org, :project, :seq, :parent, "
                ":kind, :message, :actor, :created_at, :before, :after, CAST(:effects AS jsonb))"
            ),
            {
                **self._key,
                "id": commit.id,
                "seq": commit.seq,
                "parent": commit.parent,
                "kind": commit.kind,
                "message": commit.message,
                "actor": commit.actor,
                "created_at": commit.created_at,
                "before": commit.schema_hash_before,
                "after": commit.schema_hash_after,
                "effects": jsonb_text(commit.effects),
            },
        )
        if commit.targets:
            self._execute(
                text(
                    "INSERT INTO commit_targets (org_id, project, target, seq) VALUES (:org, :project, :target, :seq) "
                    "ON CONFLICT DO NOTHING"
                ),
                [{**self._key, "target": t, "seq": commit.seq} for t in commit.targets],
            )

    def get_commit(self, commit_id: str) -> Commit | None:
        rows = self._commits(
            f"SELECT * FROM commits WHERE id = :id AND {_SCOPE}", {**self._key, "id": commit_id}
        )
        return rows[0] if rows else None

    def later_commits_touching(self, seq: int, targets: list[str]) -> list[str]:
        if not targets:
            return []
        rows = self._execute(
            text(
                "SELECT DISTINCT c.seq, c.id FROM commit_targets AS t JOIN commits AS c "
                "ON c.org_id = t.org_id AND c.project = t.project AND c.seq = t.seq "
                "WHERE t.org_id = :org AND t.project = :project AND t.seq > :seq AND t.target = ANY(:targets) "
                "ORDER BY c.seq"
            ),
            {**self._key, "seq": seq, "targets": targets},
        )
        return [r.id for r in rows]

    def commits(self, target: str | None, limit: int, before_seq: int | None) -> list[Commit]:
        sql = "SELECT c.* FROM commits AS c WHERE c.org_id = :org AND c.project = :project"
        params: dict[str, Any] = {**self._key, "n": limit}
        if target is not None:
            sql += (
                " AND EXISTS (SELECT 1 FROM commit_targets AS t WHERE t.org_id = c.org_id "
                "AND t.project = c.project AND t.seq = c.seq AND t.target = :target)"
            )
            params["target"] = target
        if before_seq is not None:
            sql += " AND c.seq < :before"
            params["before"] = before_seq
        return self._commits(sql + " ORDER BY c.seq DESC LIMIT :n", params)

    def put_snapshot(self, seq: int, state: dict[str, Any]) -> None:
        self._execute(
            text(
                "INSERT INTO snapshots (org_id, project, seq, state) VALUES (:org, :project, :seq, CAST(:state AS jsonb)) "
                "ON CONFLICT (org_id, project, seq) DO UPDATE SET state = excluded.state"
            ),
            {**self._key, "seq": seq, "state": jsonb_text(state)},
        )

    def restore_lesson(self, lesson_id: str, image: Mapping[str, Any] | None) -> None:
        self._restore_lesson(lesson_id, image)

    def existing_lesson_ids(self, ids: Sequence[str]) -> set[str]:
        # A lesson's key is (org, project, id): what other projects hold is none of this one's business.
        rows = self._execute(
            text("SELECT id FROM lessons WHERE org_id = :org AND project = :project AND id = ANY(:ids)"),
            {**self._key, "ids": list(ids)},
        )
        return {r.id for r in rows}

    def org_projects(self) -> list[str]:
        rows = self._execute(
            text(
                "SELECT project FROM lessons WHERE org_id = :org UNION "
                "SELECT project FROM commits WHERE org_id = :org ORDER BY 1"
            ),
            {"org": self.scope.org},
        )
        return [r.project for r in rows]

    def _execute(self, statement: TextClause, params: Any = None) -> CursorResult[Any]:
        """``conn.execute`` bounded by the request's deadline."""
        if not self._timeout_set:
            left = deadline.remaining()
            if left is not None:
                if left <= 0:
                    raise deadline.DeadlineExceeded()
                # The time left in whole milliseconds (computed here, never client text).
                self.conn.execute(
                    text("SELECT set_config('statement_timeout', :ms, true)"),
                    {"ms": str(max(1, int(left * 1000)))},
                )
            self._timeout_set = True
        try:
            return self.conn.execute(statement, params)
        except DBAPIError as exc:
            if getattr(exc.orig, "sqlstate", None) == _QUERY_CANCELED:
                raise deadline.DeadlineExceeded() from exc
            raise

    def _commits(self, sql: str, params: dict[str, Any]) -> list[Commit]:
        return [
            Commit(
                id=r.id,
                seq=r.seq,
                parent=r.parent,
                kind=r.kind,
                message=r.message,
                actor=r.actor,
                created_at=r.created_at,
                schema_hash_before=r.schema_hash_before,
                schema_hash_after=r.schema_hash_after,
                effects=r.effects,
            )
            for r in self._execute(text(sql), params)
        ]
