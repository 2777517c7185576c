"""Export memory to JSON Lines; import it idempotently by id.

Lines: a ``lesson`` per live lesson, a ``commit`` per commit (with history), and with vectors a
first ``model`` line, each lesson then carrying its ``vector`` (base64 little-endian float32). A
store of that model keeps those vectors (a large store loads in minutes, not hours) unless
redaction changed the problem or resolution they were made from. Ids are kept, so a second import
adds nothing; lessons are checked, redacted and saved as ``save_lesson`` does (``make_draft``,
``store_drafts``: same near-duplicate rule), one revertible ``import`` commit per batch. Commit
lines are counted, not replayed."""

from __future__ import annotations

import base64
import binascii
import dataclasses
import functools
import json
import pickle
import tempfile
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any

import anyio.lowlevel
import anyio.to_thread
import numpy as np
from pydantic import BaseModel, Field, ValidationError, field_validator
from threadpoolctl import threadpool_limits

from lore_mcp.errors import InvalidArgument, validation_message
from lore_mcp.services import every_core
from lore_mcp.services.activity import in_utc
from lore_mcp.services.lesson_input import ULID_PATTERN, check_cursor, check_project, make_draft
from lore_mcp.services.lessons import OnLessons
from lore_mcp.services.models import LessonOut
from lore_mcp.services.progress import Progress, no_progress
from lore_mcp.services.recording import NO_KEY, Who, failures_recorded
from lore_mcp.services.structured import commit_summary, public_effects
from stores import (
    MAX_SHORT_CHARS,
    MAX_TAGS,
    MAX_TEXT_CHARS,
    EmbeddingModel,
    LessonDraft,
    SaveResult,
    Scope,
    structured,
)
from stores import Lesson as StoredLesson

MAX_IMPORT_BATCH = 100  # lessons per import_lessons call
MAX_VOTES = 2**31 - 1  # Postgres `integer`; both backends take the same range
EXPORT_PAGE = 100  # lessons read at a time by the CLI export
FILE_BATCH = 256  # lessons embedded and written together by the CLI
IMPORT_EMBED_BATCH = 25  # lessons of one import_lessons call embedded between progress reports
# What a lesson line gives the check of every new lesson (``make_draft``), and what an import keeps.
DRAFT_FIELDS = {"problem", "resolution", "context", "tags", "confidence", "source", "expires_at", "meta"}
KEPT_FIELDS = {"id", "created_at", "updated_at", "upvotes", "downvotes"}


# Shape only (the docstring is the schema's description); content is checked in ``imported_draft``.
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

    @field_validator("created_at", "updated_at", "expires_at")
    @classmethod
    def _utc(cls, value: datetime | None) -> datetime | None:
        """Times are stored in UTC; one whose UTC is outside years 1-9999 cannot be."""
        try:
            return in_utc(value)
        except OverflowError:
            raise ValueError("is outside years 1-9999 once converted to UTC") from None


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
    kept_vectors: int = 0  # lessons stored with the vector the file carried
    foreign_model: EmbeddingModel | None = None  # the file's vectors' model, when not the store's
    redacted: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)  # "line N: why"

    def count(self, saved: Sequence[SaveResult]) -> None:
        for name, n in _tally(saved).items():
            setattr(self, name, getattr(self, name) + n)


