"""History's reads and its one write: undoing a commit with a new commit.

A revert is refused (CONFLICT) when a later commit touched what it would undo: a row, a
lesson, or a table whose shape it changed. Otherwise it restores the commit's "before"
images in a working copy and writes them as one new commit, so a revert is itself revertible.
"""

from __future__ import annotations

import copy
import re
from typing import Any

from stores import deadline
from stores.engine.structured import (
    LESSONS_TABLE,
    Commit,
    ProjectTx,
    current_hash,
    summarize,
    targets_of,
    write,
)
from stores.engine.workspace import Workspace, table_from_json
from stores.errors import ConflictError, InvalidInputError, NotFoundError


def revert(tx: ProjectTx, commit_id: str, actor: str) -> dict[str, Any]:
    """A new commit undoing ``commit_id``; CONFLICT when later commits touched the same things."""
    target = tx.get_commit(commit_id)
    if target is None:
        raise NotFoundError(f"No commit {commit_id} in this project.")
    later = tx.later_commits_touching(target.seq, conflict_targets(targets_of(target.effects)))
    if later:
        raise ConflictError(
            f"Commit {commit_id} cannot be reverted: later commits changed the same rows or tables "
            f"({', '.join(later[:20])}{f' and {len(later) - 20} more' if len(later) > 20 else ''}). "
            "Revert those first, newest first."
        )
    before = current_hash(tx)
    ws = Workspace(tx)
    lesson_effects = _undo(tx, ws, target)
    effects = ws.effects()
    effects["rows"] = lesson_effects + effects["rows"]
    commit = write(
        tx, ws, effects, kind="revert", message=f"Revert {commit_id}", actor=actor, hash_before=before
    )
    return {
        "commit_id": commit.id,
        "seq": commit.seq,
        "reverted": commit_id,
        "schema_hash": commit.schema_hash_after,
        "effects": summarize(effects),
    }


def _undo(tx: ProjectTx, ws: Workspace, target: Commit) -> list[dict[str, Any]]:
    """Restore ``target``'s before images: tables in ``ws``, lessons in ``tx`` (whose effects
    are returned, since lessons are not part of the working copy)."""
    lesson_effects = []
    # By name: Postgres ``jsonb`` keeps object keys in its own order (shortest first), SQLite
    # JSON text in the order written, and the revert's effects list tables in this order.
    tables = dict(sorted(target.effects.get("tables", {}).items()))
    # Tables come back first (so their rows can), rows next, and tables the commit
    # created go last (so their rows are recorded as deleted).
    for name, change in tables.items():
        if change["before"] is not None:
            ws.set_def(name, table_from_json(change["before"], ws.defs.get(name)))
            ws.schema.append({"op": "restore_table", "table": name})
    for row in reversed(target.effects.get("rows", [])):
        deadline.check()
        if row["table"] == LESSONS_TABLE:
            tx.restore_lesson(row["id"], row["before"])
            lesson_effects.append(
                {"table": LESSONS_TABLE, "id": row["id"], "before": row["after"], "after": row["before"]}
            )
        elif row["table"] in ws.defs:
            ws.set_row(row["table"], row["id"], copy.deepcopy(row["before"]))
    for name, change in tables.items():
        if change["before"] is None and name in ws.defs:
            ws.drop_table(name)
    return lesson_effects


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
