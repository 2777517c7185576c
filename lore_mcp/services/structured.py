"""Structured memory and history, a transaction a call: one snapshot; a write lands whole with its commit."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

import anyio.from_thread
import anyio.to_thread

from lore_mcp.errors import InvalidArgument
from lore_mcp.redaction import fit, redact_json
from lore_mcp.services.lesson_input import ULID_PATTERN
from lore_mcp.services.lessons import OnLessons
from lore_mcp.services.plan_models import PlanModel, check_values, map_values
from lore_mcp.services.progress import Progress, no_progress
from lore_mcp.services.recording import NO_KEY, Who, failures_recorded
from stores import (
    IDENTIFIER,
    MAX_MESSAGE_CHARS,
    ActivityNote,
    Commit,
    NotFoundError,
    ProjectTx,
    Scope,
    Store,
    history,
    queries,
    structured,
)

T = TypeVar("T")
APPLY_PROGRESS_ROWS = 200  # plans this large (plan_rows) report progress
# Commits a history page carries in full: a lesson page's ten diffs in one call, not eleven.
MAX_FULL_COMMITS = 20
TOP_TAGS = 10  # lore://overview's tags, and lessons most and least voted
TOP_VOTED = 5


async def in_transaction(
    store: Store, scope: Scope, fn: Callable[[ProjectTx], T], *, write: bool = False
) -> T:
    """``fn`` in one transaction of ``scope`` on a worker thread: the store's calls block."""

    def work() -> T:
        with store.transaction(scope, write=write) as tx:
            return fn(tx)

    return await anyio.to_thread.run_sync(work)


