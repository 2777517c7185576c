"""Lessons in a local SQLite file: rows, FTS5 for lexical match, sqlite-vec for vectors.

One connection writes (under a lock, in ``BEGIN IMMEDIATE`` transactions) and one
reads, so a process never contends with itself. Vector search runs on an
in-memory ``VectorIndex`` refreshed from the rows whose revision is newer than the
index's: every write bumps ``lore_meta.rev`` and stamps the rows it touched, and a
delete leaves a tombstone, so other processes' writes show up on the next recall.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from collections.abc import Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from stores import dedup, ranking, structured
from stores.errors import InvalidInputError, NotFoundError
from stores.ids import new_id
from stores.lessons import (
    Lesson,
    LessonDraft,
    LessonPage,
    LessonPatch,
    Neighbour,
    RecallQuery,
    SaveResult,
    Scope,
    ScoredLesson,
    WordMatches,
    lesson_image,
    merged_fields,
    restored_embedding,
)
from stores.local_db import Connection, connect, migrate, read_transaction, write_transaction
from stores.local_db import format_ts as _ts
from stores.local_db import parse_ts as _parse_ts
from stores.local_db import utc_now as _now
from stores.local_models import LocalModelRecords
from stores.local_structured import LocalProjectTx
from stores.vector_index import IndexedRow, VectorIndex
from stores.vectors import unit_vector

_COLUMNS = (
    "pk, id, project, problem, resolution, context, tags, confidence, source, "
    "created_at, updated_at, expires_at, upvotes, downvotes, meta"
)
_LIVE = "(expires_at IS NULL OR expires_at > ?)"
# Lexical candidates fetched before scoping (a multiple of the candidates wanted), so
# one busy project cannot crowd out another.
_FTS_OVERSAMPLE = 4


class LocalLessonStore:
    """``stores.lessons.LessonStore`` on one SQLite file."""

    def __init__(self, path: Path | str, *, ranking_params: ranking.RankingParams | None = None) -> None:
        self.path = Path(path)
        self._ranking = ranking_params or ranking.RankingParams()
        self._writer = connect(path)
        migrate(self._writer)
        self._reader = connect(path)
        self._write_lock = threading.Lock()
        self._read_lock = threading.Lock()
        self._index_lock = threading.Lock()
        self._index: VectorIndex | None = None
        self._index_rev = 0
        self._index_generation = 0
        self._models = LocalModelRecords(self)
        self._closed = False

    # -- writes -------------------------------------------------------------------

    def save(self, scope: Scope, draft: LessonDraft, vector: Sequence[float]) -> SaveResult:
        return self.save_many(scope, [(draft, vector)])[0]

    def save_many(
        self, scope: Scope, items: Sequence[tuple[LessonDraft, Sequence[float]]]
    ) -> list[SaveResult]:
        if not items:
            return []
        vectors = [unit_vector(vec) for _, vec in items]
        now = _now()
        results: list[SaveResult] = []
        # Saved earlier in this transaction: pk, vector, text.
        pending: list[tuple[int, np.ndarray, tuple[str, str, str | None]]] = []
        with self._write_lock, write_transaction(self._writer) as conn:
            self.models.guard(conn)
            dim = self._ensure_dim(conn, vectors[0].shape[0])
            if any(v.shape[0] != dim for v in vectors):
                raise InvalidInputError(f"All vectors must have {dim} dimensions.")
            with self._index_lock:
                self._sync_index(conn)
            rev = self._bump_rev(conn)
            changes = []
            with self._index_lock:
                assert self._index is not None
                nearest = self._index.nearest_many(
                    _scope_key(scope),
                    np.stack(vectors),
                    now=now.timestamp(),
                    k=dedup.MAX_SIMILAR,
                    min_similarity=dedup.CANDIDATE_SIMILARITY,
                )
            for (draft, _), vec, stored in zip(items, vectors, nearest, strict=True):
                neighbours = self._neighbours(conn, vec, stored, pending)
                text = (draft.problem, draft.resolution, draft.context)
                target = dedup.merge_target(text, ((pk, sim, t) for pk, sim, _, t in neighbours))
                similar = tuple((i, round(sim, 6)) for pk, sim, i, _ in neighbours if pk != target)
                if target is not None:
                    before = self._image(conn, self._row_by_pk(conn, target))
                    lesson_id = self._merge(conn, target, draft, rev, now)
                    changes.append((lesson_id, before, self._image(conn, self._row_by_pk(conn, target))))
                    results.append(SaveResult(id=lesson_id, merged=True, similar=similar))
                    continue
                pk, lesson_id = self._insert(conn, scope, draft, vec, rev, now)
                pending.append((pk, vec, text))
                changes.append((lesson_id, None, self._image(conn, self._row_by_pk(conn, pk))))
                results.append(SaveResult(id=lesson_id, merged=False, similar=similar))
            kind = ("merge" if results[0].merged else "save") if len(items) == 1 else "import"
            self._record(conn, scope, kind, changes)
        return results

    def update(
        self, scope: Scope, lesson_id: str, patch: LessonPatch, vector: Sequence[float] | None
    ) -> Lesson:
        now = _now()
        with self._write_lock, write_transaction(self._writer) as conn:
            row = self._live_row(conn, scope, lesson_id, now)
            if vector is not None:
                self.models.guard(conn)
                vec = unit_vector(vector)
                self._ensure_dim(conn, vec.shape[0])
            rev = self._bump_rev(conn)
            values = _row_values(row)
            for name in ("problem", "resolution", "context", "confidence", "source"):
                if getattr(patch, name) is not None:
                    values[name] = getattr(patch, name)
            if patch.tags is not None:
                values["tags"] = list(patch.tags)
            if patch.expires_at is not None:
                values["expires_at"] = _ts(patch.expires_at)
            for name in patch.clear:
                values[name] = None
            before = self._image(conn, row)
            self._write_row(conn, row["pk"], values, rev, now)
            if vector is not None:
                conn.execute(
                    "UPDATE lesson_vectors SET embedding = ? WHERE rowid = ?", (vec.tobytes(), row["pk"])
                )
            after = self._row_by_pk(conn, row["pk"])
            self._record(conn, scope, "update", [(lesson_id, before, self._image(conn, after))])
            return _to_lesson(after)

    def delete(self, scope: Scope, lesson_id: str) -> Lesson:
        now = _now()
        with self._write_lock, write_transaction(self._writer) as conn:
            row = self._live_row(conn, scope, lesson_id, now)
            before = self._image(conn, row)
            self._remove(conn, row["pk"], self._bump_rev(conn))
            self._record(conn, scope, "delete", [(lesson_id, before, None)])
            return _to_lesson(row)

    def vote(self, scope: Scope, lesson_id: str, up: bool) -> Lesson:
        now = _now()
        column = "upvotes" if up else "downvotes"
        with self._write_lock, write_transaction(self._writer) as conn:
            row = self._live_row(conn, scope, lesson_id, now)
            rev = self._bump_rev(conn)
            # The column name is one of two literals above, never user text.
            conn.execute(
                f"UPDATE lessons SET {column} = {column} + 1, rev = ? WHERE pk = ?", (rev, row["pk"])
            )
            after = self._row_by_pk(conn, row["pk"])
            before_image = lesson_image(_to_lesson(row))
            self._record(conn, scope, "vote", [(lesson_id, before_image, lesson_image(_to_lesson(after)))])
            return _to_lesson(after)

    # -- reads --------------------------------------------------------------------

    def get(self, scope: Scope, lesson_id: str) -> Lesson:
        with self._read_lock:
            return _to_lesson(self._live_row(self._reader, scope, lesson_id, _now()))

    def list(self, scope: Scope, tags: tuple[str, ...], limit: int, cursor: str | None) -> LessonPage:
        sql = f"SELECT {_COLUMNS} FROM lessons WHERE org = ? AND project = ? AND {_LIVE}"
        params: list[Any] = [scope.org, scope.project, _ts(_now())]
        if cursor is not None:
            sql += " AND id < ?"
            params.append(cursor)
        if tags:
            sql += f" AND {_tag_filter(len(tags))}"
            params.extend([*tags, len(tags)])
        sql += " ORDER BY id DESC LIMIT ?"
        params.append(limit + 1)
        with self._read_lock:
            rows = _fetch(self._reader, sql, params)
        lessons = tuple(_to_lesson(r) for r in rows[:limit])
        next_cursor = lessons[-1].id if len(rows) > limit else None
        return LessonPage(lessons=lessons, next_cursor=next_cursor)

    def recall(self, scope: Scope, query: RecallQuery) -> list[ScoredLesson]:
        return self.rank(scope, query, self.match_words(scope, query))

    def match_words(self, scope: Scope, query: RecallQuery) -> WordMatches:
        now = query.now or _now()
        k = ranking.candidate_count(query.limit, self._ranking)
        terms = ranking.lexical_terms(query.text, params=self._ranking)
        with self._read_lock, read_transaction(self._reader) as conn:
            keys = self._lexical_candidates(conn, scope, query, terms, k, now)
        return WordMatches(terms=tuple(terms), keys=tuple(keys), now=now)

    def rank(self, scope: Scope, query: RecallQuery, words: WordMatches) -> list[ScoredLesson]:
        now, terms, lexical_hits = words.now, list(words.terms), words.keys
        k = ranking.candidate_count(query.limit, self._ranking)
        vec = unit_vector(query.needs_vector())
        with self._read_lock, read_transaction(self._reader) as conn:
            self.models.guard(conn)
            allowed = self._tagged_pks(conn, scope, query.tags) if query.tags else None
            vector_hits = dict(self._vector_candidates(conn, scope, query, vec, k, now, allowed))
            candidates = vector_hits.keys() | set(lexical_hits)
            if not candidates:
                return []
            marks = ",".join("?" * len(candidates))
            sql = f"SELECT {_COLUMNS} FROM lessons WHERE pk IN ({marks}) AND +org = ? AND +project = ? AND {_LIVE}"
            params: list[Any] = [*candidates, scope.org, scope.project, _ts(now)]
            if query.tags:
                sql += f" AND {_tag_filter(len(query.tags))}"
                params.extend([*query.tags, len(query.tags)])
            rows = _fetch(conn, sql, params)
            nearest = {r["id"] for r in rows if r["pk"] in vector_hits}
            if self._ranking.centring:
                vector_hits = self._centred_similarities(conn, scope, vec, [r["pk"] for r in rows], now)
            else:
                missing = [r["pk"] for r in rows if r["pk"] not in vector_hits]
                if missing and self._index is not None:
                    with self._index_lock:
                        vector_hits.update(self._index.similarities(missing, vec))
        by_id = {row["id"]: row for row in rows}
        candidates = [
            (
                row["id"],
                vector_hits.get(row["pk"]),
                ranking.weight(
                    updated_at=_parse_ts(row["updated_at"]),
                    now=now,
                    confidence=row["confidence"],
                    upvotes=row["upvotes"],
                    downvotes=row["downvotes"],
                    params=self._ranking,
                ),
                " ".join((row["problem"], row["resolution"], row["context"] or "", row["tags"])),
            )
            for row in rows
            if row["confidence"] >= query.min_confidence
        ]
        return [
            ScoredLesson(lesson=_to_lesson(by_id[i]), score=score)
            for i, score in ranking.best(
                candidates,
                terms,
                query.limit,
                self._ranking,
                nearest,
                ranking.names(query.text, self._ranking),
            )
        ]

    def count(self, org: str, project: str | None = None) -> int:
        sql = f"SELECT count(*) FROM lessons WHERE org = ? AND {_LIVE}"
        params: list[Any] = [org, _ts(_now())]
        if project is not None:
            sql += " AND project = ?"
            params.append(project)
        with self._read_lock:
            return int(self._reader.execute(sql, params).fetchone()[0])

    def neighbours(self, scope: Scope, vectors: Sequence[Sequence[float]]) -> list[list[Neighbour]]:
        vecs = [unit_vector(v) for v in vectors]
        with self._read_lock, read_transaction(self._reader) as conn:
            if not vecs or self._stored_dim(conn) is None:
                return [[] for _ in vecs]
            with self._index_lock:
                self._sync_index(conn)
                assert self._index is not None
                nearest = self._index.nearest_many(
                    _scope_key(scope),
                    np.stack(vecs),
                    now=_now().timestamp(),
                    k=dedup.MAX_SIMILAR,
                    min_similarity=dedup.CANDIDATE_SIMILARITY,
                )
            return [
                [Neighbour(i, sim, t) for _, sim, i, t in self._neighbours(conn, vec, stored, [])]
                for vec, stored in zip(vecs, nearest, strict=True)
            ]

    def ensure_dim(self, dim: int) -> None:
        with self._write_lock, write_transaction(self._writer) as conn:
            self._ensure_dim(conn, dim)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        with self._write_lock, self._read_lock:
            self._writer.close()
            self._reader.close()

    # -- structured memory and history ---------------------------------------------

    @contextlib.contextmanager
    def transaction(self, scope: Scope, *, write: bool) -> Iterator[LocalProjectTx]:
        """A ``ProjectTx`` on this file: the write lock and ``BEGIN IMMEDIATE``, or a read snapshot."""
        if write:
            with self._write_lock, write_transaction(self._writer) as conn:
                rev: list[int] = []

                def restore(lesson_id: str, image: Any) -> None:
                    if not rev:
                        self.models.guard(conn)
                        rev.append(self._bump_rev(conn))
                    self._restore(conn, scope, lesson_id, image, rev[0])

                yield LocalProjectTx(conn, scope, restore)
        else:
            with self._read_lock, read_transaction(self._reader) as conn:
                yield LocalProjectTx(conn, scope, structured.read_only_lessons)

    # -- internals ----------------------------------------------------------------

    def _record(self, conn: Connection, scope: Scope, kind: str, changes: list[Any]) -> None:
        structured.record_lessons(
            LocalProjectTx(conn, scope, structured.read_only_lessons), kind, scope.actor, changes
        )

    def _image(self, conn: Connection, row: dict[str, Any]) -> dict[str, Any]:
        blob = conn.execute("SELECT embedding FROM lesson_vectors WHERE rowid = ?", (row["pk"],)).fetchone()
        if blob is None:
            return lesson_image(_to_lesson(row))
        return lesson_image(_to_lesson(row), blob[0], self.models.generation(conn))

    def _remove(self, conn: Connection, pk: int, rev: int) -> None:
        conn.execute("DELETE FROM lessons WHERE pk = ?", (pk,))
        conn.execute("DELETE FROM lessons_fts WHERE rowid = ?", (pk,))
        if self._has_vectors(conn):
            conn.execute("DELETE FROM lesson_vectors WHERE rowid = ?", (pk,))
        conn.execute("INSERT OR REPLACE INTO lesson_tombstones (pk, rev) VALUES (?, ?)", (pk, rev))

    def _restore(self, conn: Connection, scope: Scope, lesson_id: str, image: Any, rev: int) -> None:
        """Make the lesson what ``image`` says (None: gone), for a revert."""
        found = conn.execute(
            "SELECT pk, problem, resolution FROM lessons WHERE id = ? AND org = ? AND project = ?",
            (lesson_id, scope.org, scope.project),
        ).fetchone()
        if image is None:
            if found:
                self._remove(conn, found[0], rev)
            return
        embedding = restored_embedding(lesson_id, image, found and found[1:], self.models.generation(conn))
        if found is None:
            assert embedding is not None
            self._ensure_dim(conn, len(embedding) // 4)  # an import may bring a fresh file its first vector
            pk = conn.execute(
                "INSERT INTO lessons (id, org, project, problem, resolution, confidence, created_at, "
                "updated_at, rev) VALUES (?, ?, ?, '', '', 0, '', '', ?) RETURNING pk",
                (lesson_id, scope.org, scope.project, rev),
            ).fetchone()[0]
            conn.execute("INSERT INTO lesson_vectors (rowid, embedding) VALUES (?, ?)", (pk, embedding))
        else:
            pk = found[0]
            if embedding is not None:
                conn.execute("UPDATE lesson_vectors SET embedding = ? WHERE rowid = ?", (embedding, pk))
        conn.execute(
            "UPDATE lessons SET created_at = ?, upvotes = ?, downvotes = ? WHERE pk = ?",
            (_ts(datetime.fromisoformat(image["created_at"])), image["upvotes"], image["downvotes"], pk),
        )
        values = {
            **image,
            "expires_at": _ts(datetime.fromisoformat(image["expires_at"])) if image["expires_at"] else None,
        }
        self._write_row(conn, pk, values, rev, datetime.fromisoformat(image["updated_at"]))

    def _vector_candidates(
        self,
        conn: Connection,
        scope: Scope,
        query: RecallQuery,
        vec: np.ndarray,
        k: int,
        now: datetime,
        allowed: set[int] | None,
    ) -> list[tuple[int, float]]:
        dim = self._stored_dim(conn)
        if dim is None:
            return []
        if vec.shape[0] != dim:
            raise InvalidInputError(
                f"This store holds {dim}-dimension vectors but the query vector has {vec.shape[0]}: "
                "the database was created with a different embedding model."
            )
        with self._index_lock:
            self._sync_index(conn)
            assert self._index is not None
            return self._index.search(
                _scope_key(scope),
                vec,
                k,
                now=now.timestamp(),
                min_confidence=query.min_confidence,
                allowed=allowed,
            )

    def _centred_similarities(
        self, conn: Connection, scope: Scope, vec: np.ndarray, pks: list[int], now: datetime
    ) -> dict[int, float | None]:
        """The candidates' similarity to the query seen from the scope's anchor
        (``ranking.anchor``: its newest ``ranking.ANCHOR_SAMPLE`` live lessons)."""
        if self._index is None or not pks:
            return {}
        sample = [
            row[0]
            for row in conn.execute(
                f"SELECT pk FROM lessons WHERE org = ? AND project = ? AND {_LIVE} ORDER BY id DESC LIMIT ?",
                (scope.org, scope.project, _ts(now), ranking.ANCHOR_SAMPLE),
            )
        ]
        with self._index_lock:
            _, sample_vectors = self._index.vectors(sample)
            found, vectors = self._index.vectors(pks)
        origin = ranking.anchor(sample_vectors)
        return dict(zip(found, ranking.centred_similarities(vec, vectors, origin), strict=True))

    def _lexical_candidates(
        self, conn: Connection, scope: Scope, query: RecallQuery, terms: list[str], k: int, now: datetime
    ) -> list[int]:
        """Lessons sharing the query's rarest words (``ranking.rare_terms``), best bm25 over
        ``ranking.candidate_terms`` first."""
        names = ranking.names(query.text, self._ranking)
        chosen = self._rare_terms(conn, terms, ranking.query_entities(terms, names, self._ranking))
        if not chosen:
            return []
        ordering = ranking.candidate_terms(chosen, terms, names, self._ranking)
        match = _any_of(chosen)
        if len(ordering) > len(chosen):
            match = f"({match}) AND ({_any_of(ordering)})"
        sql = (
            "SELECT l.pk FROM (SELECT rowid, rank FROM lessons_fts WHERE lessons_fts MATCH ? "
            "ORDER BY rank LIMIT ?) AS f JOIN lessons AS l ON l.pk = f.rowid "
            f"WHERE +l.org = ? AND +l.project = ? AND {_LIVE.replace('expires_at', 'l.expires_at')} "
            "AND l.confidence >= ?"
        )
        params: list[Any] = [
            match,
            k * _FTS_OVERSAMPLE,
            scope.org,
            scope.project,
            _ts(now),
            query.min_confidence,
        ]
        if query.tags:
            sql += f" AND {_tag_filter(len(query.tags), 'l.pk')}"
            params.extend([*query.tags, len(query.tags)])
        sql += " ORDER BY f.rank LIMIT ?"
        params.append(k)
        return [row[0] for row in conn.execute(sql, params)]

    # (The unary + on org and project above and in recall keeps SQLite from driving these
    # queries through the scope index, which scanned the whole project instead of the
    # handful of candidate rows.)

    def _rare_terms(self, conn: Connection, terms: list[str], entities: set[str]) -> list[str]:
        """``ranking.rare_terms`` on the terms' full-text matches, counted in one statement
        and only up to just over the budget (a term past it is common however far past)."""
        if not terms:
            return []
        count = "(SELECT count(*) FROM (SELECT 1 FROM lessons_fts WHERE lessons_fts MATCH ? LIMIT ?))"
        cap = self._ranking.postings_budget + 1
        row = conn.execute(
            f"SELECT {', '.join([count] * len(terms))}", [x for t in terms for x in (f'"{t}"', cap)]
        ).fetchone()
        found = dict(zip(terms, row, strict=True))
        return ranking.rare_terms(terms, found, self._ranking.postings_budget, entities)

    def _tagged_pks(self, conn: Connection, scope: Scope, tags: tuple[str, ...]) -> set[int]:
        marks = ",".join("?" * len(tags))
        rows = conn.execute(
            f"SELECT t.lesson_pk FROM lesson_tags AS t JOIN lessons AS l ON l.pk = t.lesson_pk "
            f"WHERE t.tag IN ({marks}) AND l.org = ? AND l.project = ? "
            "GROUP BY t.lesson_pk HAVING count(*) = ?",
            [*tags, scope.org, scope.project, len(tags)],
        )
        return {row[0] for row in rows}

    def _insert(
        self, conn: Connection, scope: Scope, draft: LessonDraft, vec: np.ndarray, rev: int, now: datetime
    ) -> tuple[int, str]:
        created = draft.created_at or now
        lesson_id = new_id(draft.created_at)
        pk = conn.execute(
            "INSERT INTO lessons (id, org, project, problem, resolution, context, tags, confidence, source, "
            "created_at, updated_at, expires_at, meta, rev) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) RETURNING pk",
            (
                lesson_id,
                scope.org,
                scope.project,
                draft.problem,
                draft.resolution,
                draft.context,
                json.dumps(list(draft.tags)),
                draft.confidence,
                draft.source,
                _ts(created),
                _ts(created),
                _ts(draft.expires_at) if draft.expires_at else None,
                json.dumps(dict(draft.meta)),
                rev,
            ),
        ).fetchone()[0]
        conn.executemany(
            "INSERT INTO lesson_tags (tag, lesson_pk) VALUES (?, ?)", [(t, pk) for t in draft.tags]
        )
        conn.execute(
            "INSERT INTO lessons_fts (rowid, problem, resolution, context, tags) VALUES (?,?,?,?,?)",
            (pk, draft.problem, draft.resolution, draft.context or "", " ".join(draft.tags)),
        )
        conn.execute("INSERT INTO lesson_vectors (rowid, embedding) VALUES (?, ?)", (pk, vec.tobytes()))
        return pk, lesson_id

    def _neighbours(
        self,
        conn: Connection,
        vec: np.ndarray,
        stored: list[tuple[int, float]],
        pending: list[tuple[int, np.ndarray, tuple[str, str, str | None]]],
    ) -> list[tuple[int, float, str, tuple[str, str, str | None]]]:
        """The draft's near neighbours, stored or saved earlier in this batch, most similar
        first: (pk, similarity, id, text) for at most ``dedup.MAX_SIMILAR`` of them."""
        found: dict[int, tuple[float, tuple[str, str, str | None] | None]] = {
            pk: (sim, None) for pk, sim in stored
        }
        for pk, other, text in pending:
            sim = float(other @ vec)
            if sim >= dedup.CANDIDATE_SIMILARITY:
                found[pk] = (sim, text)
        out = []
        for pk, (sim, text) in sorted(found.items(), key=lambda f: (-f[1][0], f[0]))[: dedup.MAX_SIMILAR]:
            row = self._row_by_pk(conn, pk)
            out.append((pk, sim, row["id"], text or (row["problem"], row["resolution"], row["context"])))
        return out

    def _merge(self, conn: Connection, pk: int, draft: LessonDraft, rev: int, now: datetime) -> str:
        row = self._row_by_pk(conn, pk)
        values = {**_row_values(row), **merged_fields(_to_lesson(row), draft)}
        values["expires_at"] = _ts(values["expires_at"]) if values["expires_at"] else None
        self._write_row(conn, pk, values, rev, now)
        return row["id"]

    def _write_row(self, conn: Connection, pk: int, values: dict[str, Any], rev: int, now: datetime) -> None:
        conn.execute(
            "UPDATE lessons SET problem = ?, resolution = ?, context = ?, tags = ?, confidence = ?, "
            "source = ?, expires_at = ?, meta = ?, updated_at = ?, rev = ? WHERE pk = ?",
            (
                values["problem"],
                values["resolution"],
                values["context"],
                json.dumps(values["tags"]),
                values["confidence"],
                values["source"],
                values["expires_at"],
                json.dumps(values["meta"]),
                _ts(now),
                rev,
                pk,
            ),
        )
        conn.execute("DELETE FROM lesson_tags WHERE lesson_pk = ?", (pk,))
        conn.executemany(
            "INSERT INTO lesson_tags (tag, lesson_pk) VALUES (?, ?)", [(t, pk) for t in values["tags"]]
        )
        conn.execute("DELETE FROM lessons_fts WHERE rowid = ?", (pk,))
        conn.execute(
            "INSERT INTO lessons_fts (rowid, problem, resolution, context, tags) VALUES (?,?,?,?,?)",
            (pk, values["problem"], values["resolution"], values["context"] or "", " ".join(values["tags"])),
        )

    def _live_row(self, conn: Connection, scope: Scope, lesson_id: str, now: datetime) -> dict[str, Any]:
        rows = _fetch(
            conn,
            f"SELECT {_COLUMNS} FROM lessons WHERE id = ? AND org = ? AND project = ? AND {_LIVE}",
            [lesson_id, scope.org, scope.project, _ts(now)],
        )
        if not rows:
            raise NotFoundError(f"No lesson {lesson_id} in project '{scope.project}' (it may have expired).")
        return rows[0]

    def _row_by_pk(self, conn: Connection, pk: int) -> dict[str, Any]:
        return _fetch(conn, f"SELECT {_COLUMNS} FROM lessons WHERE pk = ?", [pk])[0]

    def _bump_rev(self, conn: Connection) -> int:
        row = conn.execute(
            "UPDATE lore_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'rev' RETURNING value"
        ).fetchone()
        return int(row[0])

    def _stored_dim(self, conn: Connection) -> int | None:
        row = conn.execute("SELECT value FROM lore_meta WHERE key = 'dim'").fetchone()
        return int(row[0]) if row else None

    def _has_vectors(self, conn: Connection) -> bool:
        return self._stored_dim(conn) is not None

    def _ensure_dim(self, conn: Connection, dim: int) -> int:
        """The vector table is created with the first vector's dimension; others are refused."""
        stored = self._stored_dim(conn)
        if stored is None:
            if not 1 <= dim <= 4096:
                raise InvalidInputError(f"A vector must have between 1 and 4096 dimensions, not {dim}.")
            # dim is an int checked above, never user text.
            conn.execute(f"CREATE VIRTUAL TABLE lesson_vectors USING vec0 (embedding float[{dim}])")
            conn.execute("INSERT INTO lore_meta (key, value) VALUES ('dim', ?)", (str(dim),))
            return dim
        if stored != dim:
            raise InvalidInputError(
                f"This store holds {stored}-dimension vectors but got {dim}: the database was created "
                "with a different embedding model. Use that model, or a new database file."
            )
        return stored

    def _sync_index(self, conn: Connection) -> None:
        """Bring the in-memory index up to the database's revision (caller holds a transaction)."""
        dim = self._stored_dim(conn)
        if dim is None:
            return
        rev = int(conn.execute("SELECT value FROM lore_meta WHERE key = 'rev'").fetchone()[0])
        generation = self.models.generation(conn)
        if self._index is None or generation != self._index_generation:
            # A re-embed swapped every vector (maybe for another dimension): load them anew.
            self._index, self._index_rev, self._index_generation = VectorIndex(dim), 0, generation
        if rev <= self._index_rev:
            return
        index = self._index
        if self._index_rev == 0:
            vectors = dict(conn.execute("SELECT rowid, embedding FROM lesson_vectors"))
            rows = conn.execute("SELECT pk, org, project, expires_at, confidence FROM lessons")
        else:
            for (pk,) in conn.execute("SELECT pk FROM lesson_tombstones WHERE rev > ?", (self._index_rev,)):
                index.remove(pk)
            rows = conn.execute(
                "SELECT pk, org, project, expires_at, confidence FROM lessons WHERE rev > ?",
                (self._index_rev,),
            ).fetchall()
            marks = ",".join("?" * len(rows))
            vectors = (
                dict(
                    conn.execute(
                        f"SELECT rowid, embedding FROM lesson_vectors WHERE rowid IN ({marks})",
                        [r[0] for r in rows],
                    )
                )
                if rows
                else {}
            )
        entries = [
            (
                IndexedRow(
                    key=pk,
                    scope=_scope_key(Scope(org, project)),
                    expires_at=_parse_ts(expires_at).timestamp() if expires_at else math.inf,
                    confidence=confidence,
                ),
                vectors[pk],
            )
            for pk, org, project, expires_at, confidence in rows
            if pk in vectors
        ]
        if self._index_rev == 0:
            blob = b"".join(v for _, v in entries)
            index.load([e for e, _ in entries], np.frombuffer(blob, dtype=np.float32))
        else:
            for entry, vec in entries:
                index.upsert(entry, np.frombuffer(vec, dtype=np.float32))
        self._index_rev = rev

    # -- the embedding model -------------------------------------------------------

    @property
    def models(self) -> LocalModelRecords:
        """The model that made this file's vectors, and re-embedding (``stores.embedding_model``)."""
        return self._models

    # -- orgs and api keys ---------------------------------------------------------

    @property
    def keys(self):  # -> stores.local_keys.LocalKeyStore (a stores.keys.KeyStore)
        """Orgs and API keys on this same file, sharing this store's connections and locks."""
        from stores.local_keys import LocalKeyStore

        if getattr(self, "_keys", None) is None:
            self._keys = LocalKeyStore(self._writer, self._reader, self._write_lock, self._read_lock)
        return self._keys


