"""Moving memory in and out: export to JSON Lines, import idempotently by id.

An export file has one JSON object per line: ``{"type": "lesson", ...}`` for each
live lesson (every field a client sees, no vector: vectors belong to the model
that made them) and, with history, ``{"type": "commit", ...}`` for each commit.
Import reads lessons back under their own ids, so importing a file twice adds
nothing; it redacts and re-embeds them, and records one ``import`` commit per
batch, so an import can be reverted like any other change. Commit lines are
history of the other store and are counted, not replayed.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import anyio.to_thread
import numpy as np
from pydantic import BaseModel, Field, ValidationError, field_validator

from lore_mcp.auth import Caller
from lore_mcp.errors import InvalidArgument, validation_message
from lore_mcp.redaction import redact_json, secret_kinds
from lore_mcp.services.lessons import (
    PROJECT_PATTERN,
    ULID_PATTERN,
    LessonService,
    check_meta,
    embedding_text,
    normalise_tags,
    redact_fields,
    text_problem,
)
from lore_mcp.services.models import LessonOut
from lore_mcp.services.structured import commit_summary, public_effects
from stores import Store
from stores.engine import structured
from stores.engine.lesson_images import lesson_image
from stores.engine.lessons import MAX_SHORT_CHARS, MAX_TAG_CHARS, MAX_TAGS, MAX_TEXT_CHARS, Scope
from stores.engine.lessons import Lesson as StoredLesson

MAX_IMPORT_BATCH = 100  # lessons per import_lessons call
MAX_VOTES = 2**31 - 1  # Postgres `integer`; both backends take the same range
EXPORT_PAGE = 100
FILE_BATCH = 256  # lessons embedded and written together by the CLI


class LessonIn(BaseModel):
    """A lesson as an export file (or ``import_lessons``) carries it."""

    model_config = {"extra": "ignore"}

    id: str = Field(
        max_length=26, description="The lesson's id (a ULID); importing an id twice adds nothing."
    )
    problem: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    resolution: str = Field(min_length=1, max_length=MAX_TEXT_CHARS)
    context: str | None = Field(None, max_length=MAX_TEXT_CHARS)
    tags: list[str] = Field(default_factory=list, max_length=MAX_TAGS)
    confidence: float = Field(0.5, ge=0.0, le=1.0)
    source: str | None = Field(None, max_length=MAX_SHORT_CHARS)
    project: str | None = Field(None, max_length=64)
    upvotes: int = Field(0, ge=0, le=MAX_VOTES)
    downvotes: int = Field(0, ge=0, le=MAX_VOTES)
    created_at: datetime | None = None
    updated_at: datetime | None = None
    expires_at: datetime | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @field_validator("id")
    @classmethod
    def _ulid(cls, value: str) -> str:
        if not ULID_PATTERN.fullmatch(value):
            raise ValueError("must be a ULID as Lore exports it")
        return value

    @field_validator("project")
    @classmethod
    def _project(cls, value: str | None) -> str | None:
        if value is not None and not PROJECT_PATTERN.fullmatch(value):
            raise ValueError("must be 1-64 letters, digits, '.', '_' or '-'")
        if value is not None and secret_kinds(value):
            raise ValueError("looks like a secret; Lore does not store secrets as project names")
        return value

    @field_validator("problem", "resolution", "context", "source")
    @classmethod
    def _storable(cls, value: str | None) -> str | None:
        why = text_problem(value) if value is not None else None
        if why is not None:
            raise ValueError(why)
        return value

    @field_validator("tags")
    @classmethod
    def _tags(cls, value: list[str]) -> list[str]:
        if any(not t.strip() or len(t) > MAX_TAG_CHARS for t in value):
            raise ValueError(f"each tag must be 1-{MAX_TAG_CHARS} characters")
        for tag in value:
            why = text_problem(tag)
            if why is not None:
                raise ValueError(f"a tag {why}")
        return [t.strip() for t in value]

    @field_validator("created_at", "updated_at", "expires_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        """Times are stored in UTC; one whose UTC is outside years 1-9999 cannot be."""
        if value is None:
            return None
        if value.tzinfo is None:
            return value.replace(tzinfo=UTC)
        try:
            return value.astimezone(UTC)
        except OverflowError:
            raise ValueError("is outside years 1-9999 once converted to UTC") from None

    @field_validator("meta")
    @classmethod
    def _meta(cls, value: dict[str, Any]) -> dict[str, Any]:
        try:
            return check_meta(value)
        except InvalidArgument as exc:
            raise ValueError(exc.message) from None


class ImportResult(BaseModel):
    added: int = Field(description="Lessons stored by this import.")
    skipped: int = Field(description="Lessons whose id was already stored (importing twice adds nothing).")
    merged: int = Field(
        default=0, description="Lessons that added nothing to a stored one and merged into it."
    )
    redacted: list[str] = Field(description="Kinds of secrets removed from imported text.")


class ExportPage(BaseModel):
    lessons: list[LessonOut] = Field(description="Newest first.")
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


@dataclass
class FileReport:
    """What ``import_file`` did, line by line."""

    added: int = 0
    skipped: int = 0
    merged: int = 0
    commits: int = 0
    redacted: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)  # "line N: why"


def lesson_line(lesson: StoredLesson) -> dict[str, Any]:
    return {"type": "lesson", **LessonOut.of(lesson).model_dump(mode="json")}


def commit_line(project: str, commit: structured.Commit) -> dict[str, Any]:
    """A commit as the history tools show it, with its effects (vectors left out)."""
    return {
        "type": "commit",
        "project": project,
        **commit_summary(commit),
        "effects": public_effects(commit.effects),
    }


class Transfer:
    """Export and import on one store, for the CLI and the MCP tools alike."""

    def __init__(self, lessons: LessonService) -> None:
        self.lessons = lessons
        self.store: Store = lessons.store

    # -- export --------------------------------------------------------------------

    def projects(self, org: str) -> list[str]:
        with self.store.transaction(Scope(org=org, project=self.lessons.default_project), write=False) as tx:
            return tx.org_projects()

    def lessons_of(self, scope: Scope) -> Iterator[StoredLesson]:
        """Every live lesson of the project, oldest first."""
        page: list[StoredLesson] = []
        cursor: str | None = None
        while True:
            listed = self.store.list(scope, (), 100, cursor)
            page.extend(listed.lessons)
            cursor = listed.next_cursor
            if cursor is None:
                break
        yield from reversed(page)

    def commits_of(self, scope: Scope) -> list[structured.Commit]:
        """Every commit of the project, oldest first."""
        found: list[structured.Commit] = []
        before: int | None = None
        while True:
            with self.store.transaction(scope, write=False) as tx:
                chunk = tx.commits(None, 500, before)
            found.extend(chunk)
            if len(chunk) < 500:
                break
            before = chunk[-1].seq
        return list(reversed(found))

    def export_lines(self, org: str, project: str | None, *, with_history: bool) -> Iterator[dict[str, Any]]:
        projects = [project] if project is not None else self.projects(org)
        for name in projects:
            scope = Scope(org=org, project=name)
            for lesson in self.lessons_of(scope):
                yield lesson_line(lesson)
            if with_history:
                for commit in self.commits_of(scope):
                    yield commit_line(name, commit)

    async def export_page(
        self, project: str | None, cursor: str | None, limit: int, *, caller: Caller | None = None
    ) -> ExportPage:
        """One page of a project's live lessons, newest first (the ``export_lessons`` tool).

        The cursor is checked as ``list_lessons`` checks it: the store compares it with ids,
        so a string no server gave would silently restart the listing (or, holding NUL,
        reach Postgres and fail there).
        """
        if cursor is not None and not ULID_PATTERN.fullmatch(cursor):
            raise InvalidArgument(
                "cursor is not one this server returned; pass next_cursor from a previous page."
            )
        scope = self.lessons.scope(project, caller)
        listed = await anyio.to_thread.run_sync(self.store.list, scope, (), limit, cursor)
        return ExportPage(
            lessons=[LessonOut.of(lesson) for lesson in listed.lessons], next_cursor=listed.next_cursor
        )

    # -- import --------------------------------------------------------------------

    def prepare(self, items: Sequence[LessonIn]) -> tuple[list[dict[str, Any]], set[str]]:
        """Redact and embed: lesson images (with vectors) ready for the store."""
        found: set[str] = set()
        lessons: list[StoredLesson] = []
        now = datetime.now(UTC)
        for item in items:
            fields, kinds = redact_fields(item.problem, item.resolution, item.context, item.source)
            tags, tag_kinds = normalise_tags(item.tags)  # redacted before lower-casing
            meta, meta_kinds = redact_json(item.meta)
            found.update(kinds, tag_kinds, meta_kinds)
            problem, resolution, context, source = fields
            assert problem is not None and resolution is not None
            created = item.created_at or now
            lessons.append(
                StoredLesson(
                    id=item.id,
                    project="",  # write() puts each lesson in the project it imports into
                    problem=problem,
                    resolution=resolution,
                    context=context or None,
                    tags=tags,
                    confidence=item.confidence,
                    source=source or None,
                    created_at=created,
                    updated_at=item.updated_at or created,
                    expires_at=item.expires_at,
                    upvotes=item.upvotes,
                    downvotes=item.downvotes,
                    meta=meta,
                )
            )
        texts = [embedding_text(lesson.problem, lesson.resolution) for lesson in lessons]
        if texts:
            self.lessons.require_model()  # vectors of another model than the store's are refused
        vectors = self.lessons.embedder.encode_documents(texts) if texts else []
        images = [
            lesson_image(lesson, np.asarray(vec, dtype=np.float32).tobytes())
            for lesson, vec in zip(lessons, vectors, strict=True)
        ]
        return images, found

    def write(self, scope: Scope, images: Sequence[dict[str, Any]]) -> tuple[int, int, int]:
        """Store the images whose ids are new to this project, in one transaction with one commit;
        (added, skipped, merged).

        A lesson's key is (org, project, id), so only this project's own lessons make an id
        "already there": what other projects or orgs hold neither blocks an import nor shows.
        A lesson with a new id that adds nothing to a stored one (or to one earlier in the
        batch) merges into it by the same rule as ``save_lesson`` (``stores.engine.dedup``)."""
        return self.store.import_lessons(scope, images)

    async def import_batch(
        self, items: Sequence[LessonIn], project: str | None, *, caller: Caller | None = None
    ) -> ImportResult:
        """The ``import_lessons`` tool: one bounded batch into one project, all or nothing."""
        if len(items) > MAX_IMPORT_BATCH:
            raise InvalidArgument(f"import_lessons takes at most {MAX_IMPORT_BATCH} lessons a call.")
        scope = self.lessons.scope(project, caller)
        images, found = await anyio.to_thread.run_sync(self.prepare, items)
        added, skipped, merged = await anyio.to_thread.run_sync(self.write, scope, images)
        return ImportResult(added=added, skipped=skipped, merged=merged, redacted=sorted(found))

    def import_file(
        self,
        lines: Iterable[str],
        *,
        org: str,
        project: str | None,
        strict: bool,
        started: Callable[[int], None] = lambda total: None,
        progress: Callable[[int], None] = lambda n: None,
        actor: str = "cli:import",
    ) -> FileReport:
        """Import an export file. Every line is checked first: with ``strict`` any bad line
        stops the import before anything is written, and the whole file then lands in one
        transaction per project; otherwise bad lines are reported and skipped, and lessons
        are written a batch at a time (a re-run skips what landed, by id)."""
        report = FileReport()
        by_project = self._group_lines(lines, project, report)
        if strict and report.errors:
            return report
        started(sum(len(items) for items in by_project.values()))
        for name, items in by_project.items():
            scope = Scope(org=org, project=name, actor=actor)
            prepared: list[dict[str, Any]] = []
            for start in range(0, len(items), FILE_BATCH):
                images, found = self.prepare(items[start : start + FILE_BATCH])
                report.redacted |= found
                if strict:
                    prepared.extend(images)
                else:
                    added, skipped, merged = self.write(scope, images)
                    report.added += added
                    report.skipped += skipped
                    report.merged += merged
                progress(len(images))
            if strict:
                added, skipped, merged = self.write(scope, prepared)
                report.added += added
                report.skipped += skipped
                report.merged += merged
        return report

    def _group_lines(
        self, lines: Iterable[str], project: str | None, report: FileReport
    ) -> dict[str, list[LessonIn]]:
        """Every line parsed before anything is written, the lessons grouped by the project
        they land in; bad lines and commit lines are counted on ``report``."""
        by_project: dict[str, list[LessonIn]] = {}
        for number, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            parsed = _parse_line(number, line)
            if isinstance(parsed, str):
                report.errors.append(parsed)
                continue
            if parsed is None:
                report.commits += 1
                continue
            target = project or parsed.project or self.lessons.default_project
            by_project.setdefault(target, []).append(parsed)
        return by_project


def _parse_line(number: int, line: str) -> LessonIn | str | None:
    """A lesson, None for a commit line, or an error sentence naming the line."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"line {number}: not JSON ({exc.msg})"
    if not isinstance(data, dict):
        return f"line {number}: expected a JSON object"
    kind = data.get("type", "lesson")
    if kind == "commit":
        return None
    if kind != "lesson":
        return f"line {number}: unknown type {kind!r} (expected 'lesson' or 'commit')"
    try:
        return LessonIn.model_validate(data)
    except ValidationError as exc:
        return f"line {number}: {validation_message(exc)}"
