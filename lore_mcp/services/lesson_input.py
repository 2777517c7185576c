"""Input checks before storing, and ``make_draft``; apart because several services share them.
Every refusal is an ``InvalidArgument`` that says what to send instead."""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, overload

from lore_mcp.errors import InvalidArgument
from lore_mcp.redaction import fit, lower_outside_markers, redact, redact_json, redact_many, secret_kinds
from stores import MAX_SHORT_CHARS, MAX_TAG_CHARS, MAX_TAGS, MAX_TEXT_CHARS, LessonDraft, LessonPatch

# \A...\Z with ``fullmatch``: "$" also matches before a final newline ("alpha\n" would pass).
PROJECT_PATTERN = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
ULID_PATTERN = re.compile(r"\A[0-7][0-9A-HJKMNP-TV-Z]{25}\Z")
MAX_TTL_DAYS = 36_500


# A lesson's text fields and their limits; problem and resolution are required.
TEXT_LIMITS = {"problem": MAX_TEXT_CHARS, "resolution": MAX_TEXT_CHARS, "context": MAX_TEXT_CHARS}
TEXT_LIMITS["source"] = MAX_SHORT_CHARS


def checked_texts(*, patch: bool = False, **texts: str | None) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Text fields checked (a patch may leave problem and resolution out), then redacted within
    their limits (``redaction.fit``), so a store re-imports; '' becomes None."""
    for name, limit in TEXT_LIMITS.items():
        required = name in ("problem", "resolution") and not (patch and texts[name] is None)
        check_text(name, texts[name], limit, required=required)
    redacted, kinds = redact_many(texts.values())
    return {n: fit(t, TEXT_LIMITS[n]) if t else None for n, t in zip(texts, redacted, strict=True)}, kinds


def check_project(project: str) -> str:
    if not isinstance(project, str) or not PROJECT_PATTERN.fullmatch(project):
        shown = fit(redact(str(project)[:500]).text, 80)  # a bad name can still hold a secret
        raise InvalidArgument(
            f"project {shown!r} is not a valid name: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit."
        )
    check_not_secret("project", project)
    return project


def check_not_secret(what: str, name: str) -> None:
    """Refuse, not redact, a secret in a name (redacted, it names another project); say its kind, not it."""
    kinds = secret_kinds(name)
    if kinds:
        raise InvalidArgument(
            f"the {what} name looks like a secret ({', '.join(kinds)}); Lore does not store secrets "
            f"as names, so choose a {what} name that is not a credential."
        )


def check_id(lesson_id: str) -> str:
    if not isinstance(lesson_id, str) or not ULID_PATTERN.fullmatch(lesson_id):
        raise InvalidArgument(
            f"id {str(lesson_id)[:80]!r} is not a lesson id: ids are 26-character ULIDs as returned by save_lesson."
        )
    return lesson_id


def check_cursor(cursor: str | None) -> None:
    """A cursor is a lesson id: anything else silently restarts the listing (NUL: fails in Postgres)."""
    if cursor is not None and not ULID_PATTERN.fullmatch(cursor):
        raise InvalidArgument(
            "cursor is not one this server returned; pass next_cursor from a previous page."
        )


def text_problem(value: str) -> str | None:
    """Why Lore cannot store this text, or None. U+0000: Postgres cannot store it (SQLite can,
    so the backends would disagree); a lone surrogate is not valid Unicode."""
    if "\x00" in value:
        return "contains U+0000 (a NUL character), which Lore cannot store; remove it"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains invalid Unicode (a lone surrogate); send valid UTF-8 text"
    return None


@overload
def check_text(name: str, value: str | None, max_chars: int, *, required: Literal[True]) -> str: ...
@overload
def check_text(name: str, value: str | None, max_chars: int, *, required: bool = False) -> str | None: ...
def check_text(name: str, value: str | None, max_chars: int, *, required: bool = False) -> str | None:
    """Reject empty required text, over-long text and text that Lore cannot store."""
    if value is None:
        if required:
            raise InvalidArgument(f"{name} is required.")
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be text.")
    if required and not value.strip():
        raise InvalidArgument(f"{name} must not be empty or only whitespace.")
    if len(value) > max_chars:
        raise InvalidArgument(f"{name} is {len(value)} characters; the limit is {max_chars}. Shorten it.")
    why = text_problem(value)
    if why is not None:
        raise InvalidArgument(f"{name} {why}.")
    return value


def check_confidence(value: float, *, name: str = "confidence") -> None:
    if not 0.0 <= value <= 1.0:
        raise InvalidArgument(f"{name} must be between 0 and 1, not {value}.")


# Categories that show nothing alone: separators (Z), format/control (C), marks (M).
INVISIBLE_CATEGORIES = frozenset("ZCM")


def check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """Tags as a filter: normalised exactly as stored tags are (see ``normalise_tags``)."""
    return normalise_tags(tags)[0]


def normalise_tags(tags: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Tags trimmed, redacted, lower-cased, de-duplicated; empty or over-long ones refused.

    Redaction first: "akia..." no longer looks like a secret. A marker longer than its secret
    is cut to the limit (``redaction.fit``)."""
    if isinstance(tags, str):
        raise InvalidArgument("tags must be a list of strings, not one string.")
    if len(tags) > MAX_TAGS:
        raise InvalidArgument(f"At most {MAX_TAGS} tags are allowed; got {len(tags)}.")
    clean: dict[str, None] = {}
    kinds: set[str] = set()
    for tag in tags:
        text = check_text("tag", tag, MAX_TAG_CHARS, required=True)
        if not any(unicodedata.category(ch)[0] not in INVISIBLE_CATEGORIES for ch in text):
            raise InvalidArgument(
                "A tag must have a visible character; this one has only spaces, invisible "
                "or combining characters."
            )
        redacted = redact(text.strip())
        kinds.update(redacted.kinds)
        normal = fit(lower_outside_markers(redacted.text), MAX_TAG_CHARS)
        if normal:
            clean.setdefault(normal, None)
    return tuple(clean), tuple(sorted(kinds))


