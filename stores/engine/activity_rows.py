"""The activity log over the one SQL layer, written once for both backends.

An entry's id is a ULID, so a time bound is an id bound on the index. A recall's lessons are
``activity_lessons`` rows, so a recall count is an index lookup; a change's lessons are its commit's
targets, so a save writes one row more, not two. Every ``trim_every`` appends trim with one DELETE
per table and audience, below the oldest id the bounds keep."""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from ulid import ULID

from stores.engine.activity import (
    MAX_IDS,
    MAX_QUERY_CHARS,
    ROOT_ONLY_KINDS,
    ActivityBounds,
    ActivityEntry,
    ActivityNote,
    ActivityPage,
    ActivityQuery,
    Recalled,
    RecallStats,
    StaleLesson,
    StalePage,
)
from stores.engine.lessons import SCOPE, Scope
from stores.engine.sql import SqlTx
from stores.ids import new_id

logger = logging.getLogger("stores.activity")
_T = TypeVar("_T")

_ENTRY_COLUMNS = "id, at, kind, key_id, client, commit_id, error, person, detail"
# A note's fields kept as they are in their own columns, and in ``detail``.
_NOTE_COLUMNS = ("kind", "key_id", "client", "commit_id", "error")
_NOTE_DETAILS = ("query", "target", "session", "size")


def id_floor(when: datetime) -> str:
    """The least ULID of ``when``'s millisecond: ids at or after ``when`` are not below it."""
    return str(ULID.from_int(max(0, int(when.timestamp() * 1000)) << 80))


class ActivityLog:
    """Appends and trims one store's activity log (the store makes one, with its bounds)."""

    def __init__(self, bounds: ActivityBounds | None = None) -> None:
        self.bounds = bounds or ActivityBounds()
        self._appends = 0
        self._lock = threading.Lock()

    def append(
        self,
        sql: SqlTx,
        scope: Scope,
        note: ActivityNote,
        made: tuple[str, datetime] | None = None,
        *,
        before: Sequence[tuple[str, Mapping[str, Any]]] = (),
    ) -> str:
        """Write ``note`` in ``sql``'s transaction, one round trip with the writes ``before`` it."""
        if made is None:  # the time first: an id is never older than its time, which trimming compares
            now = datetime.now(UTC)
            made = (new_id(), now)
        entry_id, now = made
        sql.together([*before, *_entry_writes(sql, scope, entry_id, sql.stamp(now), note)])
        with self._lock:
            self._appends += 1
            due = self._appends % max(1, self.bounds.trim_every) == 0
        if due:
            trim(sql, scope, self.bounds, now)
        return entry_id


def trim(sql: SqlTx, scope: Scope, bounds: ActivityBounds, now: datetime) -> None:
    """Delete entries past the bounds per audience: one key's traffic never trims what it cannot see."""
    key = {**scope.params, "root": sql.listed(ROOT_ONLY_KINDS)}
    age = id_floor(now - timedelta(days=bounds.max_age_days))
    root_only = sql.in_list("kind", "root")
    for audience in (f"NOT ({root_only})", root_only):
        kept = sql.rows(
            f"SELECT id FROM activity WHERE {SCOPE} AND {audience} ORDER BY id DESC LIMIT 1 OFFSET :n",
            {**key, "n": max(0, bounds.max_entries - 1)},
        )
        floor = max(age, kept[0]["id"]) if kept else age
        for table, column in (("activity", "id"), ("activity_lessons", "entry_id")):
            sql.rows(
                f"DELETE FROM {table} WHERE {SCOPE} AND {audience} AND {column} < :floor",
                {**key, "floor": floor},
            )


def page(sql: SqlTx, scope: Scope, query: ActivityQuery) -> ActivityPage:
    """``query``'s entries of the project, newest first."""
    where = [SCOPE]
    params: dict[str, Any] = {**scope.params, "n": query.limit + 1}
    for name, op, when in (("since", ">=", query.since), ("until", "<", query.until)):
        if when is not None:
            where.append(f"id {op} :{name}")
            params[name] = id_floor(when)
    for name in ("cursor", "key_id", "client"):
        value = getattr(query, name)
        if value is not None:
            where.append("id < :cursor" if name == "cursor" else f"{name} = :{name}")
            params[name] = value
    if query.kinds:
        where.append(sql.in_list("kind", "kinds"))
        params["kinds"] = sql.listed(query.kinds)
    if query.agents_only:
        where.append("NOT person")
    if query.hidden_kinds:
        where.append(f"NOT ({sql.in_list('kind', 'hidden')})")
        params["hidden"] = sql.listed(query.hidden_kinds)
    if query.lesson_id is not None:
        where.append(
            f"(id IN (SELECT entry_id FROM activity_lessons WHERE {SCOPE} AND lesson_id = :lesson) "
            "OR commit_id IN (SELECT c.id FROM commit_targets AS t JOIN commits AS c ON c.org_id = t.org_id "
            "AND c.project = t.project AND c.seq = t.seq WHERE t.org_id = :org AND t.project = :project "
            "AND t.target = :target))"
        )
        params.update(lesson=query.lesson_id, target=f"lesson:{query.lesson_id}")
    rows = sql.rows(
        f"SELECT {_ENTRY_COLUMNS} FROM activity WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT :n", params
    )
    entries = tuple(_entry(sql, row) for row in rows[: query.limit])
    more = len(rows) > query.limit
    return ActivityPage(entries=entries, next_cursor=entries[-1].id if more and entries else None)