class Transfer(OnLessons):
    """Export and import on one store, for the CLI and the MCP tools alike."""

    def projects(self, org: str) -> list[str]:
        with self.store.transaction(Scope(org=org, project=self.lessons.default_project), write=False) as tx:
            return tx.org_projects()

    def lessons_of(self, scope: Scope) -> list[StoredLesson]:
        """Every live lesson of the project, oldest first."""
        page: list[StoredLesson] = []
        cursor: str | None = None
        while True:
            listed = self.store.list(scope, (), EXPORT_PAGE, cursor)
            page.extend(listed.lessons)
            cursor = listed.next_cursor
            if cursor is None:
                return page[::-1]

    def commits_of(self, scope: Scope) -> list[structured.Commit]:
        """Every commit of the project, oldest first."""
        found: list[structured.Commit] = []
        before: int | None = None
        while True:
            with self.store.transaction(scope, write=False) as tx:
                chunk = tx.commits(None, 500, before)
            found.extend(chunk)
            if len(chunk) < 500:
                return found[::-1]
            before = chunk[-1].seq

    def export_lines(
        self, org: str, project: str | None, *, with_history: bool, with_vectors: bool = False
    ) -> Iterator[dict[str, Any]]:
        projects = [project] if project is not None else self.projects(org)
        model = self.store.models.recorded() if with_vectors else None
        if model is not None:
            yield {"type": "model", **json.loads(model.to_json())}
        for name in projects:
            scope = Scope(org=org, project=name)
            lessons = self.lessons_of(scope)
            for start in range(0, len(lessons), EXPORT_PAGE):
                yield from self._lines(scope, lessons[start : start + EXPORT_PAGE], vectors=model is not None)
            for commit in self.commits_of(scope) if with_history else ():
                # As the history tools show it, with its effects (vectors left out).
                effects = public_effects(commit.effects)
                yield {"type": "commit", "project": name, **commit_summary(commit), "effects": effects}

    def _lines(self, scope: Scope, page: list[StoredLesson], *, vectors: bool) -> Iterator[dict[str, Any]]:
        """The page's lesson lines, each with its vector when asked (one query a page)."""
        found = self.store.embeddings(scope, [lesson.id for lesson in page]) if vectors else {}
        for lesson in page:
            vector = found.get(lesson.id)
            yield {
                "type": "lesson",
                **LessonOut.of(lesson).model_dump(mode="json"),
                **({"vector": base64.b64encode(vector).decode("ascii")} if vector else {}),
            }

    async def export_page(
        self, project: str | None, cursor: str | None, limit: int, *, who: Who = NO_KEY
    ) -> ExportPage:
        """One page of a project's live lessons, newest first (the ``export_lessons`` tool)."""
        check_cursor(cursor)
        scope = self.lessons.scope(project, who.caller)
        listed = await anyio.to_thread.run_sync(self.store.list, scope, (), limit, cursor)
        return ExportPage(
            lessons=[LessonOut.of(lesson) for lesson in listed.lessons], next_cursor=listed.next_cursor
        )

    async def import_batch(
        self,
        items: Sequence[LessonIn],
        project: str | None,
        *,
        who: Who = NO_KEY,
        report: Progress = no_progress,
    ) -> ImportResult:
        """``import_lessons``: one bounded batch into one project, all or nothing. Embedded a few
        at a time with progress, then written in one transaction, so a cancel writes nothing. Only
        this project's ids count as "already there" (the key is org, project, id)."""
        if len(items) > MAX_IMPORT_BATCH:
            raise InvalidArgument(f"import_lessons takes at most {MAX_IMPORT_BATCH} lessons a call.")
        scope, recorded = self.lessons.scope(project, who.caller), who.note("import")
        async with failures_recorded(self.store, scope, recorded):
            drafts, found = _checked_items(items)
            vectors: list[Any] = []
            for start in range(0, len(drafts), IMPORT_EMBED_BATCH):
                group = drafts[start : start + IMPORT_EMBED_BATCH]
                vectors.extend(await anyio.to_thread.run_sync(self.lessons.vectors_of, group))
                if len(vectors) < len(drafts):
                    await report(len(vectors), len(drafts))
            await anyio.lowlevel.checkpoint()  # a cancel that came during the last group lands here
            store = functools.partial(self.lessons.store_drafts, keep_ids=True, activity=recorded)
            saved = await anyio.to_thread.run_sync(store, scope, drafts, vectors)
        await report(len(drafts), len(drafts))
        return ImportResult(**_tally(saved), redacted=sorted(found))

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
        """Import an export file, every line checked first: ``strict`` stops at any bad line before writing,
        then one transaction per project; otherwise bad lines are skipped and lessons written a batch at a
        time (a re-run skips what landed, by id). Checked lessons wait in a temporary file (3 KB each), held
        a batch per project; writes use one BLAS thread (idle ones spin after each near-duplicate product)."""
        report = FileReport()
        with tempfile.TemporaryFile() as spill:
            at, model, carried = self._check_lines(lines, project, report, spill)
            if strict and report.errors:
                return report
            # A store whose vectors come from another model embeds anew; one with none adopts the file's.
            if carried and model is not None and not self.store.models.adopt(model).makes_same_vectors(model):
                report.foreign_model = model
            kept = model is not None and not report.foreign_model
            started(total := sum(len(starts) for starts in at.values()))
            projects = {Scope(org=org, project=name, actor=actor): starts for name, starts in at.items()}
            with self.store.bulk(org, total) as writers, threadpool_limits(1, "blas"):
                self._write(spill, projects, report, writers, strict=strict, kept=kept, progress=progress)
        return report

    def _write(
        self,
        spill: IO[bytes],
        projects: dict[Scope, list[int]],
        report: FileReport,
        writers: int,
        *,
        strict: bool,
        kept: bool,
        progress: Callable[[int], None],
    ) -> None:
        """Each project's spilled lessons, ``writers`` projects at a time (the store's choice), the
        largest first: one project's Python work runs while another's statements do. A failure
        stops the others at their next batch and is raised."""
        lock, stop = threading.Lock(), threading.Event()  # the lock: ``spill``, ``report``, ``progress``

        def write(scope: Scope) -> None:
            drafts: list[LessonDraft] = []
            vectors: list[np.ndarray] = []
            for batch, last in _batches(spill, projects[scope], lock):
                if stop.is_set():
                    return
                drafts += [draft for draft, _ in batch]
                vectors += self._vectors(batch, report, lock, kept=kept)
                if not strict or last:
                    saved = self.lessons.store_drafts(scope, drafts, vectors, keep_ids=True)
                    drafts, vectors = [], []
                    with lock:
                        report.count(saved)
                with lock:
                    progress(len(batch))

        with ThreadPoolExecutor(writers, thread_name_prefix="lore-import") as pool:  # largest first
            futures = [pool.submit(write, s) for s in sorted(projects, key=lambda s: -len(projects[s]))]
            try:
                wait(futures, return_when=FIRST_EXCEPTION)  # not behind the largest project
            finally:
                stop.set()
            for future in futures:
                future.result()

    def _vectors(
        self,
        batch: Sequence[tuple[LessonDraft, np.ndarray | None]],
        report: FileReport,
        lock: threading.Lock,
        *,
        kept: bool,
    ) -> list[np.ndarray]:
        """The batch's vectors: the file's when ``kept``, the rest embedded (loading the model)."""
        vectors = [np.frombuffer(raw, "<f4") if kept and raw else None for _, raw in batch]
        missing = [i for i, vector in enumerate(vectors) if vector is None]
        made = self.lessons.vectors_of([batch[i][0] for i in missing]) if missing else []
        for i, vector in zip(missing, made, strict=True):
            vectors[i] = vector
        with lock:
            report.kept_vectors += len(batch) - len(missing)
        return [vector for vector in vectors if vector is not None]

    def _check_lines(
        self, lines: Iterable[str], project: str | None, report: FileReport, spill: IO[bytes]
    ) -> tuple[dict[str, list[int]], EmbeddingModel | None, bool]:
        """Every line checked and redacted before any write, lessons spilled: where each project's
        are in ``spill``, the model, and whether one carries a vector it keeps."""
        at: dict[str, list[int]] = {}
        model: EmbeddingModel | None = None
        carried = False
        for number, parsed in every_core.in_order(_checked_lines, enumerate(lines, start=1)):
            if isinstance(parsed, _Lesson):
                parsed = parsed.refusal(model) or parsed
            if isinstance(parsed, str):
                report.errors.append(f"line {number}: {parsed}")
            elif isinstance(parsed, EmbeddingModel):
                model = parsed
            elif parsed is None:
                report.commits += 1
            else:
                report.redacted.update(parsed.kinds)
                target = project or parsed.project or self.lessons.default_project
                at.setdefault(target, []).append(spill.tell())
                carried = carried or (model is not None and parsed.kept)
                record = parsed.record  # pickled by the worker: (draft, vector bytes or None)
                if model is None and parsed.kept:  # before the model line: embedded anew
                    record = pickle.dumps((pickle.loads(record)[0], None), pickle.HIGHEST_PROTOCOL)
                spill.write(record)
        return at, model, carried