class StructuredService(OnLessons):
    """schema / plan / apply / query_rows / history / get_commit / revert_commit."""

    async def _read(self, project: str | None, who: Who, fn: Callable[[ProjectTx], T]) -> T:
        return await in_transaction(self.store, self.lessons.scope(project, who.caller), fn)

    async def schema(self, project: str | None = None, *, who: Who = NO_KEY) -> dict[str, Any]:
        return await self._read(project, who, structured.describe_schema)

    async def plan(self, plan: PlanModel, project: str | None = None, *, who: Who = NO_KEY) -> dict[str, Any]:
        """The dry run sees the plan as apply would store it: redacted."""
        raw, kinds = await anyio.to_thread.run_sync(redacted_plan, plan)  # large plans take a while
        snap = await self._read(project, who, lambda tx: structured.snapshot(tx, raw))
        # The plan runs on the snapshot after the read transaction: it holds nothing meanwhile.
        return {**(await anyio.to_thread.run_sync(structured.dry_run, snap, raw)), "redacted": kinds}

    async def apply(
        self,
        plan: PlanModel,
        project: str | None = None,
        *,
        who: Who = NO_KEY,
        report: Progress = no_progress,
    ) -> dict[str, Any]:
        """Apply ``plan``; from ``APPLY_PROGRESS_ROWS`` rows it reports progress per operation."""
        scope, recorded = self.lessons.scope(project, who.caller), who.note("apply")
        async with failures_recorded(self.store, scope, recorded):
            raw, kinds = await anyio.to_thread.run_sync(redacted_plan, plan)
            weights = plan_rows(raw)
            total = sum(weights)
            step = _reporting(report, weights) if total >= APPLY_PROGRESS_ROWS else None
            # Snapshot, then a short write (structured.Snapshot): a large plan never holds the writer.
            snap = await in_transaction(self.store, scope, lambda tx: structured.snapshot(tx, raw))
            ran = await anyio.to_thread.run_sync(structured.run_plan, snap, raw, step)
            write = _recorded(lambda tx: structured.apply_snapshot(tx, snap, ran, raw, scope.actor), recorded)
            result = await in_transaction(self.store, scope, write, write=True)
            if step is not None:
                await report(total, total)
            return {**result, "redacted": kinds}

    async def query_rows(
        self,
        table: str,
        *,
        where: list[dict[str, Any]],
        order_by: list[dict[str, Any]],
        limit: int,
        cursor: str | None,
        project: str | None = None,
        who: Who = NO_KEY,
    ) -> dict[str, Any]:
        check_values("where", where)
        rows = await self._read(project, who, lambda tx: queries.read_table(tx, table))
        # After the read transaction: a slow filter holds no connection or lock (queries.py).
        return await anyio.to_thread.run_sync(
            lambda: queries.select_rows(rows, where, order_by, limit, cursor)
        )

    async def history(
        self,
        target: str | None,
        limit: int,
        cursor: str | None,
        project: str | None = None,
        *,
        effects: bool = False,
        who: Who = NO_KEY,
    ) -> dict[str, Any]:
        key = history_target(target)
        before = history.parse_cursor(cursor)
        if effects and limit > MAX_FULL_COMMITS:
            raise InvalidArgument(f"With effects, limit must be at most {MAX_FULL_COMMITS}.")
        commits = await self._read(project, who, lambda tx: tx.commits(key, limit + 1, before))
        page = commits[:limit]
        return {
            "commits": [commit_view(c, effects=effects) for c in page],
            "next_cursor": str(page[-1].seq) if len(commits) > limit else None,
        }

    async def get_commit(
        self, commit_id: str, project: str | None = None, *, who: Who = NO_KEY
    ) -> dict[str, Any]:
        check_commit_id(commit_id)
        commit = await self._read(project, who, lambda tx: tx.get_commit(commit_id))
        if commit is None:
            raise NotFoundError(f"No commit {commit_id} in this project.")
        return commit_view(commit)

    async def revert_commit(
        self, commit_id: str, project: str | None = None, *, who: Who = NO_KEY
    ) -> dict[str, Any]:
        scope, recorded = self.lessons.scope(project, who.caller), who.note("revert")
        async with failures_recorded(self.store, scope, recorded):
            check_commit_id(commit_id)
            revert = _recorded(lambda tx: history.revert(tx, commit_id, scope.actor), recorded)
            return await in_transaction(self.store, scope, revert, write=True)

    async def stats(self, project: str | None = None, *, who: Who = NO_KEY) -> dict[str, Any]:
        """``lore://stats`` counts the caller may see, and the projects it may switch to."""
        scope = self.lessons.scope(project, who.caller)
        one_project = who.caller is not None and who.caller.project is not None

        def work() -> dict[str, Any]:
            with self.store.transaction(scope, write=False) as tx:
                commits = tx.commits(None, 1, None)
                tables = structured.describe_schema(tx)["tables"]
                projects = [scope.project] if one_project else sorted({*tx.org_projects(), scope.project})
            return {
                "org": scope.org,
                "project": scope.project,
                "projects": projects,
                "lessons": self.store.count(scope.org, scope.project),
                "tables": len(tables),
                "rows": sum(t["row_count"] for t in tables),
                "commits": commits[0].seq if commits else 0,
                "embedding_model": self.lessons.embedder.model_name,
            }

        return await anyio.to_thread.run_sync(work)

    async def overview(self, project: str | None = None, *, who: Who = NO_KEY) -> dict[str, Any]:
        """``lore://overview``: stats, saves per day, top tags, the most and least voted lessons, in one
        query (the page read lessons 100 at a time: twenty calls at 2,000, each from the caller's budget)."""
        stats = await self.stats(project, who=who)
        rows = await self._read(project, who, lambda tx: tx.lesson_digest(datetime.now(UTC)))
        days = Counter(r["created_at"].astimezone(UTC).date().isoformat() for r in rows)
        tags = Counter(tag for r in rows for tag in r["tags"])
        voted = sorted(rows, key=lambda r: (r["downvotes"] - r["upvotes"], r["id"]))

        def titled(picked: list[dict[str, Any]]) -> list[dict[str, Any]]:
            return [
                {"id": r["id"], "problem": r["problem"], "net_votes": r["upvotes"] - r["downvotes"]}
                for r in picked
            ]

        return {
            **stats,
            "lessons": len(rows),
            "per_day": [{"day": day, "lessons": n} for day, n in sorted(days.items())],
            "tags": [
                {"tag": t, "lessons": n}
                for t, n in sorted(tags.items(), key=lambda x: (-x[1], x[0]))[:TOP_TAGS]
            ],
            "most_voted": titled(voted[:TOP_VOTED]),
            "least_voted": titled(voted[::-1][:TOP_VOTED]),
        }


def _recorded(fn: Callable[[ProjectTx], T], recorded: ActivityNote) -> Callable[[ProjectTx], T]:
    """``fn``, then its activity entry (naming its commit) in the same transaction."""

    def work(tx: ProjectTx) -> T:
        result = fn(tx)
        tx.append_activity(recorded)
        return result

    return work


# A commit named by its number in the project, as history and the page show it.
COMMIT_SEQ = re.compile(r"#?[0-9]{1,12}")