# Bounds on ``meta`` (only import sets it): 16 KB of JSON, 8 levels, 256 keys or items per container.
MAX_META_BYTES = 16_384
MAX_META_DEPTH = 8
MAX_META_ITEMS = 256
MAX_JSON_DEPTH = 64  # JSON nesting for row values and plans: enough for real data, never exhausting the stack
MAX_JSON_INTEGER = 2**63


def check_json(
    name: str, value: Any, *, max_depth: int = MAX_JSON_DEPTH, max_items: int | None = None
) -> Any:
    """Refuse JSON the backends would store differently: strings and keys must pass
    ``text_problem``, numbers be finite, integers 64-bit, nesting within ``max_depth``. The walk
    is iterative, so hostile nesting costs no stack."""
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict | list | tuple):
            stack.extend(_children(name, path, item, max_depth, max_items))
            continue
        _check_leaf(name, path, item)
    return value


def _check_leaf(name: str, path: tuple[Any, ...], item: Any) -> None:
    """Refuse a JSON leaf that cannot be stored the same way on both backends."""
    if isinstance(item, str):
        why = text_problem(item)
        if why is not None:
            raise InvalidArgument(f"{_json_path(name, path)} {why}.")
    elif isinstance(item, bool) or item is None:
        return
    elif isinstance(item, int):
        if not -MAX_JSON_INTEGER <= item < MAX_JSON_INTEGER:
            raise InvalidArgument(f"{_json_path(name, path)} is an integer beyond 64 bits; send a string.")
    elif isinstance(item, float):
        if not math.isfinite(item):
            raise InvalidArgument(f"{_json_path(name, path)} is not a finite number.")
    else:
        raise InvalidArgument(f"{_json_path(name, path)} is not a JSON value.")


