"""Lesson operations as the MCP tools see them: validate, redact, embed, store.

The order matters: arguments are checked first (bad input changes nothing),
then every text field is redacted, and only the redacted text is embedded and
handed to the store. Store calls are blocking, so they run on worker threads.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from lore_mcp.auth import current_caller
from lore_mcp.embedding import Embedder
from lore_mcp.errors import InvalidArgument
from lore_mcp.model_identity import ModelMismatch, mismatch_message, running_model
from lore_mcp.models import (
    CompactLesson,
    CompactRecalledLesson,
    DeleteResult,
    LessonOut,
    ListResult,
    RecalledLesson,
    RecallResult,
    SaveLessonResult,
    SimilarLesson,
    UpdateLessonResult,
    VoteResult,
)
from lore_mcp.redaction import fit, lower_outside_markers, redact, redact_json, redact_many
from stores import Store
from stores.embedding_model import EmbeddingModel, ModelChangedError
from stores.lessons import (
    MAX_SHORT_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    LessonDraft,
    LessonPatch,
    RecallQuery,
    Scope,
    ScoredLesson,
)

T = TypeVar("T")

# Anchored with \A and \Z, and used with ``fullmatch``: "$" also matches before a
# final newline, so with "^...$" "alpha\n" would pass as a project of its own.
PROJECT_PATTERN = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
ULID_PATTERN = re.compile(r"\A[0-7][0-9A-HJKMNP-TV-Z]{25}\Z")
MAX_TTL_DAYS = 36_500
LOCAL_ORG = "local"


def embedding_text(problem: str, resolution: str) -> str:
    """What a lesson's vector is computed from."""
    return f"{problem}\n{resolution}"


