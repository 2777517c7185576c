"""Lessons in Postgres: pgvector (HNSW, cosine) for vectors, tsvector for words.

The sibling of ``stores.local_lessons``: same contract, candidates from the same two
signals (nearest vectors, full-text matches) and the same scoring from
``stores.ranking``, so a query ranks the same lessons first on both. Every
transaction sets ``lore.org`` for the row-level security policies (see
``stores.postgres_db``) besides naming the org in its own filters.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, text

from stores import dedup, ranking, structured
from stores.embedding_model import GENERATION_KEY
from stores.errors import InvalidInputError, NotFoundError
from stores.ids import new_id
from stores.json_numbers import jsonb_text
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
from stores.postgres_db import as_owner, engine_for, migrate, transaction, unavailable_on_failure
from stores.postgres_models import GENERATION_INFO, PostgresModelRecords
from stores.postgres_structured import PostgresProjectTx
from stores.vectors import unit_vector

_COLUMNS = (
    "pk, id, project, problem, resolution, context, tags, confidence, source, "
    "created_at, updated_at, expires_at, upvotes, downvotes, meta"
)
_SCOPED = "org_id = :org AND project = :project AND (expires_at IS NULL OR expires_at > :now)"
# Recall scores every candidate but returns only a few: meta stays text until then.
_RECALL_COLUMNS = _COLUMNS.removesuffix("meta") + "meta::text AS meta"

# Recall's vector candidates: the nearest k by HNSW. When filters leave the index short
# (it filters after its search), an exact scan over the scoped rows replaces them; the
# one-time filter on ``scoped`` skips that scan whenever the index found k.
_VECTOR_CANDIDATES = """
nearest AS MATERIALIZED (
    SELECT pk FROM lessons WHERE {filters} ORDER BY embedding <=> :q LIMIT :k
), scoped AS MATERIALIZED (
    SELECT pk, embedding FROM lessons WHERE {filters} AND (SELECT count(*) FROM nearest) < :k
), vector AS (
    SELECT pk FROM nearest WHERE (SELECT count(*) FROM nearest) >= :k
    UNION ALL (SELECT pk FROM scoped ORDER BY embedding <=> :q LIMIT :k)
)"""

# The scope's anchor (``ranking.anchor``): the mean of its newest live lessons and one zero
# vector, and each candidate's similarity seen from it (``ranking.centred_similarities``).
_ANCHOR = f"""anchor AS MATERIALIZED (
    SELECT avg(e) AS a FROM (
        (SELECT embedding AS e FROM lessons WHERE {_SCOPED} ORDER BY id DESC LIMIT :anchor_n)
        UNION ALL SELECT CAST(:zero AS vector)
    ) AS sample
)"""
_CENTRED_SIMILARITY = (
    "1 - ((embedding - (SELECT a FROM anchor)) <=> (CAST(:q AS vector) - (SELECT a FROM anchor)))"
)


# Appended to the statement that opens a transaction (``_begin``): the model generation, and
# a mention of ``lessons`` that takes its lock before the statement's snapshot, so a
# transaction that waited for a re-embed's swap (which holds the table's strongest lock)
# reads the generation that swap wrote.
_GENERATION = (
    f"(SELECT value FROM lore_meta WHERE key = '{GENERATION_KEY}')",
    "(SELECT count(*) FROM (SELECT 1 FROM lessons LIMIT 0) AS lock_lessons)",
)


class PostgresLessonStore:
    """``stores.lessons.LessonStore`` on Postgres with pgvector."""

    def __init__(
        self, url: str, *, pool_size: int = 5, ranking_params: ranking.RankingParams | None = None
    ) -> None:
        self._ranking = ranking_params or ranking.RankingParams()
        self._engine = engine_for(url, pool_size)
        migrate(self._engine)
        self._dim: int | None = None
        self._models = PostgresModelRecords(self)

    # -- writes -------------------------------------------------------------------

    def save(self, scope: Scope, draft: LessonDraft, vector: Sequence[float]) -> SaveResult:
        return self.save_many(scope, [(draft, vector)])[0]

    def save_many(
        self, scope: Scope, items: Sequence[tuple[LessonDraft, Sequence[float]]]
    ) -> list[SaveResult]:
        if not items:
            return []
        vectors = [unit_vector(vec) for _, vec in items]
        dim = self._ensure_dim(vectors[0].shape[0])
        if any(v.shape[0] != dim for v in vectors):
            raise InvalidInputError(f"All vectors must have {dim} dimensions.")
        now = _now()
        results: list[SaveResult] = []
        # Saved earlier in this transaction: pk, id, vector, text.
        pending: list[tuple[int, str, np.ndarray, tuple[str, str, str | None]]] = []
        with self._writing(scope) as conn:
            self.models.guard(conn)
            changes = []
            for (draft, _), vec in zip(items, vectors, strict=True):
                neighbours = self._neighbours(conn, scope, vec, pending, now)
                text_ = (draft.problem, draft.resolution, draft.context)
                target = dedup.merge_target(text_, ((pk, sim, t) for pk, sim, _, t in neighbours))
                similar = tuple((i, round(sim, 6)) for pk, sim, i, _ in neighbours if pk != target)
                if target is not None:
                    changes.append(self._merge(conn, target, draft, now))
                    results.append(SaveResult(id=changes[-1][0], merged=True, similar=similar))
                    continue
                row = self._insert(conn, scope, draft, vec, now)
                pending.append((row["pk"], row["id"], vec, text_))
                changes.append((row["id"], None, self._image(conn, row, vec)))
                results.append(SaveResult(id=row["id"], merged=False, similar=similar))
            kind = ("merge" if results[0].merged else "save") if len(items) == 1 else "import"
            self._record(conn, scope, kind, changes)
        return results

    def update(
        self, scope: Scope, lesson_id: str, patch: LessonPatch, vector: Sequence[float] | None
    ) -> Lesson:
        vec = None
        if vector is not None:
            vec = unit_vector(vector)
            self._ensure_dim(vec.shape[0])
        now = _now()
        with self._writing(scope) as conn:
            if vec is not None:
                self.models.guard(conn)
            row = self._live_row(conn, scope, lesson_id, now, lock=True, embedding=True)
            values = dict(row)
            for name in ("problem", "resolution", "context", "confidence", "source", "expires_at"):
                if getattr(patch, name) is not None:
                    values[name] = getattr(patch, name)
            if patch.tags is not None:
                values["tags"] = list(patch.tags)
            for name in patch.clear:
                values[name] = None
            after = self._write_row(conn, row["pk"], values, now, vec)
            images = (
                self._image(conn, row, row["embedding"]),
                self._image(conn, after, row["embedding"] if vec is None else vec),
            )
            self._record(conn, scope, "update", [(lesson_id, *images)])
            return _to_lesson(after)

    def delete(self, scope: Scope, lesson_id: str) -> Lesson:
        with self._writing(scope) as conn:
            rows = _fetch(
                conn,
                f"DELETE FROM lessons WHERE id = :id AND {_SCOPED} RETURNING {_COLUMNS}, embedding",
                {**_scope_params(scope, _now()), "id": lesson_id},
            )
            if not rows:
                raise _not_found(scope, lesson_id)
            self._record(
                conn, scope, "delete", [(lesson_id, self._image(conn, rows[0], rows[0]["embedding"]), None)]
            )
            return _to_lesson(rows[0])

    def vote(self, scope: Scope, lesson_id: str, up: bool) -> Lesson:
        column = "upvotes" if up else "downvotes"
        with self._writing(scope) as conn:
            # The column name is one of two literals above, never user text.
            rows = _fetch(
                conn,
                f"UPDATE lessons SET {column} = {column} + 1 WHERE id = :id AND {_SCOPED} RETURNING {_COLUMNS}",
                {**_scope_params(scope, _now()), "id": lesson_id},
            )
            if not rows:
                raise _not_found(scope, lesson_id)
            after = rows[0]
            before = {**after, column: after[column] - 1}  # the update changed nothing else
            self._record(conn, scope, "vote", [(lesson_id, _image(before, None), _image(after, None))])
            return _to_lesson(after)

    # -- reads --------------------------------------------------------------------

    def get(self, scope: Scope, lesson_id: str) -> Lesson:
        with transaction(self._engine, scope.org) as conn:
            return _to_lesson(self._live_row(conn, scope, lesson_id, _now()))

    def neighbours(self, scope: Scope, vectors: Sequence[Sequence[float]]) -> list[list[Neighbour]]:
        with transaction(self._engine, scope.org) as conn:
            if not vectors or self._stored_dim(conn) is None:
                return [[] for _ in vectors]
            return [
                [
                    Neighbour(i, sim, t)
                    for _, sim, i, t in self._neighbours(conn, scope, unit_vector(v), [], _now())
                ]
                for v in vectors
            ]

    def list(self, scope: Scope, tags: tuple[str, ...], limit: int, cursor: str | None) -> LessonPage:
        sql = f"SELECT {_COLUMNS} FROM lessons WHERE {_SCOPED}"
        params: dict[str, Any] = {**_scope_params(scope, _now()), "n": limit + 1}
        if cursor is not None:
            sql += " AND id < :cursor"
            params["cursor"] = cursor
        if tags:
            sql += " AND tags @> :tags"
            params["tags"] = list(tags)
        with transaction(self._engine, scope.org) as conn:
            rows = _fetch(conn, sql + " ORDER BY id DESC LIMIT :n", params)
        lessons = tuple(_to_lesson(r) for r in rows[:limit])
        return LessonPage(lessons=lessons, next_cursor=lessons[-1].id if len(rows) > limit else None)

    def recall(self, scope: Scope, query: RecallQuery) -> list[ScoredLesson]:
        return self.rank(scope, query, self.match_words(scope, query))

    def match_words(self, scope: Scope, query: RecallQuery) -> WordMatches:
        """Recall's first transaction: the full-text candidates (it needs no vector, so it
        runs while the caller embeds the query)."""
        now = query.now or _now()
        k = ranking.candidate_count(query.limit, self._ranking)
        terms = ranking.lexical_terms(query.text, params=self._ranking)
        keys = self._lexical_candidates(scope, query, terms, k, now) if terms else []
        return WordMatches(terms=tuple(terms), keys=tuple(keys), now=now)

    def rank(self, scope: Scope, query: RecallQuery, words: WordMatches) -> list[ScoredLesson]:
        """Recall's second transaction: the nearest vectors and every candidate's row in
        one statement."""
        now, terms, lexical = words.now, list(words.terms), list(words.keys)
        k = ranking.candidate_count(query.limit, self._ranking)
        q = unit_vector(query.needs_vector())
        ef_search = "set_config('hnsw.ef_search', :ef, true)"
        with self._begin(scope.org, ef_search, ef=str(min(1000, 2 * k))) as conn:
            self.models.guard(conn)
            dim = self._stored_dim(conn)
            if dim is not None and q.shape[0] != dim:
                raise InvalidInputError(
                    f"This store holds {dim}-dimension vectors but the query vector has {q.shape[0]}: "
                    "the database was created with a different embedding model."
                )
            if dim is None and not lexical:
                return []
            filters, params = self._recall_filters(scope, query, now)
            ctes, sim, near = "", "NULL", "false"
            candidates = "SELECT unnest(CAST(:lexical AS bigint[]))"
            if dim is not None:
                ctes = f"WITH {_VECTOR_CANDIDATES.format(filters=filters)} "
                candidates = f"SELECT pk FROM vector UNION {candidates}"
                sim, near = "1 - (embedding <=> :q)", "pk IN (SELECT pk FROM vector)"
                if self._ranking.centring:
                    ctes = f"WITH {_VECTOR_CANDIDATES.format(filters=filters)}, {_ANCHOR} "
                    sim = _CENTRED_SIMILARITY
                    params.update(anchor_n=ranking.ANCHOR_SAMPLE, zero=np.zeros(dim, dtype=np.float32))
            sql = (
                f"{ctes}SELECT {_RECALL_COLUMNS}, {sim} AS sim, {near} AS near FROM lessons "
                f"WHERE pk IN ({candidates}) AND {filters}"
            )
            rows = _fetch(conn, sql, {**params, "q": q, "k": k, "lexical": lexical})
        by_id = {row["id"]: row for row in rows}
        candidates = [
            (
                row["id"],
                row["sim"],
                ranking.weight(
                    updated_at=row["updated_at"],
                    now=now,
                    confidence=row["confidence"],
                    upvotes=row["upvotes"],
                    downvotes=row["downvotes"],
                    params=self._ranking,
                ),
                " ".join((row["problem"], row["resolution"], row["context"] or "", " ".join(row["tags"]))),
            )
            for row in rows
        ]
        return [
            ScoredLesson(lesson=_to_lesson({**by_id[i], "meta": json.loads(by_id[i]["meta"])}), score=score)
            for i, score in ranking.best(
                candidates,
                terms,
                query.limit,
                self._ranking,
                {r["id"] for r in rows if r["near"]},
                ranking.names(query.text, self._ranking),
            )
        ]

    def count(self, org: str, project: str | None = None) -> int:
        sql = "SELECT count(*) FROM lessons WHERE org_id = :org AND (expires_at IS NULL OR expires_at > :now)"
        params: dict[str, Any] = {"org": org, "now": _now()}
        if project is not None:
            sql += " AND project = :project"
            params["project"] = project
        with transaction(self._engine, org) as conn:
            return int(conn.execute(text(sql), params).scalar_one())

    def close(self) -> None:
        self._engine.dispose()

    # -- structured memory and history ---------------------------------------------

    @contextlib.contextmanager
    def transaction(self, scope: Scope, *, write: bool) -> Iterator[PostgresProjectTx]:
        """A ``ProjectTx``: writes to one project take turns on its advisory lock."""
        if write:
            with self._writing(scope) as conn:

                def restore(lesson_id: str, image: Any) -> None:
                    self.models.guard(conn)
                    self._restore(conn, scope, lesson_id, image)

                yield PostgresProjectTx(conn, scope, restore)
        else:
            with transaction(self._engine, scope.org) as conn:
                yield PostgresProjectTx(conn, scope, structured.read_only_lessons)

    # -- internals ----------------------------------------------------------------

    @contextlib.contextmanager
    def _begin(self, org: str, *also: str, **params: Any) -> Iterator[Connection]:
        """``postgres_db.transaction``, with more calls in the statement that sets ``lore.org``.

        ``also`` are SQL expressions (settings, locks) that touch no rows, so row-level
        security is in force before the first row is read, one round trip sooner. The same
        statement reads the store's model generation for ``models.guard`` and the commit
        images (``_GENERATION`` says why it also names ``lessons``).
        """
        calls = ", ".join(("set_config('lore.org', :org, true)", *also, *_GENERATION))
        with unavailable_on_failure(), self._engine.begin() as conn:
            row = conn.execute(text(f"SELECT {calls}"), {**params, "org": org}).one()
            conn.info[GENERATION_INFO] = int(row[-2] or 0)
            try:
                yield conn
            finally:
                conn.info.pop(GENERATION_INFO, None)

    def _writing(self, scope: Scope) -> contextlib.AbstractContextManager[Connection]:
        # Writes to one project take turns, so near-duplicates saved at once still merge
        # and commits get consecutive sequence numbers.
        lock = "pg_advisory_xact_lock(hashtext(:key))"
        return self._begin(scope.org, lock, key=f"{scope.org}/{scope.project}")

    def _image(self, conn: Connection, row: dict[str, Any], embedding: Any) -> dict[str, Any]:
        """``_image`` with the model generation this transaction read."""
        return _image(row, embedding, self.models.generation(conn))

    def _record(self, conn: Connection, scope: Scope, kind: str, changes: list[Any]) -> None:
        structured.record_lessons(
            PostgresProjectTx(conn, scope, structured.read_only_lessons), kind, scope.actor, changes
        )

    def _restore(self, conn: Connection, scope: Scope, lesson_id: str, image: Any) -> None:
        """Make the lesson what ``image`` says (None: gone), for a revert."""
        stored = conn.execute(
            text(
                "SELECT pk, problem, resolution FROM lessons WHERE id = :id AND org_id = :org AND project = :project"
            ),
            {"id": lesson_id, "org": scope.org, "project": scope.project},
        ).first()
        found = stored.pk if stored is not None else None
        if image is None:
            if found is not None:
                conn.execute(text("DELETE FROM lessons WHERE pk = :pk"), {"pk": found})
            return
        current_text = (stored.problem, stored.resolution) if stored is not None else None
        embedding = restored_embedding(lesson_id, image, current_text, self.models.generation(conn))
        vec = np.frombuffer(embedding, dtype=np.float32) if embedding is not None else None
        if found is None:
            assert vec is not None
            self._check_dim(conn, vec.shape[0])
            found = conn.execute(
                text(
                    "INSERT INTO lessons (id, org_id, project, problem, resolution, confidence, created_at, "
                    "updated_at, embedding) VALUES (:id, :org, :project, '', '', 0, now(), now(), :v) "
                    "RETURNING pk"
                ),
                {"id": lesson_id, "org": scope.org, "project": scope.project, "v": vec},
            ).scalar_one()
        elif vec is not None:
            conn.execute(text("UPDATE lessons SET embedding = :v WHERE pk = :pk"), {"v": vec, "pk": found})
        conn.execute(
            text("UPDATE lessons SET created_at = :c, upvotes = :u, downvotes = :d WHERE pk = :pk"),
            {
                "c": datetime.fromisoformat(image["created_at"]),
                "u": image["upvotes"],
                "d": image["downvotes"],
                "pk": found,
            },
        )
        expires = datetime.fromisoformat(image["expires_at"]) if image["expires_at"] else None
        self._write_row(
            conn, found, {**image, "expires_at": expires}, datetime.fromisoformat(image["updated_at"])
        )

    def _recall_filters(self, scope: Scope, query: RecallQuery, now: datetime) -> tuple[str, dict[str, Any]]:
        filters = f"{_SCOPED} AND confidence >= :min_conf"
        params: dict[str, Any] = {**_scope_params(scope, now), "min_conf": query.min_confidence}
        if query.tags:
            filters += " AND tags @> :tags"
            params["tags"] = list(query.tags)
        return filters, params

    def _lexical_candidates(
        self, scope: Scope, query: RecallQuery, terms: list[str], k: int, now: datetime
    ) -> list[int]:
        """Keys of the best full-text matches of the query's rare terms (``ranking.rare_terms``).

        One round trip sets the org and estimates each term's postings
        (``lore_term_postings``), a second ranks the matches; migration 4 in
        ``stores.postgres_db`` says why both are functions.
        """
        with unavailable_on_failure(), self._engine.begin() as conn:
            postings = conn.execute(
                text("SELECT set_config('lore.org', :org, true), lore_term_postings(CAST(:terms AS text[]))"),
                {"org": scope.org, "terms": terms},
            ).one()[1]
            names = ranking.names(query.text, self._ranking)
            found = dict(zip(terms, postings, strict=True))
            entities = ranking.query_entities(terms, names, self._ranking)
            chosen = ranking.rare_terms(terms, found, self._ranking.postings_budget, entities)
            if not chosen:
                return []
            # ts_rank knows nothing of rarity: the entities among the chosen terms (numbers,
            # versions, identifiers, paths) are also searched alone, so lessons that have
            # them are not crowded out by lessons with many common words. Both searches
            # order their lessons by ranking.candidate_terms (migration 7).
            alone = [t for t in chosen if ranking.is_entity(t)]
            call = (
                "SELECT c.pk FROM lore_lexical_candidates(:project, {tsq}, :order, :k, :now, :min_conf, "
                "CAST(:tags AS text[])) AS c(pk)"
            )
            sql = call.format(tsq=":tsq")
            if alone and len(alone) < len(chosen):
                sql = f"({sql}) UNION ({call.format(tsq=':entities')})"
            rows = conn.execute(
                text(sql),
                {
                    "project": scope.project,
                    # Terms are letters and digits, maybe joined by . _ / - (ranking.lexical_terms):
                    # the tsquery is well formed.
                    "tsq": " | ".join(chosen),
                    "entities": " | ".join(alone),
                    "order": " | ".join(ranking.candidate_terms(chosen, terms, names, self._ranking)),
                    "k": k,
                    "now": now,
                    "min_conf": query.min_confidence,
                    "tags": list(query.tags),
                },
            )
            return [row[0] for row in rows]

    def _neighbours(
        self,
        conn: Connection,
        scope: Scope,
        vec: np.ndarray,
        pending: list[tuple[int, str, np.ndarray, tuple[str, str, str | None]]],
        now: datetime,
    ) -> list[tuple[int, float, str, tuple[str, str, str | None]]]:
        """The draft's near neighbours, stored or saved earlier in this batch, most similar
        first: (pk, similarity, id, text) for at most ``dedup.MAX_SIMILAR`` of them."""
        rows = conn.execute(
            text(
                f"SELECT pk, id, problem, resolution, context, 1 - (embedding <=> :q) AS sim FROM lessons "
                f"WHERE {_SCOPED} ORDER BY embedding <=> :q LIMIT :k"
            ),
            {**_scope_params(scope, now), "q": vec, "k": dedup.MAX_SIMILAR},
        ).all()
        found = [
            (r.pk, float(r.sim), r.id, (r.problem, r.resolution, r.context))
            for r in rows
            if r.sim >= dedup.CANDIDATE_SIMILARITY
        ]
        for pk, lesson_id, other, text_ in pending:
            sim = float(other @ vec)
            if sim >= dedup.CANDIDATE_SIMILARITY:
                found.append((pk, sim, lesson_id, text_))
        return sorted(found, key=lambda f: (-f[1], f[0]))[: dedup.MAX_SIMILAR]

    def _insert(
        self, conn: Connection, scope: Scope, draft: LessonDraft, vec: np.ndarray, now: datetime
    ) -> dict[str, Any]:
        """Insert the draft; returns the row as RETURNING gives it, so the commit's image
        needs no second read.

        (One statement that also looks for the duplicate, a WITH query around the INSERT,
        measured twice as slow as the two statements: the HNSW insert got slower.)
        """
        created = draft.created_at or now
        return _fetch(
            conn,
            "INSERT INTO lessons (id, org_id, project, problem, resolution, context, tags, confidence, "
            "source, created_at, updated_at, expires_at, meta, embedding) VALUES (:id, :org, :project, "
            ":problem, :resolution, :context, :tags, :confidence, :source, :created, :created, :expires, "
            f"CAST(:meta AS jsonb), :v) RETURNING {_COLUMNS}",
            {
                "id": new_id(draft.created_at),
                "org": scope.org,
                "project": scope.project,
                "problem": draft.problem,
                "resolution": draft.resolution,
                "context": draft.context,
                "tags": list(draft.tags),
                "confidence": draft.confidence,
                "source": draft.source,
                "created": created,
                "expires": draft.expires_at,
                "meta": jsonb_text(dict(draft.meta)),
                "v": vec,
            },
        )[0]

    def _merge(
        self, conn: Connection, pk: int, draft: LessonDraft, now: datetime
    ) -> tuple[str, dict[str, Any], dict[str, Any]]:
        """Merge the draft into lesson ``pk``; returns the commit's (id, before, after)."""
        row = self._row_by_pk(conn, pk, lock=True, embedding=True)
        after = self._write_row(conn, pk, {**row, **merged_fields(_to_lesson(row), draft)}, now)
        return row["id"], self._image(conn, row, row["embedding"]), self._image(conn, after, row["embedding"])

    def _write_row(
        self, conn: Connection, pk: int, values: dict[str, Any], now: datetime, vec: np.ndarray | None = None
    ) -> dict[str, Any]:
        """Write the lesson's fields (and its vector, if given); returns the row as written."""
        embedding = ", embedding = :v" if vec is not None else ""
        return _fetch(
            conn,
            "UPDATE lessons SET problem = :problem, resolution = :resolution, context = :context, "
            "tags = :tags, confidence = :confidence, source = :source, expires_at = :expires_at, "
            f"meta = CAST(:meta AS jsonb), updated_at = :now{embedding} WHERE pk = :pk RETURNING {_COLUMNS}",
            {
                **{
                    k: values[k]
                    for k in ("problem", "resolution", "context", "confidence", "source", "expires_at")
                },
                "tags": list(values["tags"]),
                "meta": jsonb_text(dict(values["meta"])),
                "now": now,
                "pk": pk,
                "v": vec,
            },
        )[0]

    def _live_row(
        self,
        conn: Connection,
        scope: Scope,
        lesson_id: str,
        now: datetime,
        *,
        lock: bool = False,
        embedding: bool = False,
    ) -> dict[str, Any]:
        sql = (
            f"SELECT {_COLUMNS}{', embedding' if embedding else ''} FROM lessons WHERE id = :id AND {_SCOPED}"
        )
        rows = _fetch(
            conn, sql + (" FOR UPDATE" if lock else ""), {**_scope_params(scope, now), "id": lesson_id}
        )
        if not rows:
            raise _not_found(scope, lesson_id)
        return rows[0]

    def _row_by_pk(
        self, conn: Connection, pk: int, *, lock: bool = False, embedding: bool = False
    ) -> dict[str, Any]:
        sql = f"SELECT {_COLUMNS}{', embedding' if embedding else ''} FROM lessons WHERE pk = :pk"
        return _fetch(conn, sql + (" FOR UPDATE" if lock else ""), {"pk": pk})[0]

    def _stored_dim(self, conn: Connection) -> int | None:
        if self._dim is None:
            value = conn.execute(text("SELECT value FROM lore_meta WHERE key = 'dim'")).scalar()
            self._dim = int(value) if value is not None else None
        return self._dim

    def ensure_dim(self, dim: int) -> None:
        self._ensure_dim(dim)

    def _check_dim(self, conn: Connection, dim: int) -> None:
        """Inside a write transaction: the vector column must already be there, with ``dim``.

        Creating it here would deadlock: ``ALTER TABLE`` runs in a transaction of its own
        (as the owner) and waits for this one, which already read ``lessons``. Callers that
        may bring a fresh database its first vector (an import) call ``ensure_dim`` first.
        """
        stored = self._stored_dim(conn)
        if stored is None:
            raise InvalidInputError(
                "This database holds no vectors yet; call ensure_dim before restoring lessons."
            )
        if stored != dim:
            self._ensure_dim(dim)  # raises the usual sentence about another embedding model

    def _ensure_dim(self, dim: int) -> int:
        """The vector column is created with the first vector's dimension; others are refused."""
        if self._dim is None:
            with transaction(self._engine, None) as conn:
                as_owner(conn)
                conn.execute(text("SELECT pg_advisory_xact_lock(hashtext('lore.dim'))"))
                stored = conn.execute(text("SELECT value FROM lore_meta WHERE key = 'dim'")).scalar()
                if stored is None:
                    if not 1 <= dim <= 2000:
                        raise InvalidInputError(
                            f"A vector must have between 1 and 2000 dimensions, not {dim}."
                        )
                    # dim is an int checked above, never user text.
                    conn.exec_driver_sql(f"ALTER TABLE lessons ADD COLUMN embedding vector({dim})")
                    conn.exec_driver_sql(
                        "CREATE INDEX lessons_embedding ON lessons USING hnsw (embedding vector_cosine_ops)"
                    )
                    conn.execute(
                        text("INSERT INTO lore_meta (key, value) VALUES ('dim', :d)"), {"d": str(dim)}
                    )
                    stored = dim
                self._dim = int(stored)
        if self._dim != dim:
            raise InvalidInputError(
                f"This store holds {self._dim}-dimension vectors but got {dim}: the database was created "
                "with a different embedding model. Use that model, or a new database."
            )
        return self._dim

    # -- the embedding model -------------------------------------------------------

    @property
    def models(self) -> PostgresModelRecords:
        """The model that made this database's vectors, and re-embedding (``stores.embedding_model``)."""
        return self._models

    # -- orgs and api keys ---------------------------------------------------------

    @property
    def keys(self):  # -> stores.postgres_keys.PostgresKeyStore (a stores.keys.KeyStore)
        """Orgs and API keys in this same database, on this store's engine."""
        from stores.postgres_keys import PostgresKeyStore

        if getattr(self, "_keys", None) is None:
            self._keys = PostgresKeyStore(self._engine)
        return self._keys