def recall_stats(sql: SqlTx, scope: Scope, lesson_ids: list[str]) -> dict[str, RecallStats]:
    """How often and when last the kept log's recalls returned each of ``lesson_ids``."""
    if not lesson_ids:
        return {}
    rows = sql.rows(
        f"SELECT lesson_id, count(*) AS n, max(at) AS last FROM activity_lessons WHERE {SCOPE} "
        f"AND kind = 'recall' AND {sql.in_list('lesson_id', 'ids')} GROUP BY lesson_id",
        {**scope.params, "ids": sql.listed(lesson_ids)},
    )
    found = {r["lesson_id"]: RecallStats(int(r["n"]), sql.time(r["last"])) for r in rows}
    return {i: found.get(i, RecallStats()) for i in lesson_ids}


def stale(
    sql: SqlTx, scope: Scope, before: datetime, now: datetime, limit: int, cursor: str | None
) -> StalePage:
    """Live lessons created before ``before`` that no kept recall returned, oldest first."""
    params = {**scope.params, "before": sql.stamp(before), "now": sql.stamp(now), "n": limit + 1}
    after = ""
    if cursor is not None:
        after, params["cursor"] = " AND l.id > :cursor", cursor
    rows = sql.rows(
        "SELECT l.id, l.problem, l.created_at, l.upvotes, l.downvotes FROM lessons AS l "
        "WHERE l.org_id = :org AND l.project = :project AND (l.expires_at IS NULL OR l.expires_at > :now) "
        f"AND l.created_at < :before{after} AND NOT EXISTS (SELECT 1 FROM activity_lessons AS a "
        "WHERE a.org_id = l.org_id AND a.project = l.project AND a.lesson_id = l.id AND a.kind = 'recall') "
        "ORDER BY l.id LIMIT :n",
        params,
    )
    lessons = tuple(
        StaleLesson(r["id"], r["problem"], sql.time(r["created_at"]), int(r["upvotes"]), int(r["downvotes"]))
        for r in rows[:limit]
    )
    return StalePage(lessons, lessons[-1].id if len(rows) > limit and lessons else None)


Held = tuple[Scope, str, datetime, ActivityNote]  # an entry's scope, id, time and note

CLOSE_WAIT_S = 10.0  # close's wait for the writer's write in progress, on a database that stopped answering


class ActivityDb(Protocol):
    """The transactions the activity log runs in, from its backend."""

    orgs_together: bool  # held entries of several orgs may share one write (no row-level security)

    def scoped(self, org_id: str, *, write: bool) -> contextlib.AbstractContextManager[SqlTx]:
        """A transaction that may see and change ``org_id``'s rows."""

    def entries(self, org_id: str) -> contextlib.AbstractContextManager[SqlTx]:
        """A write of held entries, whose commit may be lost in a crash (never memory's)."""