class LessonService:
    """The lessons tools' logic, independent of the transport."""

    def __init__(self, store: Store, embedder: Embedder, *, default_project: str, org: str = LOCAL_ORG):
        self.store = store
        self.embedder = embedder
        self.default_project = check_project(default_project)
        self.org = org
        self._running: EmbeddingModel | None = None  # the embedder's model, once loaded

    def require_model(self) -> None:
        """Refuse (``ModelMismatch``) unless the store's vectors come from the embedder's model;
        a store that recorded no model adopts it (``stores.embedding_model``). Blocking: it
        waits for the model to load, and asks the store only until the store knows its model.
        Call it before embedding anything that is stored or compared with stored vectors."""
        if self._running is None:
            self._running = running_model(self.embedder)
        recorded = self.store.models.adopt(self._running)
        if not recorded.makes_same_vectors(self._running):
            self.store.models.forget()  # ask again next time: a reembed may have fixed it by then
            raise ModelMismatch(mismatch_message(recorded, self._running))

    async def _require_model(self) -> None:
        """``require_model`` without a thread or a query once the store's model is known to match."""
        known, running = self.store.models.known, self._running
        if known is None or running is None or not known.makes_same_vectors(running):
            await _run(self.require_model)

    async def _with_vectors(self, fn: Callable[..., T], *args: Any) -> T:
        """A store call that writes or compares vectors. If the store was re-embedded with
        another model meanwhile (another process ran ``lore-memory reembed``), the refusal
        names the fix rather than merely the change."""
        try:
            return await _run(fn, *args)
        except ModelChangedError:
            await _run(self.require_model)
            raise

    def scope(self, project: str | None) -> Scope:
        """Org and project of a call: the API key's over HTTP, the server's own over stdio."""
        requested = check_project(project) if project is not None else None
        caller = current_caller.get()
        if caller is None:
            return Scope(org=self.org, project=requested or self.default_project)
        return Scope(
            org=caller.org, project=caller.project_for(requested, self.default_project), actor=caller.actor
        )

    async def save(
        self,
        *,
        problem: str,
        resolution: str,
        context: str | None = None,
        tags: Sequence[str] = (),
        confidence: float = 0.5,
        source: str | None = None,
        project: str | None = None,
        ttl_days: float | None = None,
    ) -> SaveLessonResult:
        scope = self.scope(project)
        draft, kinds = self.make_draft(
            problem=problem,
            resolution=resolution,
            context=context,
            tags=tags,
            confidence=confidence,
            source=source,
            ttl_days=ttl_days,
        )
        await self._require_model()
        [vector] = await self.embedder.aencode_documents([embedding_text(draft.problem, draft.resolution)])
        result = await self._with_vectors(self.store.save, scope, draft, vector)
        return SaveLessonResult(
            id=result.id,
            merged=result.merged,
            redacted=list(kinds),
            similar=[SimilarLesson(id=i, score=score) for i, score in result.similar],
        )

    def make_draft(
        self,
        *,
        problem: str,
        resolution: str,
        context: str | None = None,
        tags: Sequence[str] = (),
        confidence: float = 0.5,
        source: str | None = None,
        ttl_days: float | None = None,
        meta: dict[str, Any] | None = None,
    ) -> tuple[LessonDraft, tuple[str, ...]]:
        """Validate and redact one lesson; shared by the tool and bulk loading."""
        problem = check_text("problem", problem, MAX_TEXT_CHARS, required=True)
        resolution = check_text("resolution", resolution, MAX_TEXT_CHARS, required=True)
        context = check_text("context", context, MAX_TEXT_CHARS)
        source = check_text("source", source, MAX_SHORT_CHARS)
        check_confidence(confidence)
        clean_tags, tag_kinds = normalise_tags(tags)
        expires_at = expiry(ttl_days)
        (problem, resolution, context, source), kinds = redact_fields(problem, resolution, context, source)
        clean_meta, meta_kinds = redact_json(check_meta(meta or {}))
        assert problem is not None and resolution is not None
        draft = LessonDraft(
            problem=problem,
            resolution=resolution,
            context=context or None,
            tags=clean_tags,
            confidence=float(confidence),
            source=source or None,
            expires_at=expires_at,
            meta=clean_meta,
        )
        return draft, tuple(sorted({*kinds, *tag_kinds, *meta_kinds}))

    async def recall(
        self,
        *,
        query: str,
        tags: Sequence[str] = (),
        project: str | None = None,
        limit: int = 5,
        min_confidence: float = 0.0,
        verbose: bool = False,
    ) -> RecallResult:
        scope = self.scope(project)
        text = check_text("query", query, MAX_TEXT_CHARS, required=True)
        assert text is not None
        check_confidence(min_confidence, name="min_confidence")
        clean_tags = check_tags(tags)
        # The query is redacted too: a secret pasted into a query must not reach the model or logs.
        (text,), _ = redact_many([text])
        assert text is not None
        await self._require_model()
        try:
            hits = await self._recall_while_embedding(
                scope, text, tags=clean_tags, min_confidence=min_confidence, limit=limit
            )
        except ModelChangedError:
            await _run(self.require_model)
            raise
        if verbose:
            return RecallResult(
                lessons=[RecalledLesson(**LessonOut.of(h.lesson).model_dump(), score=h.score) for h in hits]
            )
        return RecallResult(
            lessons=[
                CompactRecalledLesson(**CompactLesson.of(h.lesson).model_dump(), score=h.score) for h in hits
            ]
        )

    async def _recall_while_embedding(self, scope: Scope, text: str, **query: Any) -> list[ScoredLesson]:
        """The store's recall, started while the query is still being embedded.

        Stores search words before they ask for the vector (``RecallQuery``), so the
        full-text half of a recall costs no time of its own: on Postgres it runs in
        the database while the model runs here.
        """
        vector: Future[Any] = Future()

        async def embed() -> None:
            try:
                vector.set_result(await self.embedder.aencode_query(text))
            except Exception as exc:  # the store raises it where it waits for the vector
                vector.set_exception(exc)
            finally:
                if not vector.done():  # cancelled: the store thread must not wait for ever
                    vector.set_exception(anyio.get_cancelled_exc_class()())

        outcome: list[Any] = []

        async def search() -> None:
            try:
                outcome.append(
                    await _run(
                        self.store.recall, scope, RecallQuery(text=text, vector=vector.result, **query)
                    )
                )
            except Exception as exc:  # re-raised below, outside the task group's ExceptionGroup
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(embed)
            tg.start_soon(search)
        if isinstance(outcome[0], Exception):
            raise outcome[0]
        return outcome[0]

    async def get(self, lesson_id: str, project: str | None = None) -> LessonOut:
        return LessonOut.of(await _run(self.store.get, self.scope(project), check_id(lesson_id)))

    async def vote(self, lesson_id: str, *, up: bool, project: str | None = None) -> VoteResult:
        lesson = await _run(self.store.vote, self.scope(project), check_id(lesson_id), up)
        return VoteResult(id=lesson.id, upvotes=lesson.upvotes, downvotes=lesson.downvotes)

    async def delete(self, lesson_id: str, project: str | None = None) -> DeleteResult:
        lesson = await _run(self.store.delete, self.scope(project), check_id(lesson_id))
        return DeleteResult(id=lesson.id, deleted=True)

    async def list(
        self,
        *,
        project: str | None = None,
        tags: Sequence[str] = (),
        limit: int = 20,
        cursor: str | None = None,
        verbose: bool = False,
    ) -> ListResult:
        scope = self.scope(project)
        if cursor is not None and not ULID_PATTERN.fullmatch(cursor):
            raise InvalidArgument(
                "cursor is not one this server returned; pass next_cursor from a previous page."
            )
        page = await _run(self.store.list, scope, check_tags(tags), limit, cursor)
        shape = LessonOut if verbose else CompactLesson
        return ListResult(lessons=[shape.of(x) for x in page.lessons], next_cursor=page.next_cursor)

    async def update(
        self,
        lesson_id: str,
        *,
        project: str | None = None,
        problem: str | None = None,
        resolution: str | None = None,
        context: str | None = None,
        tags: Sequence[str] | None = None,
        confidence: float | None = None,
        source: str | None = None,
        ttl_days: float | None = None,
    ) -> UpdateLessonResult:
        scope = self.scope(project)
        lesson_id = check_id(lesson_id)
        if problem is not None:
            check_text("problem", problem, MAX_TEXT_CHARS, required=True)
        if resolution is not None:
            check_text("resolution", resolution, MAX_TEXT_CHARS, required=True)
        check_text("context", context, MAX_TEXT_CHARS)
        check_text("source", source, MAX_SHORT_CHARS)
        if confidence is not None:
            check_confidence(confidence)
        clean_tags, tag_kinds = normalise_tags(tags) if tags is not None else (None, ())
        expires_at = expiry(ttl_days)
        if all(v is None for v in (problem, resolution, context, tags, confidence, source, ttl_days)):
            raise InvalidArgument("Nothing to update: pass at least one field to change.")
        (problem, resolution, context, source), kinds = redact_fields(problem, resolution, context, source)
        # An empty string clears an optional field.
        clear = frozenset(name for name, value in (("context", context), ("source", source)) if value == "")
        patch = LessonPatch(
            problem=problem,
            resolution=resolution,
            context=context or None,
            tags=clean_tags,
            confidence=confidence,
            source=source or None,
            expires_at=expires_at,
            clear=clear,
        )
        vector = None
        if problem is not None or resolution is not None:
            current = await _run(self.store.get, scope, lesson_id)
            text = embedding_text(problem or current.problem, resolution or current.resolution)
            await self._require_model()
            [vector] = await self.embedder.aencode_documents([text])
        lesson = await self._with_vectors(self.store.update, scope, lesson_id, patch, vector)
        return UpdateLessonResult(**LessonOut.of(lesson).model_dump(), redacted=sorted({*kinds, *tag_kinds}))