def _batches(
    spill: IO[bytes], starts: list[int], lock: threading.Lock
) -> Iterator[tuple[list[tuple[LessonDraft, np.ndarray | None]], bool]]:
    """One project's spilled lessons in file order, ``FILE_BATCH`` at a time, each with whether it is
    the last (``spill`` is read under ``lock``: writers share it)."""
    for begin in range(0, len(starts), FILE_BATCH):
        with lock:
            items = []
            for offset in starts[begin : begin + FILE_BATCH]:
                spill.seek(offset)
                items.append(pickle.load(spill))  # this import's own temporary file, nothing else
        yield items, begin + FILE_BATCH >= len(starts)


def _checked_items(items: Sequence[LessonIn]) -> tuple[list[LessonDraft], set[str]]:
    """Items checked and redacted (``imported_draft``); a refusal names the item."""
    drafts: list[LessonDraft] = []
    found: set[str] = set()
    for number, item in enumerate(items):
        try:
            draft, kinds = imported_draft(item)
        except InvalidArgument as exc:
            raise InvalidArgument(f"lessons[{number}]: {exc.message}") from None
        drafts.append(draft)
        found.update(kinds)
    return drafts, found


def imported_draft(item: LessonIn) -> tuple[LessonDraft, tuple[str, ...]]:
    """An exported lesson checked like a new one (``make_draft``), keeping id, times, votes and
    meta. A bad id is not echoed: it may be a pasted secret."""
    if not ULID_PATTERN.fullmatch(item.id):
        raise InvalidArgument("id must be a ULID as Lore exports it (26 characters).")
    if item.project is not None:
        check_project(item.project)
    draft, kinds = make_draft(**item.model_dump(include=DRAFT_FIELDS))
    return dataclasses.replace(draft, **item.model_dump(include=KEPT_FIELDS)), kinds