def _scope_params(scope: Scope, now: datetime) -> dict[str, Any]:
    return {"org": scope.org, "project": scope.project, "now": now}


def _not_found(scope: Scope, lesson_id: str) -> NotFoundError:
    return NotFoundError(f"No lesson {lesson_id} in project '{scope.project}' (it may have expired).")


def _image(row: dict[str, Any], embedding: Any, generation: int | None = None) -> dict[str, Any]:
    """A commit's image of a lesson: its row, and its vector as float32 bytes when given,
    with the model generation it belongs to (``stores.lessons.lesson_image``)."""
    if embedding is None:
        return lesson_image(_to_lesson(row))
    # pgvector hands back a Vector (or an ndarray, depending on its version).
    array = embedding.to_numpy() if hasattr(embedding, "to_numpy") else embedding
    return lesson_image(_to_lesson(row), np.asarray(array, dtype=np.float32).tobytes(), generation)


def _fetch(conn: Connection, sql: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    return [dict(row._mapping) for row in conn.execute(text(sql), params)]


def _to_lesson(row: dict[str, Any]) -> Lesson:
    return Lesson(
        id=row["id"],
        project=row["project"],
        problem=row["problem"],
        resolution=row["resolution"],
        context=row["context"],
        tags=tuple(row["tags"]),
        confidence=float(row["confidence"]),
        source=row["source"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        expires_at=row["expires_at"],
        upvotes=int(row["upvotes"]),
        downvotes=int(row["downvotes"]),
        meta=dict(row["meta"]),
    )


def _now() -> datetime:
    return datetime.now(UTC)