def _children(
    name: str, path: tuple[Any, ...], item: Any, max_depth: int, max_items: int | None
) -> list[tuple[tuple[Any, ...], Any]]:
    """A JSON object's or list's children, with their paths, once its size and keys pass."""
    if len(path) >= max_depth:
        raise InvalidArgument(f"{name} nests deeper than {max_depth} levels; flatten it.")
    if max_items is not None and len(item) > max_items:
        raise InvalidArgument(
            f"{_json_path(name, path)} holds {len(item)} entries; the limit is {max_items}."
        )
    if not isinstance(item, dict):
        return [((*path, i), child) for i, child in enumerate(item)]
    for key in item:
        why = text_problem(key) if isinstance(key, str) else "is not a string"
        if why is not None:
            raise InvalidArgument(f"{_json_path(name, path)} has a key that {why}.")
    return [((*path, key), child) for key, child in item.items()]


def _json_path(name: str, path: tuple[Any, ...]) -> str:
    """Where in a JSON value: ``meta["a"][0]``; keys are redacted and shortened, never echoed whole."""
    parts = [name]
    for step in path:
        if isinstance(step, int):
            parts.append(f"[{step}]")
        else:
            key = redact(str(step).encode("utf-8", "replace").decode("utf-8").replace("\x00", "")).text
            parts.append(f"[{key[:40]!r}]")
    return "".join(parts)


def check_meta(meta: Any) -> dict[str, Any]:
    """A lesson's ``meta``: a JSON object within the bounds above."""
    if not isinstance(meta, dict):
        raise InvalidArgument("meta must be a JSON object.")
    check_json("meta", meta, max_depth=MAX_META_DEPTH, max_items=MAX_META_ITEMS)
    size = len(json.dumps(meta, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))
    if size > MAX_META_BYTES:
        raise InvalidArgument(
            f"meta is {size} bytes of JSON; the limit is {MAX_META_BYTES}. Keep less in it."
        )
    return meta


def expiry(ttl_days: float | None) -> datetime | None:
    if ttl_days is None:
        return None
    if not 0 < ttl_days <= MAX_TTL_DAYS:
        raise InvalidArgument(f"ttl_days must be more than 0 and at most {MAX_TTL_DAYS}, not {ttl_days}.")
    return datetime.now(UTC) + timedelta(days=ttl_days)


def make_draft(
    *,
    problem: str,
    resolution: str,
    context: str | None = None,
    tags: Sequence[str] = (),
    confidence: float = 0.5,
    source: str | None = None,
    ttl_days: float | None = None,
    expires_at: datetime | None = None,
    meta: dict[str, Any] | None = None,
) -> tuple[LessonDraft, tuple[str, ...]]:
    """A new lesson checked then redacted: the one check of every save, import and bulk load."""
    texts, kinds = checked_texts(problem=problem, resolution=resolution, context=context, source=source)
    check_confidence(confidence)
    clean_tags, tag_kinds = normalise_tags(tags)
    if ttl_days is not None:
        expires_at = expiry(ttl_days)
    clean_meta, meta_kinds = redact_json(check_meta(meta or {}))
    draft = LessonDraft(
        **texts, tags=clean_tags, confidence=float(confidence), expires_at=expires_at, meta=clean_meta
    )
    return draft, tuple(sorted({*kinds, *tag_kinds, *meta_kinds}))


def make_patch(
    *,
    problem: str | None = None,
    resolution: str | None = None,
    context: str | None = None,
    tags: Sequence[str] | None = None,
    confidence: float | None = None,
    source: str | None = None,
    ttl_days: float | None = None,
) -> tuple[LessonPatch, list[str]]:
    """``update_lesson``'s patch checked first (bad input changes nothing), then redacted."""
    given = {"problem": problem, "resolution": resolution, "context": context, "source": source}
    texts, kinds = checked_texts(patch=True, **given)
    if confidence is not None:
        check_confidence(confidence)
    clean_tags, tag_kinds = normalise_tags(tags) if tags is not None else (None, ())
    expires_at = expiry(ttl_days)
    if all(v is None for v in (*given.values(), tags, confidence, ttl_days)):
        raise InvalidArgument("Nothing to update: pass at least one field to change.")
    patch = LessonPatch(
        **texts,
        tags=clean_tags,
        confidence=confidence,
        expires_at=expires_at,
        clear=frozenset(name for name in ("context", "source") if given[name] == ""),  # '' clears it
    )
    return patch, sorted({*kinds, *tag_kinds})