def history_target(target: str | None) -> str | None:
    """A lesson id or a table name, as the commit target it stands for."""
    if target is None:
        return None
    if ULID_PATTERN.fullmatch(target):
        return f"lesson:{target}"
    if IDENTIFIER.fullmatch(target):
        return f"table:{target}"
    raise InvalidArgument("target must be a lesson id or a table name (or omitted for the whole project).")


def check_commit_id(commit_id: str) -> None:
    if not (ULID_PATTERN.fullmatch(commit_id) or COMMIT_SEQ.fullmatch(commit_id)):
        raise InvalidArgument(
            f"{commit_id[:80]!r} is not a commit id: ids are 26-character ULIDs from history, "
            "or a commit's number as #12."
        )


def plan_rows(raw: dict[str, Any]) -> list[int]:
    """Progress weight: an insert its rows, others one (their rows are known only after)."""
    return [
        len(op["rows"]) if op.get("op") == "insert" and isinstance(op.get("rows"), list) else 1
        for op in raw.get("operations", [])
    ]


def _reporting(report: Progress, weights: list[int]) -> Callable[[int], None]:
    """A worker-thread ``step(index)`` reporting rows done; the last once the commit landed."""
    total = sum(weights)

    def step(index: int) -> None:
        done = sum(weights[: index + 1])
        if done < total:
            anyio.from_thread.run(report, done, total)

    return step


def redacted_plan(plan: PlanModel) -> tuple[dict[str, Any], list[str]]:
    """The plan checked then redacted: message, row values (nested too) and column defaults.
    Filters are never stored and identifiers cannot hold a secret's shape, so they stay."""
    raw = plan.model_dump(by_alias=True, exclude_unset=True)  # the plan as the client wrote it
    check_values("plan", raw)
    found: set[str] = set()

    def clean(where: str, value: Any) -> Any:
        redacted, kinds = redact_json(value)
        found.update(kinds)
        return redacted

    raw = map_values(raw, clean, filters=False)
    if isinstance(raw.get("message"), str):
        # A marker can be longer than its secret: keep a message that fit within the limit.
        raw["message"] = fit(clean("message", raw["message"]), MAX_MESSAGE_CHARS)
    return raw, sorted(found)


SUMMARY_FIELDS = "id seq parent kind message actor created_at schema_hash_before schema_hash_after".split()


def commit_summary(commit: Commit) -> dict[str, Any]:
    """A commit as history lists it: every field but its effects and targets."""
    summary = {name: getattr(commit, name) for name in SUMMARY_FIELDS}
    return {**summary, "created_at": commit.created_at.isoformat()}  # keeps its place among the keys


def commit_view(commit: Commit, *, effects: bool = True) -> dict[str, Any]:
    """A history commit with its changes, and ``effects`` in full as get_commit shows it."""
    view = {**commit_summary(commit), "changed": changed(commit)}
    return {**view, "effects": public_effects(commit.effects)} if effects else view


# Fields every lesson change touches, so naming them says nothing.
UNTOLD_FIELDS = frozenset({"updated_at", "embedding"})
CHANGED_ROWS = 3
TITLE_CHARS = 80


def changed(commit: Commit) -> list[dict[str, Any]]:
    """A commit's first few changed rows: table, id, title and the fields that differ."""
    told = []
    for row in commit.effects.get("rows", [])[:CHANGED_ROWS]:
        before, after = row.get("before") or {}, row.get("after") or {}
        image = after or before
        fields = sorted(f for f in {*before, *after} - UNTOLD_FIELDS if before.get(f) != after.get(f))
        title = str(image.get("problem", "")) if row["table"] == structured.LESSONS_TABLE else ""
        if len(title) > TITLE_CHARS:
            title = title[:TITLE_CHARS].rsplit(" ", 1)[0] + "…"
        told.append({"table": row["table"], "id": row["id"], "title": title, "fields": fields})
    return told


def public_effects(effects: Any) -> dict[str, Any]:
    """Effects as clients see them: lesson vectors are internal and left out."""
    rows = []
    for row in effects.get("rows", []):
        row = dict(row)
        for side in ("before", "after"):
            if isinstance(row.get(side), dict) and "embedding" in row[side]:
                row[side] = {k: v for k, v in row[side].items() if k != "embedding"}
        rows.append(row)
    return {"rows": rows, "schema": effects.get("schema", []), "tables": effects.get("tables", {})}
