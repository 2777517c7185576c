"""Argument types shared by Lore's tools; their bounds are published, so clients see them first."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

from stores import MAX_SHORT_CHARS, MAX_TEXT_CHARS

Text = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]
Short = Annotated[str, Field(max_length=MAX_SHORT_CHARS)]
Tags = Annotated[
    list[Annotated[str, Field(max_length=64)]],
    Field(max_length=32, description="Short labels, e.g. ['stripe', 'webhooks']."),
]
Project = Annotated[
    str | None, Field(description="Project to use; defaults to the server's LORE_PROJECT.", max_length=64)
]
LessonId = Annotated[
    str, Field(description="A lesson id as returned by save_lesson or recall_lessons.", max_length=64)
]
Confidence = Annotated[float, Field(ge=0.0, le=1.0)]
Days = Annotated[float, Field(gt=0, le=36_500)]  # a lesson's time to live
Cursor = Annotated[str | None, Field(max_length=64, description="next_cursor of the previous page.")]


class OrderBy(BaseModel):
    column: Annotated[str, Field(max_length=64)]
    direction: Literal["asc", "desc"] = "asc"