def checked_lesson(data: Mapping[str, Any]) -> tuple[LessonIn, LessonDraft, tuple[str, ...]]:
    """A lesson line checked: ``ValidationError`` for shape, ``InvalidArgument`` for content."""
    item = LessonIn.model_validate(data)
    return (item, *imported_draft(item))


def refusal(exc: ValidationError | InvalidArgument) -> str:
    """Why a lesson line was refused, as one sentence."""
    return validation_message(exc) if isinstance(exc, ValidationError) else exc.message


def _tally(saved: Sequence[SaveResult]) -> dict[str, int]:
    """How many drafts of an import were added, skipped (their id was there) and merged."""
    skipped = sum(r.skipped for r in saved)
    merged = sum(r.merged for r in saved)
    return {"added": len(saved) - skipped - merged, "skipped": skipped, "merged": merged}


@dataclass(frozen=True)
class _Lesson:
    """A lesson line as a worker checks it: its vector's bytes (None: none; b"": not base64), if finite, the
    spill's record (the draft, with those bytes if ``kept``: redaction left their text) or why ``refused``."""

    raw: bytes | None
    finite: bool
    record: bytes = b""
    refused: str | None = None
    kept: bool = False
    kinds: tuple[str, ...] = ()
    project: str | None = None

    def refusal(self, model: EmbeddingModel | None) -> str | None:
        """Why the line is refused as of the file's last ``model`` line (the vector's first), else None."""
        if self.raw is None or model is None:
            return self.refused
        if len(self.raw) != 4 * model.dimension:
            return f"vector must be {model.dimension} float32 values in base64, as export writes it."
        return self.refused if self.finite else "vector must hold finite numbers."


def file_lines(path: str) -> Iterator[str]:
    """A file's lines for ``import_file``, read as it goes (the CLI's; it is opened when read)."""
    with open(path, encoding="utf-8-sig") as f:  # a byte order mark is no part of line 1
        yield from f


def _checked_lines(
    numbered: list[tuple[int, str]],
) -> list[tuple[int, _Lesson | EmbeddingModel | str | None]]:
    """``_checked_line`` of each line but blank ones: work for ``every_core`` (in a worker process)."""
    return [(number, _checked_line(line)) for number, line in numbered if line.strip()]


def _checked_line(line: str) -> _Lesson | EmbeddingModel | str | None:
    """A checked lesson, a model line's model, None for a commit, or why the line is refused."""
    data = json_object(line)
    if isinstance(data, str):
        return data
    kind = data.get("type", "lesson")
    if kind == "commit":
        return None
    if kind == "model":
        try:
            return EmbeddingModel.from_json(json.dumps(data))
        except (KeyError, TypeError, ValueError):
            return "a model line needs a name, a dimension and a fingerprint"
    if kind != "lesson":
        return f"unknown type {kind!r} (expected 'lesson', 'commit' or 'model')"
    raw, finite = _raw(data.get("vector"))
    try:
        item, draft, kinds = checked_lesson(data)
    except (ValidationError, InvalidArgument) as exc:
        return _Lesson(raw, finite, refused=refusal(exc))
    kept = (draft.problem, draft.resolution) == (item.problem, item.resolution)  # the vector's text
    record = pickle.dumps((draft, raw if kept else None), pickle.HIGHEST_PROTOCOL)
    return _Lesson(raw, finite, record, kept=kept and raw is not None, kinds=kinds, project=item.project)


def json_object(line: str) -> dict[str, Any] | str:
    """A line's JSON object, or why it is not one."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        return f"not JSON ({exc.msg})"
    except RecursionError:
        return "not JSON (nested too deeply)"
    return data if isinstance(data, dict) else "expected a JSON object"


def _raw(value: Any) -> tuple[bytes | None, bool]:
    """A line's ``vector`` (base64 little-endian float32) as bytes, b"" if not base64, and whether finite."""
    if value is None:
        return None, True
    try:
        raw = base64.b64decode(value, validate=True) if isinstance(value, str) else b""
    except (binascii.Error, ValueError):
        raw = b""
    return raw, len(raw) % 4 == 0 and bool(np.isfinite(np.frombuffer(raw, dtype="<f4")).all())
