"""The lessons contract: value types and the protocol every backend implements.

A lesson is a problem and how it was resolved. Stores persist lessons, search them
and keep them scoped; they never embed or redact text. Callers hand them text that
is already redacted and the vector computed from it, so a store is deterministic
and can be tested without the model.

A lesson's key is (org, project, id): an id is unique within its project only, so
the same id may name another lesson in another project or org, and nothing a scope
does depends on, or shows, what other scopes hold (an import keeps its ids).

Every method raises ``stores.errors.NotFoundError`` for an id outside the scope,
``InvalidInputError`` for a vector of the wrong dimension, and
``UnavailableError`` when the database cannot be reached. Writes are atomic: a
method that raises has changed nothing.
"""

from __future__ import annotations

import base64
import builtins
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from stores.engine.json_numbers import has_negative_zero, plain_float, without_negative_zero
from stores.errors import ConflictError, InvalidInputError

if TYPE_CHECKING:
    from stores.engine.embedding_model import ModelRecords

# Limits shared by every backend and by the MCP layer, so both reject the same input.
MAX_TEXT_CHARS = 16_000
MAX_SHORT_CHARS = 500
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_RECALL_LIMIT = 50
MAX_LIST_LIMIT = 100
# How many differing sources a merged lesson remembers in meta.other_sources.
MAX_OTHER_SOURCES = 20


@dataclass(frozen=True)
class Scope:
    """Who owns the rows: every query is confined to one org and one project."""

    org: str
    project: str
    # Who is acting, for the commit log; not part of the scope's identity.
    actor: str = field(default="local", compare=False)


@dataclass(frozen=True)
class LessonDraft:
    """A lesson to save: text already redacted, tags normalised."""

    problem: str
    resolution: str
    context: str | None = None
    tags: tuple[str, ...] = ()
    confidence: float = 0.5
    source: str | None = None
    expires_at: datetime | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None

    def __post_init__(self) -> None:
        _plain_numbers(self)


@dataclass(frozen=True)
class LessonPatch:
    """Fields to change on a lesson; ``None`` leaves a field as it is.

    ``clear`` names optional fields to set to null (``context``, ``source``,
    ``expires_at``), since ``None`` already means "unchanged".
    """

    problem: str | None = None
    resolution: str | None = None
    context: str | None = None
    tags: tuple[str, ...] | None = None
    confidence: float | None = None
    source: str | None = None
    expires_at: datetime | None = None
    clear: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        _plain_numbers(self)


@dataclass(frozen=True)
class Lesson:
    """A stored lesson as every backend returns it."""

    id: str
    project: str
    problem: str
    resolution: str
    context: str | None
    tags: tuple[str, ...]
    confidence: float
    source: str | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    upvotes: int
    downvotes: int
    meta: Mapping[str, Any]

    def __post_init__(self) -> None:
        _plain_numbers(self)


def _plain_numbers(value: LessonDraft | LessonPatch | Lesson) -> None:
    """``-0.0`` made ``0.0`` in confidence and meta, in what is written and what is read.

    Postgres keeps the sign in ``double precision`` and drops it in ``jsonb``; SQLite drops
    it in ``REAL`` and keeps it in JSON text. One zero on the way in and out keeps the two
    backends giving the same answer (see ``stores.engine.json_numbers``).
    """
    if value.confidence is not None:
        object.__setattr__(value, "confidence", plain_float(value.confidence))
    meta = getattr(value, "meta", None)
    if meta is not None and has_negative_zero(meta):
        object.__setattr__(value, "meta", without_negative_zero(meta))


@dataclass(frozen=True)
class SaveResult:
    """The id a draft landed under, whether it merged into an existing lesson (only when it
    added nothing, see ``stores.engine.dedup``), and the near neighbours it did not merge with,
    as (id, cosine similarity), most similar first."""

    id: str
    merged: bool
    similar: tuple[tuple[str, float], ...] = ()


@dataclass(frozen=True)
class Neighbour:
    """A stored lesson near a new one: what ``stores.engine.dedup.merge_target`` decides on."""

    id: str
    similarity: float
    text: tuple[str, str, str | None]  # problem, resolution, context


@dataclass(frozen=True)
class RecallQuery:
    """A recall request: the query text (for lexical match) and its vector.

    ``LessonStore.match_words`` needs no vector, so a caller can embed the query
    while the store searches words, then call ``LessonStore.rank`` with both.
    """

    text: str
    vector: Sequence[float] | None = None
    tags: tuple[str, ...] = ()
    min_confidence: float = 0.0
    limit: int = 5
    now: datetime | None = None

    def with_vector(self, vector: Sequence[float]) -> RecallQuery:
        return replace(self, vector=vector)

    def needs_vector(self) -> Sequence[float]:
        """The vector ``rank`` compares with; a query without one is a caller's bug."""
        if self.vector is None:
            raise InvalidInputError("Recall needs the query's vector.")
        return self.vector


