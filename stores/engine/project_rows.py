"""``ProjectTx``: one project's tables, commits and lessons in a transaction, for both backends;
every statement is bound to one org and project, so a plan can reach nothing else."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from stores import deadline
from stores.engine.activity import ActivityNote
from stores.engine.activity_rows import ActivityLog
from stores.engine.lessons import SCOPE, Scope
from stores.engine.sql import SqlTx
from stores.engine.workspace import TableDef, table_from_json


@dataclass(frozen=True)
class Commit:
    id: str
    seq: int
    parent: str | None
    kind: str
    message: str
    actor: str
    created_at: datetime
    schema_hash_before: str
    schema_hash_after: str
    effects: Mapping[str, Any] = field(default_factory=dict)
    targets: tuple[str, ...] = ()


# A commit's columns stored as they are (its time and effects go through the dialect).
_COMMIT_COLUMNS = "id seq parent kind message actor schema_hash_before schema_hash_after".split()
# A commit's targets, from a list (``each``); WHERE: SQLite's upsert after a SELECT needs one.
_TARGETS = (
    "INSERT INTO commit_targets (org_id, project, target, seq) SELECT :org, :project, value, :seq "
    "FROM {each} WHERE true ON CONFLICT DO NOTHING"
)


@dataclass(eq=False)
class ProjectTx:
    """One project in the caller's ``tx``, for structured memory, history and lesson commits."""

    tx: SqlTx
    scope: Scope
    restore_lesson: Callable[[str, Any], None]  # puts a lesson back as its image says (None: deletes it)
    activity: ActivityLog | None = None
    _added: Commit | None = field(default=None, init=False)  # the commit recorded here, for its log entry
    _tables: dict[str, TableDef] | None = field(default=None, init=False)
    _rows: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict, init=False)

    def tables(self) -> dict[str, TableDef]:
        if self._tables is None:
            rows = self.tx.rows(
                f"SELECT name, columns, next_id FROM mem_tables WHERE {SCOPE} ORDER BY name",
                self.scope.params,
            )
            self._tables = {
                r["name"]: table_from_json({**r, "columns": self.tx.load(r["columns"])}, None) for r in rows
            }
        return self._tables

    def rows(self, table: str) -> dict[int, dict[str, Any]]:
        if table not in self._rows:
            found = self.tx.rows(
                f"SELECT row_id, data FROM mem_rows WHERE {SCOPE} AND table_name = :t ORDER BY row_id",
                {**self.scope.params, "t": table},
            )
            self._rows[table] = {r["row_id"]: self.tx.load(r["data"]) for r in deadline.checked(found)}
        return self._rows[table]

    def put_table(self, name: str, table: TableDef | None) -> None:
        """Create, change or (None) drop a table with its rows."""
        self._tables = None
        self._rows.pop(name, None)
        params = {**self.scope.params, "name": name}
        if table is None:
            self.tx.rows(f"DELETE FROM mem_tables WHERE {SCOPE} AND name = :name", params)
            self.tx.rows(f"DELETE FROM mem_rows WHERE {SCOPE} AND table_name = :name", params)
            return
        self.tx.rows(
            "INSERT INTO mem_tables (org_id, project, name, columns, next_id) "
            f"VALUES (:org, :project, :name, {self.tx.json('columns')}, :next_id) "
            "ON CONFLICT (org_id, project, name) DO UPDATE SET columns = excluded.columns, next_id = excluded.next_id",
            {
                **params,
                "columns": self.tx.dump([c.as_dict() for c in table.columns]),
                "next_id": table.next_id,
            },
        )

    def put_rows(self, table: str, changes: Mapping[int, dict[str, Any] | None]) -> None:
        """Insert, replace or (None) delete rows."""
        self._rows.pop(table, None)
        gone = [{**self.scope.params, "t": table, "id": row_id} for row_id, v in changes.items() if v is None]
        kept = [
            {**self.scope.params, "t": table, "id": row_id, "data": self.tx.dump(v)}
            for row_id, v in changes.items()
            if v is not None
        ]
        self.tx.many(f"DELETE FROM mem_rows WHERE {SCOPE} AND table_name = :t AND row_id = :id", gone)
        self.tx.many(
            "INSERT INTO mem_rows (org_id, project, table_name, row_id, data) "
            f"VALUES (:org, :project, :t, :id, {self.tx.json('data')}) "
            "ON CONFLICT (org_id, project, table_name, row_id) DO UPDATE SET data = excluded.data",
            kept,
        )

    def last_commit(self) -> tuple[str, int] | None:
        rows = self.tx.rows(
            f"SELECT id, seq FROM commits WHERE {SCOPE} ORDER BY seq DESC LIMIT 1", self.scope.params
        )
        return (rows[0]["id"], rows[0]["seq"]) if rows else None

    def add_commit(self, commit: Commit, activity: ActivityNote | None = None) -> None:
        """Write ``commit``, its targets and ``activity``, in one round trip for a few targets."""
        self._added = commit
        insert = (
            "INSERT INTO commits (id, org_id, project, seq, parent, kind, message, actor, created_at, "
            "schema_hash_before, schema_hash_after, effects) VALUES (:id, :org, :project, :seq, :parent, "
            ":kind, :message, :actor, :created_at, :schema_hash_before, :schema_hash_after, "
            f"{self.tx.json('effects')})",
            {
                **self.scope.params,
                **{name: getattr(commit, name) for name in _COMMIT_COLUMNS},
                "created_at": self.tx.stamp(commit.created_at),
                "effects": self.tx.dump(commit.effects),
            },
        )
        writes = [insert]
        if commit.targets:  # in one statement: one a target cost an import's writers 4-10 % of their time
            targets = {**self.scope.params, "targets": self.tx.listed(commit.targets), "seq": commit.seq}
            writes.append((_TARGETS.format(each=self.tx.each("targets")), targets))
        if activity is None:
            self.tx.together(writes)
        else:
            self._append(activity, commit, before=writes)

    def append_activity(self, note: ActivityNote, commit: Commit | None = None) -> None:
        """Log the call's entry here, naming ``commit`` (else this transaction's, if any)."""
        self._append(note, commit or self._added)

    def _append(
        self, note: ActivityNote, commit: Commit | None, before: Sequence[tuple[str, Mapping[str, Any]]] = ()
    ) -> None:
        if self.activity is None:
            raise AssertionError("this transaction was opened without the store's activity log")
        if commit is not None:
            note = note.with_commit(commit.kind, commit.id, commit.targets)
        self.activity.append(self.tx, self.scope, note, before=before)

    def get_commit(self, commit_id: str) -> Commit | None:
        # "#12" (or "12") is commit 12 of the project, as history and the page number them.
        seq = commit_id.lstrip("#")
        by, value = ("seq", int(seq)) if seq.isdigit() else ("id", commit_id)
        rows = self._commits(
            f"SELECT * FROM commits WHERE {by} = :v AND {SCOPE}", {**self.scope.params, "v": value}
        )
        return rows[0] if rows else None

    def later_commits_touching(self, seq: int, targets: list[str]) -> list[str]:
        if not targets:
            return []
        rows = self.tx.rows(
            "SELECT DISTINCT c.seq, c.id FROM commit_targets AS t JOIN commits AS c "
            "ON c.org_id = t.org_id AND c.project = t.project AND c.seq = t.seq "
            f"WHERE t.org_id = :org AND t.project = :project AND t.seq > :seq AND {self.tx.in_list('t.target', 'targets')} "
            "ORDER BY c.seq",
            {**self.scope.params, "seq": seq, "targets": self.tx.listed(targets)},
        )
        return [r["id"] for r in rows]

    def commits(self, target: str | None, limit: int, before_seq: int | None) -> list[Commit]:
        sql = "SELECT c.* FROM commits AS c WHERE c.org_id = :org AND c.project = :project"
        params: dict[str, Any] = {**self.scope.params, "n": limit}
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
        self.tx.rows(
            "INSERT INTO snapshots (org_id, project, seq, state) "
            f"VALUES (:org, :project, :seq, {self.tx.json('state')}) "
            "ON CONFLICT (org_id, project, seq) DO UPDATE SET state = excluded.state",
            {**self.scope.params, "seq": seq, "state": self.tx.dump(state)},
        )

    def lesson_titles(self, ids: Sequence[str]) -> dict[str, str]:
        """The problem of each of ``ids`` stored in this project (live or expired), by id: a lesson's
        key is (org, project, id), so what other projects hold is none of this one's business."""
        rows = self.tx.rows(
            f"SELECT id, problem FROM lessons WHERE {SCOPE} AND {self.tx.in_list('id', 'ids')}",
            {**self.scope.params, "ids": self.tx.listed(ids)},
        )
        return {r["id"]: r["problem"] for r in rows}

    def lesson_digest(self, now: datetime) -> list[dict[str, Any]]:
        """Each live lesson's id, problem, tags, created_at and votes: what an overview counts."""
        rows = self.tx.rows(
            "SELECT id, problem, tags, created_at, upvotes, downvotes FROM lessons "
            f"WHERE {SCOPE} AND (expires_at IS NULL OR expires_at > :now)",
            {**self.scope.params, "now": self.tx.stamp(now)},
        )
        return [
            {**r, "tags": self.tx.load(r["tags"]), "created_at": self.tx.time(r["created_at"])} for r in rows
        ]

    def org_projects(self) -> list[str]:
        """Every project of this org that has lessons or commits, sorted."""
        rows = self.tx.rows(
            "SELECT project FROM lessons WHERE org_id = :org UNION SELECT project FROM commits WHERE org_id = :org "
            "ORDER BY 1",
            {"org": self.scope.org},
        )
        return [r["project"] for r in rows]

    def _commits(self, sql: str, params: dict[str, Any]) -> list[Commit]:
        return [
            Commit(
                **{name: r[name] for name in _COMMIT_COLUMNS},
                created_at=self.tx.time(r["created_at"]),
                effects=self.tx.load(r["effects"]),
            )
            for r in self.tx.rows(sql, params)
        ]