def _any_of(terms: list[str]) -> str:
    """An FTS5 query for lessons with any of ``terms`` (no quotes in terms: each is a phrase)."""
    return " OR ".join(f'"{t}"' for t in terms)


def _tag_filter(n: int, pk_column: str = "pk") -> str:
    marks = ",".join("?" * n)
    return f"{pk_column} IN (SELECT lesson_pk FROM lesson_tags WHERE tag IN ({marks}) GROUP BY lesson_pk HAVING count(*) = ?)"


def _fetch(conn: Connection, sql: str, params: Sequence[Any]) -> list[dict[str, Any]]:
    cur = conn.execute(sql, params)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def _row_values(row: dict[str, Any]) -> dict[str, Any]:
    values = dict(row)
    values["tags"] = json.loads(row["tags"])
    values["meta"] = json.loads(row["meta"])
    return values


def _to_lesson(row: dict[str, Any]) -> Lesson:
    return Lesson(
        id=row["id"],
        project=row["project"],
        problem=row["problem"],
        resolution=row["resolution"],
        context=row["context"],
        tags=tuple(json.loads(row["tags"])),
        confidence=float(row["confidence"]),
        source=row["source"],
        created_at=_parse_ts(row["created_at"]),
        updated_at=_parse_ts(row["updated_at"]),
        expires_at=_parse_ts(row["expires_at"]) if row["expires_at"] else None,
        upvotes=int(row["upvotes"]),
        downvotes=int(row["downvotes"]),
        meta=json.loads(row["meta"]),
    )


def _scope_key(scope: Scope) -> str:
    return f"{scope.org}\x1f{scope.project}"