@dataclass(frozen=True)
class WordMatches:
    """The full-text half of a recall (``LessonStore.match_words``): the query's terms and
    the lessons they found (the backend's row keys, best first), as of ``now``."""

    terms: tuple[str, ...]
    keys: tuple[int, ...]
    now: datetime


@dataclass(frozen=True)
class ScoredLesson:
    """A recalled lesson with its final score (higher is better)."""

    lesson: Lesson
    score: float


@dataclass(frozen=True)
class LessonPage:
    """One page of a listing; pass ``next_cursor`` back to get the next page."""

    lessons: tuple[Lesson, ...]
    next_cursor: str | None


def lesson_image(
    lesson: Lesson, embedding: bytes | None = None, generation: int | None = None
) -> dict[str, Any]:
    """A lesson as JSON for a commit's effects; with its vector (float32 bytes) when a
    revert may need to recreate it.

    A store passes the model ``generation`` its vector belongs to
    (``stores.engine.embedding_model``), so a revert after ``lore-memory reembed`` can tell a
    vector of the model the store used before. ``None`` marks a vector the caller has just
    computed with the store's current model (an import).
    """
    image: dict[str, Any] = {
        "id": lesson.id,
        "project": lesson.project,
        "problem": lesson.problem,
        "resolution": lesson.resolution,
        "context": lesson.context,
        "tags": list(lesson.tags),
        "confidence": lesson.confidence,
        "source": lesson.source,
        "created_at": lesson.created_at.isoformat(),
        "updated_at": lesson.updated_at.isoformat(),
        "expires_at": lesson.expires_at.isoformat() if lesson.expires_at else None,
        "upvotes": lesson.upvotes,
        "downvotes": lesson.downvotes,
        "meta": dict(lesson.meta),
    }
    if embedding is not None:
        image["embedding"] = {"vector": base64.b64encode(embedding).decode("ascii"), "generation": generation}
    return image


def image_lesson(image: Mapping[str, Any]) -> Lesson:
    """The lesson a ``lesson_image`` describes (its vector aside)."""
    expires = image.get("expires_at")
    return Lesson(
        id=image["id"],
        project=image["project"],
        problem=image["problem"],
        resolution=image["resolution"],
        context=image.get("context"),
        tags=tuple(image.get("tags", ())),
        confidence=float(image["confidence"]),
        source=image.get("source"),
        created_at=datetime.fromisoformat(image["created_at"]),
        updated_at=datetime.fromisoformat(image["updated_at"]),
        expires_at=datetime.fromisoformat(expires) if expires else None,
        upvotes=int(image.get("upvotes", 0)),
        downvotes=int(image.get("downvotes", 0)),
        meta=dict(image.get("meta") or {}),
    )