def redact_fields(
    problem: str | None, resolution: str | None, context: str | None, source: str | None
) -> tuple[list[str | None], tuple[str, ...]]:
    """A lesson's text fields redacted, each kept within its limit (see ``redaction.fit``),
    so whatever is stored can be exported and imported again."""
    fields, kinds = redact_many([problem, resolution, context, source])
    limits = (MAX_TEXT_CHARS, MAX_TEXT_CHARS, MAX_TEXT_CHARS, MAX_SHORT_CHARS)
    return [None if f is None else fit(f, n) for f, n in zip(fields, limits, strict=True)], kinds


async def _run(fn: Callable[..., T], *args: Any) -> T:
    return await anyio.to_thread.run_sync(fn, *args)


def check_project(project: str) -> str:
    if not isinstance(project, str) or not PROJECT_PATTERN.fullmatch(project):
        raise InvalidArgument(
            f"project {str(project)[:80]!r} is not a valid name: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit."
        )
    return project


def check_id(lesson_id: str) -> str:
    if not isinstance(lesson_id, str) or not ULID_PATTERN.fullmatch(lesson_id):
        raise InvalidArgument(
            f"id {str(lesson_id)[:80]!r} is not a lesson id: ids are 26-character ULIDs as returned by save_lesson."
        )
    return lesson_id


