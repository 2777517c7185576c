"""History's reads and its one write, a revert: refused (CONFLICT naming the blocking ``#seq``)
when a later commit touched what it would undo, else the "before" images as one new, revertible commit."""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from stores import deadline
from stores.engine.structured import (
    LESSONS_TABLE,
    Commit,
    ProjectTx,
    current_hash,
    record,
    summarize,
    targets_of,
)
from stores.engine.workspace import Workspace, table_from_json
from stores.errors import ConflictError, InvalidInputError, NotFoundError


def revert(tx: ProjectTx, commit_id: str, actor: str) -> dict[str, Any]:
    """A new commit undoing ``commit_id``; CONFLICT when later commits touched the same things."""
    target = tx.get_commit(commit_id)
    if target is None:
        raise NotFoundError(f"No commit {commit_id} in this project.")
    touching = tx.later_commits_touching(target.seq, conflict_targets(targets_of(target.effects)))
    later = [c for c in map(tx.get_commit, touching) if c is not None]
    blocking = [c for c in later if _blocks(target, c)]
    if blocking:
        named = ", ".join(f"#{c.seq} {c.kind}" for c in blocking[:20])
        raise ConflictError(
            f"Commit #{target.seq} cannot be reverted: later commits changed the same rows, lesson fields "
            f"or tables ({named}{f' and {len(blocking) - 20} more' if len(blocking) > 20 else ''}). "
            "Revert those first, newest first."
        )
    before = current_hash(tx)
    ws = Workspace(tx)
    lesson_effects = _undo(tx, ws, target, later)
    effects = ws.effects()
    effects["rows"] = lesson_effects + effects["rows"]
    message = f"Revert #{target.seq}"
    commit = record(tx, effects, kind="revert", message=message, actor=actor, hash_before=before, ws=ws)
    return {
        "commit_id": commit.id,
        "seq": commit.seq,
        "reverted": target.id,
        "schema_hash": commit.schema_hash_after,
        "effects": summarize(effects),
    }


# Fields a lesson's vector is made from: restored together, with the vector, or not at all.
_TEXT = frozenset({"problem", "resolution"})
_EVERYTHING = frozenset({"*"})


def changed_fields(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> frozenset[str]:
    """The lesson fields a change wrote (``*``: made or removed), bar the vector and ``updated_at``."""
    if before is None or after is None:
        return _EVERYTHING
    fields = {k for k in {*before, *after} - {"updated_at", "embedding"} if before.get(k) != after.get(k)}
    return frozenset(fields | _TEXT if fields & _TEXT else fields)


def _lesson_fields(commit: Commit) -> dict[str, frozenset[str]]:
    out: dict[str, frozenset[str]] = {}
    for row in commit.effects.get("rows", []):
        if row["table"] == LESSONS_TABLE:
            out[row["id"]] = out.get(row["id"], frozenset()) | changed_fields(row["before"], row["after"])
    return out


def _blocks(target: Commit, later: Commit) -> bool:
    """Whether ``later`` changed what reverting ``target`` undoes (a vote does not block a text edit's)."""
    shared = set(conflict_targets(targets_of(target.effects))) & set(targets_of(later.effects))
    mine, theirs = _lesson_fields(target), _lesson_fields(later)
    for name in shared:
        kind, _, lesson_id = name.partition(":")
        if kind != "lesson":
            return True
        a, b = mine.get(lesson_id, _EVERYTHING), theirs.get(lesson_id, _EVERYTHING)
        if "*" in a or "*" in b or a & b:
            return True
    return False


def _undo(tx: ProjectTx, ws: Workspace, target: Commit, later: list[Commit]) -> list[dict[str, Any]]:
    """Restore ``target``'s before images: tables in ``ws``, lessons (only the fields ``target``
    changed) in ``tx``, returning their effects, as lessons are outside the copy."""
    lesson_effects = []
    # Oldest first: the last image of a lesson is what it is now.
    latest = {
        r["id"]: r["after"] for c in later for r in c.effects.get("rows", []) if r["table"] == LESSONS_TABLE
    }
    # By name: ``jsonb`` reorders object keys (shortest first), SQLite keeps them as written.
    tables = dict(sorted(target.effects.get("tables", {}).items()))
    # Tables first (so rows can come back), rows, then created tables (rows recorded deleted).
    for name, change in tables.items():
        if change["before"] is not None:
            ws.set_def(name, table_from_json(change["before"], ws.defs.get(name)))
            ws.schema.append({"op": "restore_table", "table": name})
    for row in deadline.checked(reversed(target.effects.get("rows", []))):
        if row["table"] == LESSONS_TABLE:
            now = latest.get(row["id"], row["after"])
            back = _lesson_back(row, now)
            tx.restore_lesson(row["id"], back)
            lesson_effects.append({"table": LESSONS_TABLE, "id": row["id"], "before": now, "after": back})
        elif row["table"] in ws.defs:
            ws.set_row(row["table"], row["id"], copy.deepcopy(row["before"]))
    for name, change in tables.items():
        if change["before"] is None and name in ws.defs:
            ws.drop_table(name)
    return lesson_effects


def _lesson_back(row: dict[str, Any], now: Any) -> Any:
    """The image a lesson reverts to: the fields ``row`` changed put back on its image ``now``."""
    back = row["before"]
    if now is not row["after"] and back is not None:
        fields = changed_fields(back, row["after"])
        back = {**now, **{k: v for k, v in back.items() if k in fields or k == "embedding"}}
        if not fields & _TEXT:
            back["embedding"] = now.get("embedding")
    return back


def conflict_targets(targets: tuple[str, ...]) -> list[str]:
    """What a later commit must not have touched for a commit with ``targets`` to be reverted."""
    out = []
    for target in targets:
        kind, _, rest = target.partition(":")
        if kind == "schema":
            out.append(f"table:{rest}")  # any later use of a table whose shape this changed
        elif kind in ("row", "lesson"):
            out.append(target)
            if kind == "row":
                out.append(f"schema:{rest.rsplit(':', 1)[0]}")
    return sorted(set(out))


_HISTORY_CURSOR = re.compile(r"[0-9]{1,12}")


def parse_cursor(cursor: str | None) -> int | None:
    """The sequence number a ``history`` cursor holds; anything else is the caller's mistake."""
    if cursor is None:
        return None
    if not _HISTORY_CURSOR.fullmatch(cursor):
        raise InvalidInputError(
            "cursor is not one this server returned; pass next_cursor from a previous page."
        )
    return int(cursor)