def merged_image(current: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """``current``'s image after ``new`` (an image that adds nothing to it) merges into it:
    ``merged_fields`` for images, as an import merges."""
    lesson = image_lesson(new)
    draft = LessonDraft(
        problem=lesson.problem,
        resolution=lesson.resolution,
        context=lesson.context,
        tags=lesson.tags,
        confidence=lesson.confidence,
        source=lesson.source,
        expires_at=lesson.expires_at,
    )
    fields = merged_fields(image_lesson(current), draft)
    expires = fields["expires_at"]
    return {**current, **fields, "expires_at": expires.isoformat() if expires else None}


def image_embedding(image: Mapping[str, Any]) -> bytes | None:
    """The float32 vector bytes a lesson image carries, if any."""
    raw = image.get("embedding")
    if isinstance(raw, Mapping):
        raw = raw.get("vector")
    return base64.b64decode(raw) if raw else None


def image_vector_usable(image: Mapping[str, Any], generation: int) -> bool:
    """Whether the vector a lesson image carries belongs to the store's model ``generation``:
    images written before models had generations hold a plain string (generation 0), and
    a vector just computed by the caller (no generation) always does."""
    raw = image.get("embedding")
    if not raw:
        return False
    if isinstance(raw, Mapping):
        made = raw.get("generation")
        return made is None or int(made) == generation
    return generation == 0


def restored_embedding(
    lesson_id: str, image: Mapping[str, Any], current_text: Sequence[str] | None, generation: int
) -> bytes | None:
    """The vector a revert writes when it makes a lesson what ``image`` says; None keeps the
    stored one. ``current_text`` is the stored lesson's (problem, resolution), or None when
    the lesson is gone; ``generation`` is the store's model generation.

    The same text keeps its vector (it is the same under the same model). Otherwise the
    image's vector must be of the current model: one kept from before ``lore-memory
    reembed`` would be compared with vectors of another model, so that revert is refused.
    """
    if current_text and (
        tuple(current_text) == (image["problem"], image["resolution"]) or not image.get("embedding")
    ):
        return None
    if image_vector_usable(image, generation):
        return image_embedding(image)
    if not image.get("embedding"):
        raise ConflictError(f"Lesson {lesson_id} cannot be restored: its commit kept no vector.")
    raise ConflictError(
        f"Lesson {lesson_id} cannot be restored: its commit was made before the store was re-embedded "
        "with another model (`lore-memory reembed`), and the vector it kept belongs to the old model. "
        "Save the lesson again instead."
    )


def merged_fields(current: Lesson, draft: LessonDraft) -> dict[str, Any]:
    """What a lesson's fields become when a draft that adds nothing to it merges into it.

    Nothing is lost: tags are united, the higher confidence and the longer life win,
    empty context and source are filled in, and a different source is kept in
    ``meta.other_sources``; the text of the existing lesson stays (the draft's adds nothing).
    """
    expires = current.expires_at
    if expires is not None:
        expires = None if draft.expires_at is None else max(expires, draft.expires_at)
    meta = {**current.meta, "merged_count": int(current.meta.get("merged_count", 0)) + 1}
    if current.source and draft.source and draft.source != current.source:
        others = [s for s in meta.get("other_sources", []) if isinstance(s, str)]
        meta["other_sources"] = list(dict.fromkeys([*others, draft.source]))[-MAX_OTHER_SOURCES:]
    return {
        "tags": list(dict.fromkeys([*current.tags, *draft.tags])),
        "confidence": max(current.confidence, draft.confidence),
        "context": current.context or draft.context,
        "source": current.source or draft.source,
        "expires_at": expires,
        "meta": meta,
    }


class LessonStore(Protocol):
    """Persistence and search of lessons, confined to a scope."""

    def save(self, scope: Scope, draft: LessonDraft, vector: Sequence[float]) -> SaveResult:
        """Insert the draft, or merge it into a live lesson of the same scope that it adds
        nothing to (``stores.engine.dedup.merge_target`` over the nearest vectors)."""
        ...

    def save_many(
        self, scope: Scope, items: Sequence[tuple[LessonDraft, Sequence[float]]]
    ) -> list[SaveResult]:
        """Save several drafts in one transaction, deduplicating among them too."""
        ...

    def get(self, scope: Scope, lesson_id: str) -> Lesson:
        """Return one live lesson."""
        ...

    def update(
        self, scope: Scope, lesson_id: str, patch: LessonPatch, vector: Sequence[float] | None
    ) -> Lesson:
        """Apply the patch; ``vector`` replaces the embedding when the text changed."""
        ...

    def delete(self, scope: Scope, lesson_id: str) -> Lesson:
        """Delete a lesson and return it as it was."""
        ...

    def vote(self, scope: Scope, lesson_id: str, up: bool) -> Lesson:
        """Count one vote up or down."""
        ...

    def list(self, scope: Scope, tags: tuple[str, ...], limit: int, cursor: str | None) -> LessonPage:
        """Live lessons newest first, carrying all of ``tags``."""
        ...

    def recall(self, scope: Scope, query: RecallQuery) -> builtins.list[ScoredLesson]:
        """Live lessons best first by the hybrid score in ``stores.engine.ranking``:
        ``rank(scope, query, match_words(scope, query))``."""
        ...

    def match_words(self, scope: Scope, query: RecallQuery) -> WordMatches:
        """Recall's full-text candidates; needs no vector, so it can run while the query embeds."""
        ...

    def rank(self, scope: Scope, query: RecallQuery, words: WordMatches) -> builtins.list[ScoredLesson]:
        """Recall's nearest vectors joined with ``words``, every candidate scored, best first."""
        ...

    def count(self, org: str, project: str | None = None) -> int:
        """Live lessons of an org, in one project or all of them."""
        ...

    def neighbours(
        self, scope: Scope, vectors: Sequence[Sequence[float]]
    ) -> builtins.list[builtins.list[Neighbour]]:
        """For each vector, the live lessons of the scope with cosine similarity >=
        ``dedup.CANDIDATE_SIMILARITY``, most similar first, at most ``dedup.MAX_SIMILAR``."""
        ...

    def ensure_dim(self, dim: int) -> None:
        """Make the store ready for vectors of ``dim`` dimensions: the first vector a store
        gets fixes its dimension, and another is ``InvalidInputError``. Call it before a
        ``transaction`` that restores lessons (an import), which cannot create the vector
        storage itself on every backend."""
        ...

    @property
    def models(self) -> ModelRecords:
        """The model that made this store's vectors, and re-embedding with another
        (``stores.engine.embedding_model``)."""
        ...

    def close(self) -> None:
        """Release connections; idempotent."""
        ...
