"""What tools return: pydantic models, so clients get structured content and an output schema."""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, Self, get_args, get_type_hints

from pydantic import BaseModel, Field, create_model

from stores import LESSON_KINDS, Lesson


class Stored(BaseModel):
    """A model of what the store returns (a lesson, a key, a stale lesson), read by field name."""

    @classmethod
    def of(cls, stored: object) -> Self:
        """The stored object's fields by name (a lesson's tags and meta as JSON's list and object)."""
        return cls.model_validate(stored, from_attributes=True)


def lesson_fields(*, leave_out: Collection[str] = ()) -> type[Stored]:
    """A stored lesson's fields (``stores.engine.lessons.KINDS``, in their order) as pydantic
    fields, every one required but ``meta``: tags as JSON's list and meta as its object."""
    hints = get_type_hints(Lesson)
    made: dict[str, Any] = {}
    for name, kind in LESSON_KINDS.items():
        if kind == "list":
            made[name] = (list[get_args(hints[name])[0]], ...)  # type: ignore[misc]
        elif kind == "json":
            made[name] = (dict[str, Any], Field(default_factory=dict))
        else:
            made[name] = (hints[name], ...)
    return create_model(
        "LessonFields", __base__=Stored, **{k: v for k, v in made.items() if k not in leave_out}
    )


if TYPE_CHECKING:  # mypy sees a model of any fields; they are the stores' (``lesson_fields``)

    class _AllFields(Stored):
        def __getattr__(self, name: str) -> Any: ...

    _CompactFields = _AllFields
else:
    _AllFields = lesson_fields()
    _CompactFields = lesson_fields(leave_out=("source", "created_at", "updated_at", "expires_at", "meta"))


class LessonOut(_AllFields):
    """A lesson as clients see it."""


class RecalledLesson(LessonOut):
    """A lesson with its recall score (higher is better; see README, "How recall ranks")."""

    score: float


class CompactLesson(_CompactFields):
    """What an agent needs of a lesson to use it; ``verbose`` adds the bookkeeping fields."""


class CompactRecalledLesson(CompactLesson):
    score: float


class SimilarLesson(BaseModel):
    id: str
    score: float = Field(description="Cosine similarity to the saved lesson, 0..1.")


class SaveLessonResult(BaseModel):
    id: str = Field(description="The lesson's id (a ULID).")
    merged: bool = Field(
        description="True when the lesson added nothing to an existing one and merged into it."
    )
    redacted: list[str] = Field(description="Kinds of secrets removed before storing, e.g. `openai_key`.")
    similar: list[SimilarLesson] = Field(
        default_factory=list,
        description="Near neighbours kept as separate lessons (at most 3): update or delete one if it "
        "says the same thing.",
    )


class RecallResult(BaseModel):
    # Compact first: clients try the output schema's anyOf in order and stop at the first fit.
    lessons: list[CompactRecalledLesson | RecalledLesson] = Field(
        description="Best first; full records when verbose."
    )


class VoteResult(BaseModel):
    id: str
    upvotes: int
    downvotes: int


class UpdateLessonResult(LessonOut):
    redacted: list[str] = Field(description="Kinds of secrets removed from the new text.")


class DeleteResult(BaseModel):
    id: str
    deleted: bool


class ListResult(BaseModel):
    lessons: list[CompactLesson | LessonOut] = Field(description="Newest first; full records when verbose.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")
