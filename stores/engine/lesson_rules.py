"""The one lesson store (``SqlStore``): saving and importing (one batch path, with ``dedup``),
updating, voting, deleting and recall are the same rules on every backend, so they are written
once over the leaf a backend hands the store (``LessonBackend``), which never calls back. Every
write commits each lesson's image before and after in its transaction, for history and revert."""

from __future__ import annotations

import builtins
import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

import numpy as np

from stores.engine import curation, dedup, ranking
from stores.engine.activity import ActivityNote
from stores.engine.activity_rows import ActivityRecords
from stores.engine.embedding_model import ModelRecords
from stores.engine.keys import KeyStore
from stores.engine.lesson_images import lesson_image, merged_fields
from stores.engine.lesson_rows import (
    Change,
    LessonDialect,
    Near,
    SqlLessonTx,
    Text,
    count_live,
    lesson_of,
    live_row,
    not_found,
    patched,
)
from stores.engine.lessons import (
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
)
from stores.engine.structured import ProjectTx
from stores.engine.vectors import unit_vector
from stores.errors import InvalidInputError
from stores.ids import new_id


class CallCounts(Protocol):
    """Tool calls per API key in the database, one count for every server process (the rate
    limit); failed authentications per address too, under keys no key id can be."""

    def take(self, key_id: str, calls: int, limit: int, window_s: int) -> float | None:
        """Count ``calls`` if under ``limit``: None, else (counting nothing) seconds to window end."""


class NoticeFeed(Protocol):
    """Change notices (small JSON, the caller's content) for every server process on a database."""

    def publish(self, notice: Mapping[str, Any]) -> None:
        """Send ``notice`` to every subscriber of every process on the database, this one included."""

    def subscribe(self, listener: Callable[[dict[str, Any]], None]) -> Callable[[], None]:
        """Call ``listener`` per notice on the feed's thread; returns the callable that stops it."""

    def wait_listening(self, timeout: float) -> bool:
        """Whether new notices reach this process, waiting ``timeout`` for the feed to listen."""


class LessonBackend(Protocol):
    """A dialect's leaf under ``SqlStore`` (``stores.sqlite.lessons``, ``stores.postgres.lessons``):
    what differs between backends, with the records made on its connections."""

    ranking: ranking.RankingParams
    activity: ActivityRecords
    models: ModelRecords
    keys: KeyStore
    call_counts: CallCounts | None
    notices: NoticeFeed | None
    # Whether held activity entries are written in a lesson write (``ActivityRecords.riding``).
    rides_activity: bool

    def writing(self, scope: Scope, dim: int | None) -> contextlib.AbstractContextManager[LessonDialect]:
        """A write transaction on the project, its vector storage made for ``dim`` if given."""

    def reading(
        self, scope: Scope, *, lagging: bool = False
    ) -> contextlib.AbstractContextManager[LessonDialect]:
        """A read-only transaction; a ``lagging`` one may read a replica behind the primary."""

    def word_keys(
        self, scope: Scope, query: RecallQuery, terms: list[str], k: int, now: datetime
    ) -> list[int]:
        """Recall's full-text half: row keys of the best matches of ``terms``, at most ``k``."""

    def candidates(
        self, scope: Scope, query: RecallQuery, words: WordMatches, vector: Callable[[], np.ndarray], k: int
    ) -> list[dict[str, Any]]:
        """Recall's vector half: the live candidate rows, decoded, with ``sim`` and ``near``;
        ``vector`` waits for the query's, so what needs none may be read before."""

    def bulk(self, org: str, coming: int) -> contextlib.AbstractContextManager[int]:
        """``SqlStore.bulk``: what a backend does around a large import of ``coming`` lessons; it
        gives how many projects the import may write at once (threads, a project each)."""

    def ensure_dim(self, dim: int) -> None:
        """Fix the store's vector dimension before a restoring ``transaction``, which cannot create
        vector storage on every backend (another dimension is then ``InvalidInputError``)."""

    def probe_write(self) -> None:
        """Begin a real write and roll back, else ``UnavailableError``: ``/healthz`` and ``doctor``
        thus show a stuck writer or unwritable database, not only failing saves."""

    def close(self) -> None:
        """Release connections; idempotent."""


