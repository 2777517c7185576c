"""What tools return: pydantic models, so clients get structured content and an output schema."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from stores.engine.lessons import Lesson


class LessonOut(BaseModel):
    """A lesson as clients see it."""

    id: str
    problem: str
    resolution: str
    context: str | None
    tags: list[str]
    confidence: float
    source: str | None
    project: str
    upvotes: int
    downvotes: int
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    meta: dict[str, Any] = Field(default_factory=dict)

    @classmethod
    def of(cls, lesson: Lesson) -> LessonOut:
        """The lesson's fields by name: tags and meta as JSON's list and object."""
        return cls.model_validate(lesson, from_attributes=True)


class RecalledLesson(LessonOut):
    """A lesson with its recall score (higher is better; see README, "How recall ranks")."""

    score: float


class CompactLesson(BaseModel):
    """What an agent needs of a lesson to use it; ``verbose`` adds the bookkeeping fields."""

    id: str
    problem: str
    resolution: str
    context: str | None
    tags: list[str]
    confidence: float
    project: str
    upvotes: int
    downvotes: int

    @classmethod
    def of(cls, lesson: Lesson) -> CompactLesson:
        return cls(**LessonOut.of(lesson).model_dump(include=set(cls.model_fields)))


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
    # Compact first: clients validate results against the output schema's anyOf in this
    # order, and stop at the first branch that fits.
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