class ActivityRecords:
    """Entries of their own (recalls, failures), held and written within ``delay_s`` by a thread, or
    sooner: any SQLite write drops the reader's page cache (the next recall reread index and rows: 3 ms
    at 10k lessons). A killed process loses at most ``delay_s`` of recall entries, never a change's."""

    def __init__(self, db: ActivityDb, bounds: ActivityBounds | None = None, delay_s: float = 2.0) -> None:
        self.log = ActivityLog(bounds)
        self._db, self._delay_s = db, delay_s
        self._held: list[Held] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        # One writer thread: a thread or timer per entry cost a recall more than the write.
        self._thread: threading.Thread | None = None

    def append(self, scope: Scope, note: ActivityNote) -> str:
        """``stores.Store.append_activity``: an entry of no change (a recall, a rolled-back failure),
        held in memory, never a wait on the database, so a server may call it on its event loop;
        reads write held entries first. Changes log with their write. Returns its id."""
        at = datetime.now(UTC)
        entry_id = new_id()  # after its time, as ``ActivityLog.append`` makes them
        with self._lock:
            self._held.append((scope, entry_id, at, note))
            if self._thread is None and not self._stop.is_set():
                self._thread = threading.Thread(target=self._writer, name="lore-activity", daemon=True)
                self._thread.start()
        self._wake.set()
        return entry_id

    @contextlib.contextmanager
    def riding(self, sql: SqlTx) -> Iterator[None]:
        """Held entries written in ``sql`` (sparing SQLite's reader cache); held again on a raise."""
        with self._taken() as held:
            self._write_in(sql, held)
            yield

    def flush(self) -> None:
        """Write every entry held so far; raise what the write raises (held again, for the next)."""
        with self._taken() as held:
            groups: dict[str, list[Held]] = {}
            for item in held:
                groups.setdefault("" if self._db.orgs_together else item[0].org, []).append(item)
            for items in groups.values():
                with self._db.entries(items[0][0].org) as sql:
                    self._write_in(sql, items)

    def close(self) -> None:
        """Stop the writer, awaiting its write (else it checks out of a disposed pool), then write the
        rest; a failure is only logged, as only recall and failure entries are lost."""
        self._stop.set()
        self._wake.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(CLOSE_WAIT_S)
        try:
            self.flush()
        except Exception as exc:
            logger.warning("could not write held activity entries on close: %s", exc)

    def page(self, scope: Scope, query: ActivityQuery) -> ActivityPage:
        return self._read(page, scope, query)

    def recall_stats(self, scope: Scope, lesson_ids: list[str]) -> dict[str, RecallStats]:
        return self._read(recall_stats, scope, lesson_ids)

    def stale_lessons(self, scope: Scope, before: datetime, limit: int, cursor: str | None) -> StalePage:
        return self._read(stale, scope, before, datetime.now(UTC), limit, cursor)

    def _read(self, read: Callable[..., _T], scope: Scope, *args: Any) -> _T:
        self.flush()
        with self._db.scoped(scope.org, write=False) as sql:
            return read(sql, scope, *args)

    def _write_in(self, sql: SqlTx, held: list[Held]) -> None:
        for scope, entry_id, at, note in held:
            self.log.append(sql, scope, note, (entry_id, at))

    @contextlib.contextmanager
    def _taken(self) -> Iterator[list[Held]]:
        """The held entries, no longer held; held again, ahead of newer ones, if the block raises."""
        with self._lock:
            held, self._held = self._held, []
        try:
            yield held
        except BaseException:
            if held:
                with self._lock:
                    self._held[:0] = held
                self._wake.set()
            raise

    def _writer(self) -> None:
        while not self._stop.is_set():
            self._wake.wait()
            if self._stop.wait(self._delay_s):
                return
            self._wake.clear()
            try:
                self.flush()
            except Exception as exc:  # the writer thread has nobody to tell but the log
                logger.warning("could not write %d held activity entries: %s", len(self._held), exc)


def _entry_writes(
    sql: SqlTx, scope: Scope, entry_id: str, at: Any, note: ActivityNote
) -> list[tuple[str, Mapping[str, Any]]]:
    """The entry's row, and a row per lesson a recall returned."""
    key = scope.params
    fields = {name: getattr(note, name) for name in (*_NOTE_COLUMNS, "person")}
    entry = {**key, **fields, "id": entry_id, "at": at, "detail": sql.dump(_detail(note))}
    writes: list[tuple[str, Mapping[str, Any]]] = [
        (
            f"INSERT INTO activity (org_id, project, {_ENTRY_COLUMNS}) VALUES (:org, :project, :id, :at, "
            f":kind, :key_id, :client, :commit_id, :error, :person, {sql.json('detail')}) "
            # A held entry written again after a flush that half failed (one org of several).
            "ON CONFLICT (org_id, project, id) DO NOTHING",
            entry,
        )
    ]
    # Recall lessons get rows (counts and "stale" read them), a change's come from its commit.
    # A person's recall is a ``read``: no recall count or "stale" view counts it.
    kind = "read" if note.person and note.kind == "recall" else note.kind
    writes.extend(
        (
            "INSERT INTO activity_lessons (org_id, project, lesson_id, entry_id, kind, at) "
            "VALUES (:org, :project, :lesson, :entry, :kind, :at) ON CONFLICT DO NOTHING",
            {**key, "lesson": lesson, "entry": entry_id, "kind": kind, "at": at},
        )
        for lesson in dict.fromkeys(r.id for r in note.results)
    )
    return writes


def _detail(note: ActivityNote) -> dict[str, Any]:
    """What an entry keeps besides its columns: lessons, tables, a recall's query and answer."""
    detail: dict[str, Any] = {}
    if note.lesson_ids:
        detail["lessons"] = list(note.lesson_ids[:MAX_IDS])
    if note.tables:
        detail["tables"] = list(note.tables[:MAX_IDS])
    if note.query is not None:
        detail["query"] = note.query[:MAX_QUERY_CHARS]
    if note.results:
        detail["results"] = [[r.id, r.rank, round(r.score, 6)] for r in note.results]
    for name in _NOTE_DETAILS[1:]:  # the query is cut above
        if getattr(note, name) is not None:
            detail[name] = getattr(note, name)
    return detail


def _entry(sql: SqlTx, row: dict[str, Any]) -> ActivityEntry:
    detail = sql.load(row["detail"])
    note = ActivityNote(
        **{name: row[name] for name in _NOTE_COLUMNS},
        **{name: detail.get(name) for name in _NOTE_DETAILS},
        lesson_ids=tuple(detail.get("lessons", ())),
        tables=tuple(detail.get("tables", ())),
        results=tuple(Recalled(i, rank, score) for i, rank, score in detail.get("results", ())),
        person=bool(row["person"]),
    )
    return ActivityEntry(id=row["id"], at=sql.time(row["at"]), note=note)