class SqlStore:
    """``stores.Store`` over its backend's leaf (one file or database), which it never hands itself to."""

    def __init__(self, backend: LessonBackend) -> None:
        self._backend = backend
        self._activity = records = backend.activity
        # What the leaf and its records answer alone: keys (the same object on every access), the
        # model of its vectors and re-embedding, activity log, shared call counts and notices
        # (None on SQLite, whose one process counts and tells its own subscribers), upkeep.
        self.append_activity, self.activity = records.append, records.page
        self.recall_stats, self.stale_lessons = records.recall_stats, records.stale_lessons
        self.keys, self.models = backend.keys, backend.models
        self.call_counts, self.notices = backend.call_counts, backend.notices
        self.ensure_dim, self.probe_write, self.close = backend.ensure_dim, backend.probe_write, backend.close
        # Around an import's writes (``save_many`` with ``keep_ids``): Postgres may build its indexes after.
        self.bulk = backend.bulk

    @contextlib.contextmanager
    def _writing(self, scope: Scope, vectors: Sequence[np.ndarray] = ()) -> Iterator[SqlLessonTx]:
        """A write transaction, the first of ``vectors`` fixing the dimension; with vectors, the
        model is checked first. Held activity entries ride along where the backend wants it."""
        dim = vectors[0].shape[0] if vectors else None
        with self._backend.writing(scope, dim) as dialect:
            if any(v.shape[0] != dim for v in vectors):
                raise InvalidInputError(f"All vectors must have {dim} dimensions.")
            rides = self._backend.rides_activity
            with self._activity.riding(dialect.sql) if rides else contextlib.nullcontext():
                tx = SqlLessonTx(dialect, scope, datetime.now(UTC), self.models, self._activity.log)
                if vectors:
                    tx.guard()
                yield tx

    @contextlib.contextmanager
    def _reading(self, scope: Scope, *, lagging: bool = False) -> Iterator[SqlLessonTx]:
        with self._backend.reading(scope, lagging=lagging) as dialect:
            yield SqlLessonTx(dialect, scope, datetime.now(UTC), self.models, self._activity.log)

    def count(self, org: str, project: str | None = None) -> int:
        with self._reading(Scope(org, project or "")) as tx:  # the scope's project is unused
            return count_live(tx.sql, org, project, tx.now)

    def get(self, scope: Scope, lesson_id: str) -> Lesson:
        """One live lesson, else ``NotFoundError``."""
        with self._reading(scope) as tx:
            return live_row(tx, lesson_id, embedding=False).lesson

    def list(self, scope: Scope, tags: tuple[str, ...], limit: int, cursor: str | None) -> LessonPage:
        with self._reading(scope, lagging=True) as tx:
            return tx.page(tags, limit, cursor)

    def embeddings(self, scope: Scope, lesson_ids: Sequence[str]) -> dict[str, bytes]:
        """Stored float32 vectors of the held ``lesson_ids``, for an export."""
        with self._reading(scope) as tx:
            rows = (tx.by_id(lesson_id, live=False) for lesson_id in lesson_ids)
            return {row.lesson.id: row.embedding for row in rows if row is not None and row.embedding}

    def neighbours(
        self, scope: Scope, vectors: Sequence[Sequence[float]]
    ) -> builtins.list[builtins.list[Neighbour]]:
        """As ``SqlLessonTx.nearest``, for the scope."""
        vecs = [unit_vector(v) for v in vectors]
        with self._reading(scope) as tx:
            return [[Neighbour(n.id, n.similarity, n.text) for n in near] for near in tx.nearest(vecs)]

    def recall(self, scope: Scope, query: RecallQuery) -> builtins.list[ScoredLesson]:
        """Live lessons best first by ``ranking``: words first, needing no vector, so they match
        while it embeds; then its nearest vectors, all scored."""
        params = self._backend.ranking
        now = query.now or datetime.now(UTC)
        k = ranking.candidate_count(query.limit, params)
        terms = ranking.lexical_terms(query.text, params=params)
        keys = self._backend.word_keys(scope, query, terms, k, now) if terms else []
        words = WordMatches(terms=tuple(terms), keys=tuple(keys), now=now)
        rows = self._backend.candidates(scope, query, words, lambda: unit_vector(query.needs_vector()), k)
        return scored_lessons(rows, query, terms, now, params)

    @contextlib.contextmanager
    def transaction(self, scope: Scope, *, write: bool) -> Iterator[ProjectTx]:
        """Tables and history in one transaction: a write locks (and restores lessons), a read snapshots."""
        with self._writing(scope) if write else self._reading(scope, lagging=True) as tx:
            yield tx.project(restoring=write)

    def duplicate_pairs(self, scope: Scope, threshold: float) -> builtins.list[curation.Pair]:
        return curation.duplicate_pairs(self._reading(scope), threshold)

    def keep_pair(self, scope: Scope, a: str, b: str) -> None:
        curation.keep_pair(self._writing(scope), a, b)

    def save(self, scope: Scope, draft: LessonDraft, vector: Sequence[float]) -> SaveResult:
        """Insert the draft, or merge it into a live lesson it adds nothing to (``dedup``)."""
        return self.save_many(scope, [(draft, vector)])[0]

    def save_many(
        self,
        scope: Scope,
        items: Sequence[tuple[LessonDraft, Sequence[float] | np.ndarray]],
        *,
        keep_ids: bool = False,
        activity: ActivityNote | None = None,
    ) -> builtins.list[SaveResult]:
        """Drafts in one commit, deduplicated among them too; ``keep_ids``: a draft whose id is held
        (live, expired or earlier in the batch) is skipped; all skipped makes no commit."""
        if not items:
            return []
        drafts = [draft for draft, _ in items]
        vectors = [unit_vector(vec) for _, vec in items]
        with self._writing(scope, vectors) as tx:
            batch = _Batch(tx, vectors, keep_ids=keep_ids)
            saving = batch.fresh(drafts)
            nearest = dict(zip(saving, tx.nearest([vectors[i] for i in saving]), strict=True))
            results = [
                batch.save(draft, i, nearest[i])
                if i in nearest
                else SaveResult(id=str(draft.id), merged=False, skipped=True)
                for i, draft in enumerate(drafts)
            ]
            batch.flush()
            if batch.changes:
                single = "merge" if results[0].merged else "save"
                tx.record("import" if keep_ids or len(items) > 1 else single, batch.changes, activity)
            elif activity is not None:  # a change's entry is written with its commit
                tx.project().append_activity(activity)
        return results

    def update(
        self,
        scope: Scope,
        lesson_id: str,
        patch: LessonPatch,
        vector: Sequence[float] | None,
        *,
        activity: ActivityNote | None = None,
    ) -> Lesson:
        """Apply the patch; ``vector`` replaces the embedding when the text changed."""
        vec = unit_vector(vector) if vector is not None else None
        with self._writing(scope, [vec] if vec is not None else []) as tx:
            row = live_row(tx, lesson_id)
            after = tx.write(row, patched(row.lesson, patch, tx.now), vec)
            tx.record("update", [(lesson_id, tx.image(row), tx.image(after))], activity)
            return after.lesson

    def delete(self, scope: Scope, lesson_id: str, *, activity: ActivityNote | None = None) -> Lesson:
        """Delete a lesson and return it as it was."""
        with self._writing(scope) as tx:
            row = live_row(tx, lesson_id)
            tx.remove(row.key)
            tx.record("delete", [(lesson_id, tx.image(row), None)], activity)
            return row.lesson

    def vote(self, scope: Scope, lesson_id: str, up: bool, *, activity: ActivityNote | None = None) -> Lesson:
        with self._writing(scope) as tx:
            after = tx.add_vote(lesson_id, up)
            if after is None:
                raise not_found(scope, lesson_id)
            # The vote changed nothing else.
            before = dataclasses.replace(
                after, upvotes=after.upvotes - int(up), downvotes=after.downvotes - int(not up)
            )
            tx.record("vote", [(lesson_id, lesson_image(before), lesson_image(after))], activity)
            return after

    def merge_lessons(
        self,
        scope: Scope,
        keep_id: str,
        drop_id: str,
        patch: LessonPatch,
        vector: Sequence[float] | np.ndarray | None,
        *,
        activity: ActivityNote | None = None,
    ) -> Lesson:
        """Fold ``drop_id`` into ``keep_id`` (patch, summed votes) in one ``merge`` commit."""
        if keep_id == drop_id:
            raise InvalidInputError("A lesson cannot be merged into itself; name two lessons.")
        vec = unit_vector(vector) if vector is not None else None
        with self._writing(scope, [vec] if vec is not None else []) as tx:
            keep, drop = live_row(tx, keep_id), live_row(tx, drop_id)
            merged = dataclasses.replace(
                patched(keep.lesson, patch, tx.now),
                upvotes=keep.lesson.upvotes + drop.lesson.upvotes,
                downvotes=keep.lesson.downvotes + drop.lesson.downvotes,
            )
            after = tx.write(keep, merged, vec)
            tx.remove(drop.key)
            changes: builtins.list[Change] = [
                (keep_id, tx.image(keep), tx.image(after)),
                (drop_id, tx.image(drop), None),
            ]
            tx.record("merge", changes, activity)
            return after.lesson


