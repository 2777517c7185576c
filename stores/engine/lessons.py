"""The lessons contract's value types (``stores.engine.lesson_rules.SqlStore`` holds its rules).

Stores never embed or redact: callers hand them redacted text and its vector, so a store is
deterministic without the model. A key is (org, project, id), so nothing a scope does depends on, or
shows, what other scopes hold. A method that raises (``NotFoundError``, ``InvalidInputError``,
``UnavailableError``) has changed nothing."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import KW_ONLY, MISSING, dataclass, field, fields, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, Union

from stores.engine.json_numbers import has_negative_zero, plain_float, without_negative_zero
from stores.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy as np

SCOPE = "org_id = :org AND project = :project"  # SQL confining rows to what a ``Scope``'s ``params`` bind
# Limits shared by every backend and by the MCP layer, so both reject the same input.
MAX_TEXT_CHARS = 16_000
MAX_SHORT_CHARS = 500
MAX_TAGS = 32
MAX_TAG_CHARS = 64
MAX_RECALL_LIMIT = 50
MAX_LIST_LIMIT = 100
MAX_OTHER_SOURCES = 20  # how many differing sources a merged lesson remembers in meta.other_sources


@dataclass(frozen=True)
class Scope:
    """Who owns the rows: every query is confined to one org and one project."""

    org: str
    project: str
    # Who is acting, for the commit log; not part of the scope's identity.
    actor: str = field(default="local", compare=False)

    @property
    def params(self) -> dict[str, str]:
        """The ``:org`` and ``:project`` of a statement confined to this scope."""
        return {"org": self.org, "project": self.project}


@dataclass(frozen=True)
class LessonDraft:
    """A lesson's fields, declared once: columns, commit images and MCP shapes derive from them. A
    save gets a new id, now, no votes; an import carries its exported id, times and votes."""

    id: str | None = field(default=None, kw_only=True)
    problem: str
    resolution: str
    _: KW_ONLY
    context: str | None = None
    tags: tuple[str, ...] = ()
    confidence: float = 0.5
    source: str | None = None
    project: str | None = None  # a stored lesson's; a draft goes to the scope it is saved in
    upvotes: int = 0
    downvotes: int = 0
    created_at: datetime | None = None
    updated_at: datetime | None = None  # defaults to created_at
    expires_at: datetime | None = None
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _plain_numbers(self)


@dataclass(frozen=True, kw_only=True)
class Lesson(LessonDraft):
    """A stored lesson as every backend returns it (``field()``: no draft's default)."""

    id: str = field()
    project: str = field()
    created_at: datetime = field()
    updated_at: datetime = field()


@dataclass(frozen=True)
class LessonPatch:
    """Fields to change; ``None`` leaves one as it is, so ``clear`` names those to null."""

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


def _plain_numbers(value: LessonDraft | LessonPatch) -> None:
    """``-0.0`` made ``0.0`` in confidence and meta, both ways: Postgres keeps the sign in ``double
    precision`` and drops it in ``jsonb``, SQLite the reverse (``json_numbers``)."""
    if value.confidence is not None:
        object.__setattr__(value, "confidence", plain_float(value.confidence))
    meta = getattr(value, "meta", None)
    if meta is not None and has_negative_zero(meta):
        object.__setattr__(value, "meta", without_negative_zero(meta))


def _kind(declared: Any) -> str:
    """How a field is stored and imaged, from its declared type (a string: annotations are lazy)."""
    declared = str(declared)
    for prefix, kind in (("tuple", "list"), ("Mapping", "json"), ("float", "float"), ("int", "int")):
        if declared.startswith(prefix):
            return kind
    return "time" if "datetime" in declared else "text"


# Each stored column and its kind, in order: rows, commit images and MCP shapes derive from it.
KINDS: dict[str, str] = {f.name: _kind(f.type) for f in fields(Lesson)}
DEFAULTS: dict[str, Any] = {
    f.name: f.default_factory() if callable(f.default_factory) else f.default
    for f in fields(Lesson)
    if f.default is not MISSING or f.default_factory is not MISSING
}


@dataclass(frozen=True)
class SaveResult:
    """A draft's id, whether it merged, its unmerged near neighbours (id, similarity; most similar
    first), and ``skipped``: an import's draft whose id was held."""

    id: str
    merged: bool
    similar: tuple[tuple[str, float], ...] = ()
    skipped: bool = False


@dataclass(frozen=True)
class Neighbour:
    """A stored lesson near a new one: what ``stores.engine.dedup.merge_target`` decides on."""

    id: str
    similarity: float
    text: tuple[str, str, str | None]  # problem, resolution, context


Vector = Union[Sequence[float], "np.ndarray"]


@dataclass(frozen=True)
class RecallQuery:
    """Text and a vector or its callable, called after words match so embedding overlaps search."""

    text: str
    vector: Vector | Callable[[], Vector] | None = None
    tags: tuple[str, ...] = ()
    min_confidence: float = 0.0
    limit: int = 5
    now: datetime | None = None

    def with_vector(self, vector: Vector) -> RecallQuery:
        return replace(self, vector=vector)

    def needs_vector(self) -> Vector:
        """The vector recall compares with (waiting for it); a query without one is a caller's bug."""
        if self.vector is None:
            raise InvalidInputError("Recall needs the query's vector.")
        return self.vector() if callable(self.vector) else self.vector


@dataclass(frozen=True)
class WordMatches:
    """A recall's full-text half: the terms and the row keys they found, best first, at ``now``."""

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
