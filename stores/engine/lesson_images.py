"""A lesson as a commit records it (its "image") and back, and how a merge combines two."""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any

from stores.engine.lessons import DEFAULTS, KINDS, MAX_OTHER_SOURCES, Lesson, LessonDraft
from stores.errors import ConflictError


def lesson_image(
    lesson: Lesson, embedding: bytes | None = None, generation: int | None = None
) -> dict[str, Any]:
    """A lesson as JSON for a commit, with its vector when a revert may recreate it, tagged with its
    model ``generation`` (None: the current model's) so a revert can tell an old model's vector."""
    image = by_kind(vars(lesson), _TO_IMAGE)
    if embedding is not None:
        image["embedding"] = {"vector": base64.b64encode(embedding).decode("ascii"), "generation": generation}
    return image


def image_lesson(image: Mapping[str, Any]) -> Lesson:
    """The lesson an image describes (vector aside); fields an older image lacks take defaults."""
    return Lesson(**by_kind({**DEFAULTS, **image}, _FROM_IMAGE))


def by_kind(values: Mapping[str, Any], casts: Mapping[str, Callable[[Any], Any]]) -> dict[str, Any]:
    """A lesson's columns (``KINDS``) from ``values``, each through the cast for its kind, if any."""
    return {
        name: casts[kind](values[name]) if kind in casts else values[name] for name, kind in KINDS.items()
    }


_TO_IMAGE: dict[str, Callable[[Any], Any]] = {
    "time": lambda v: v.isoformat() if v else None,
    "list": list,
    "json": dict,
}
_FROM_IMAGE: dict[str, Callable[[Any], Any]] = {
    "time": lambda v: datetime.fromisoformat(v) if v else None,
    "list": lambda v: tuple(v or ()),
    "json": lambda v: dict(v or {}),
    "float": float,
    "int": int,
}


def image_embedding(image: Mapping[str, Any]) -> bytes | None:
    """The float32 vector bytes a lesson image carries, if any."""
    raw = image.get("embedding")
    if isinstance(raw, Mapping):
        raw = raw.get("vector")
    return base64.b64decode(raw) if raw else None


def image_vector_usable(image: Mapping[str, Any], generation: int) -> bool:
    """Whether an image's vector is of ``generation`` (a plain string is generation 0; none, always)."""
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
    """The vector a revert writes (None: same text, keep it); an older model's is refused."""
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
    """Fields after a draft adding nothing merges, losing nothing: tags united, higher confidence
    and longer life win, blanks filled, another source kept in ``meta.other_sources``."""
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