class _Batch:
    """Drafts saved in one transaction, each checked against stored lessons and earlier drafts.
    New rows are written together (one COPY on Postgres) at the end or before a draft merges
    into one; until then they have stand-in keys above every real one."""

    def __init__(self, tx: SqlLessonTx, vectors: list[np.ndarray], *, keep_ids: bool) -> None:
        self.tx, self.keep_ids, self.vectors = tx, keep_ids, np.stack(vectors)  # a row a draft
        # Whether an earlier draft may be near each, from one product; past 4,096 (strict imports) each is checked.
        self.near_earlier = np.ones(len(vectors), dtype=bool)
        if 1 < len(vectors) <= 4096:
            paired = np.triu(self.vectors @ self.vectors.T, 1) >= dedup.CANDIDATE_SIMILARITY - 1e-4
            self.near_earlier = paired.any(axis=0)
        self.changes: list[Change] = []
        self.pending: list[Near] = []  # saved earlier in this batch
        self.saved: list[int] = []  # their drafts' rows in ``vectors``
        self.unwritten: list[tuple[int, int, Lesson, np.ndarray]] = []  # change index, key, lesson, vector
        self.texts: dict[int, Text] = {}  # text of rows written in this batch, as it is now

    def fresh(self, drafts: Sequence[LessonDraft]) -> list[int]:
        """Positions of drafts to save: all, or keeping ids, the first of each id not yet held."""
        if not self.keep_ids:
            return list(range(len(drafts)))
        ids = [draft.id for draft in drafts if draft.id is not None]
        taken: set[str | None] = set(self.tx.project().lesson_titles(ids) if ids else ())
        fresh: list[int] = []
        for i, draft in enumerate(drafts):
            if draft.id is None or draft.id not in taken:
                fresh.append(i)
                taken.add(draft.id)  # None is never taken: drafts without ids are all new
        return fresh

    def save(self, draft: LessonDraft, i: int, stored: list[Near]) -> SaveResult:
        vec = self.vectors[i]
        neighbours = self.neighbours(i, stored)
        text = (draft.problem, draft.resolution, draft.context)
        target = dedup.merge_target(text, ((n.key, n.similarity, n.text) for n in neighbours))
        similar = tuple((n.id, round(n.similarity, 6)) for n in neighbours if n.key != target)
        if target is not None:
            lesson_id = next(n.id for n in neighbours if n.key == target)
            if target >= _UNWRITTEN:
                self.flush()
            self.merge(lesson_id, draft)
            return SaveResult(id=lesson_id, merged=True, similar=similar)
        lesson = drafted(draft, self.tx.scope, self.tx.now, keep_id=self.keep_ids)
        key = _UNWRITTEN + len(self.pending)
        self.unwritten.append((len(self.changes), key, lesson, vec))
        self.changes.append((lesson.id, None, None))  # its image once written (``flush``)
        self.saved.append(i)
        self.pending.append(Near(key, 1.0, lesson.id, text))
        self.texts[key] = text
        return SaveResult(id=lesson.id, merged=False, similar=similar)

    def flush(self) -> None:
        """Write the rows saved since the last flush, and give them their real keys."""
        if not self.unwritten:
            return
        rows = self.tx.insert_many([u[2] for u in self.unwritten], [u[3] for u in self.unwritten])
        real: dict[int, int] = {}
        for (change, key, _, _), row in zip(self.unwritten, rows, strict=True):
            self.changes[change] = (row.lesson.id, None, self.tx.image(row))
            real[key] = row.key
        self.pending = [dataclasses.replace(n, key=real.get(n.key, n.key)) for n in self.pending]
        self.texts = {real.get(key, key): text for key, text in self.texts.items()}
        self.unwritten = []

    def neighbours(self, i: int, stored: list[Near]) -> list[Near]:
        """Up to ``MAX_SIMILAR`` near neighbours of draft ``i``, stored or earlier in the batch, as now."""
        found = {n.key: n for n in stored}
        if self.pending and self.near_earlier[i]:
            sims = (self.vectors[:i] @ self.vectors[i])[self.saved]  # the earlier drafts saved
            for j in np.flatnonzero(sims >= dedup.CANDIDATE_SIMILARITY):
                near = self.pending[j]
                found[near.key] = dataclasses.replace(near, similarity=float(sims[j]))
        ordered = sorted(found.values(), key=lambda n: (-n.similarity, n.key))[: dedup.MAX_SIMILAR]
        return [dataclasses.replace(n, text=self.texts.get(n.key, n.text)) for n in ordered]

    def merge(self, lesson_id: str, draft: LessonDraft) -> None:
        row = self.tx.by_id(lesson_id, live=False)
        assert row is not None  # a neighbour, locked by this transaction
        fields = merged_fields(row.lesson, draft)
        merged = dataclasses.replace(
            row.lesson, **{**fields, "tags": tuple(fields["tags"])}, updated_at=self.tx.now
        )
        after = self.tx.write(row, merged, None)
        self.texts[row.key] = (after.lesson.problem, after.lesson.resolution, after.lesson.context)
        self.changes.append((lesson_id, self.tx.image(row), self.tx.image(after)))