def text_problem(value: str) -> str | None:
    """Why Lore cannot store this text, or None.

    U+0000 is refused because Postgres cannot store it while SQLite can (the
    backends would disagree); a lone surrogate is not valid Unicode at all.
    """
    if "\x00" in value:
        return "contains U+0000 (a NUL character), which Lore cannot store; remove it"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return "contains invalid Unicode (a lone surrogate); send valid UTF-8 text"
    return None


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


def check_tags(tags: Sequence[str]) -> tuple[str, ...]:
    """Tags as a filter: normalised exactly as stored tags are (see ``normalise_tags``)."""
    return normalise_tags(tags)[0]


def normalise_tags(tags: Sequence[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Tags trimmed, redacted, lower-cased and de-duplicated; and the kinds of secrets removed.

    Redaction comes before lower-casing, whose output no longer looks like the secret
    ("AKIA..." becomes "akia..."); the ``[REDACTED:kind]`` markers keep their case.
    A marker can be longer than its secret: a tag that outgrows the limit is cut
    (see ``redaction.fit``). Empty or over-long tags are refused.
    """
    if isinstance(tags, str):
        raise InvalidArgument("tags must be a list of strings, not one string.")
    if len(tags) > MAX_TAGS:
        raise InvalidArgument(f"At most {MAX_TAGS} tags are allowed; got {len(tags)}.")
    clean: dict[str, None] = {}
    kinds: set[str] = set()
    for tag in tags:
        text = check_text("tag", tag, MAX_TAG_CHARS, required=True)
        assert text is not None
        redacted = redact(text.strip())
        kinds.update(redacted.kinds)
        normal = fit(lower_outside_markers(redacted.text), MAX_TAG_CHARS)
        if normal:
            clean.setdefault(normal, None)
    return tuple(clean), tuple(sorted(kinds))


# Bounds on a lesson's ``meta`` (only import sets it): JSON of at most 16 KB, at
# most 8 levels deep, at most 256 keys or items in any one object or list.
MAX_META_BYTES = 16_384
MAX_META_DEPTH = 8
MAX_META_ITEMS = 256
# How deep JSON may nest in row values and plans: deep enough for real data,
# shallow enough that walking it never exhausts the interpreter's stack.
MAX_JSON_DEPTH = 64
MAX_JSON_INTEGER = 2**63


def check_json(
    name: str, value: Any, *, max_depth: int = MAX_JSON_DEPTH, max_items: int | None = None
) -> Any:
    """Refuse JSON that Lore cannot store the same way on both backends.

    Every string (object keys too) must be storable text (``text_problem``), numbers
    finite and integers within 64 bits, and nesting at most ``max_depth`` levels.
    The walk is iterative, so hostile nesting costs no stack.
    """
    stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, str):
            why = text_problem(item)
            if why is not None:
                raise InvalidArgument(f"{_json_path(name, path)} {why}.")
        elif isinstance(item, bool) or item is None:
            continue
        elif isinstance(item, int):
            if not -MAX_JSON_INTEGER <= item < MAX_JSON_INTEGER:
                raise InvalidArgument(
                    f"{_json_path(name, path)} is an integer beyond 64 bits; send a string."
                )
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise InvalidArgument(f"{_json_path(name, path)} is not a finite number.")
        elif isinstance(item, dict | list | tuple):
            if len(path) >= max_depth:
                raise InvalidArgument(f"{name} nests deeper than {max_depth} levels; flatten it.")
            if max_items is not None and len(item) > max_items:
                raise InvalidArgument(
                    f"{_json_path(name, path)} holds {len(item)} entries; the limit is {max_items}."
                )
            if isinstance(item, dict):
                for key, child in item.items():
                    why = text_problem(key) if isinstance(key, str) else "is not a string"
                    if why is not None:
                        raise InvalidArgument(f"{_json_path(name, path)} has a key that {why}.")
                    stack.append(((*path, key), child))
            else:
                stack.extend(((*path, i), child) for i, child in enumerate(item))
        else:
            raise InvalidArgument(f"{_json_path(name, path)} is not a JSON value.")
    return value


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