# Stand-in keys of unwritten rows: above every real key, as a later write would get.
_UNWRITTEN = 2**62


def scored_lessons(
    rows: Sequence[Mapping[str, Any]],
    query: RecallQuery,
    terms: list[str],
    now: datetime,
    params: ranking.RankingParams,
) -> list[ScoredLesson]:
    """The best ``rows`` (``near``: found by vector), best first; only those become lessons."""
    kept = [row for row in rows if row["confidence"] >= query.min_confidence]
    by_id = {row["id"]: row for row in kept}
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
                params=params,
            ),
            lexical_text(row),
        )
        for row in kept
    ]
    nearest = {row["id"] for row in kept if row["near"]}
    best = ranking.best(candidates, terms, query.limit, params, nearest, ranking.names(query.text, params))
    return [ScoredLesson(lesson=lesson_of(by_id[i]), score=score) for i, score in best]


def lexical_text(row: Mapping[Any, Any]) -> str:
    """The words a decoded row's lexical score is read from."""
    return " ".join((row["problem"], row["resolution"], row["context"] or "", " ".join(row["tags"])))


def drafted(draft: LessonDraft, scope: Scope, now: datetime, *, keep_id: bool = False) -> Lesson:
    """The lesson a draft becomes: its times or now, its id when kept (an import) or a new one."""
    created = draft.created_at or now
    made = {
        "id": draft.id if keep_id and draft.id is not None else new_id(draft.created_at),
        "project": scope.project,
        "created_at": created,
        "updated_at": draft.updated_at or created,
        "meta": dict(draft.meta),
    }
    return Lesson(**{**vars(draft), **made})
