"""History: every change to a project is a commit that can be listed, read and reverted."""

from __future__ import annotations

import asyncio
import itertools
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.support.helpers import ToolFailed, call
from tests.support.plans import (
    NOTES_COLUMNS,
    NOTES_ROWS,
    all_rows,
    apply_ops,
    column,
    cond,
    create_table,
    ids_of,
    insert,
    make_plan,
    schema_hash,
    state,
    table_of,
)

STRIPE = {
    "problem": "Stripe webhook signature verification fails in production",
    "resolution": "Verify against the raw request body; the framework was re-serialising the JSON.",
    "tags": ["stripe"],
}
DNS = {
    "problem": "Kubernetes pods cannot resolve external DNS names",
    "resolution": "CoreDNS forwarded to a dead upstream; point forward at the node's resolv.conf.",
}
COMMIT_FIELDS = {
    "id",
    "seq",
    "parent",
    "kind",
    "message",
    "actor",
    "created_at",
    "schema_hash_before",
    "schema_hash_after",
    "changed",
}


async def history(client: Client, **arguments: Any) -> list[dict[str, Any]]:
    """Every commit of a history query, newest first, following ``next_cursor``."""
    commits: list[dict[str, Any]] = []
    cursor = None
    for _ in range(200):
        args = dict(arguments)
        if cursor is not None:
            args["cursor"] = cursor
        page = await call(client, "history", **args)
        commits += page["commits"]
        cursor = page["next_cursor"]
        if cursor is None:
            return commits
    pytest.fail("history kept returning a next_cursor")


async def kinds(client: Client, **arguments: Any) -> list[str]:
    return [c["kind"] for c in await history(client, **arguments)]


def unknown_id_like(commit_id: str) -> str:
    """A well-formed id that names no commit: the real one with its last character changed."""
    last = commit_id[-1]
    if last.isdigit():
        other = "1" if last == "0" else "0"
    else:
        other = "b" if last.lower() == "a" else "a"
        other = other.upper() if last.isupper() else other
    return commit_id[:-1] + other


def rows_and_schema(snapshot: dict[str, Any]) -> dict[str, Any]:
    """A ``state`` without its commits: what a revert must bring back."""
    return {"schema": snapshot["schema"], "rows": snapshot["rows"]}


async def expect_failure(client: Client, tool: str, **arguments: Any) -> ToolFailed:
    with pytest.raises(ToolFailed) as err:
        await call(client, tool, **arguments)
    return err.value


# --- commits for lessons ----------------------------------------------------------------------


async def test_every_lesson_change_is_a_commit_of_its_kind_in_one_chain(client: Client) -> None:
    empty = await schema_hash(client)
    saved = await call(client, "save_lesson", **STRIPE)
    again = await call(client, "save_lesson", **STRIPE)
    assert again["merged"] is True
    await call(client, "upvote_lesson", id=saved["id"])
    await call(client, "downvote_lesson", id=saved["id"])
    await call(client, "update_lesson", id=saved["id"], confidence=0.9)
    await call(client, "delete_lesson", id=saved["id"])

    commits = await history(client)
    assert [c["kind"] for c in commits] == ["delete", "update", "vote", "vote", "merge", "save"]
    assert [c["seq"] for c in commits] == [6, 5, 4, 3, 2, 1]
    for commit in commits:
        assert set(commit) >= COMMIT_FIELDS, commit
        assert isinstance(commit["id"], str) and commit["id"]
        assert commit["schema_hash_before"] == commit["schema_hash_after"] == empty
        assert isinstance(commit["created_at"], str)
        datetime.fromisoformat(commit["created_at"])
    assert len({c["id"] for c in commits}) == 6
    oldest_first = list(reversed(commits))
    assert oldest_first[0]["parent"] is None
    for earlier, later in itertools.pairwise(oldest_first):
        assert later["parent"] == earlier["id"]
        assert datetime.fromisoformat(later["created_at"]) >= datetime.fromisoformat(earlier["created_at"])


async def test_lesson_and_table_commits_share_one_sequence(client: Client) -> None:
    await call(client, "save_lesson", **STRIPE)
    applied = await apply_ops(client, create_table("notes", *NOTES_COLUMNS), message="make notes")
    assert applied["seq"] == 2
    await call(client, "save_lesson", **DNS)
    commits = await history(client)
    assert [(c["seq"], c["kind"]) for c in commits] == [(3, "save"), (2, "apply"), (1, "save")]
    apply_commit = commits[1]
    assert apply_commit["id"] == applied["commit_id"]
    assert apply_commit["message"] == "make notes"
    assert apply_commit["schema_hash_after"] == applied["schema_hash"]
    assert apply_commit["schema_hash_before"] == commits[2]["schema_hash_after"]
    assert commits[0]["schema_hash_before"] == commits[0]["schema_hash_after"] == applied["schema_hash"]


async def test_refused_calls_leave_no_commit_and_no_gap_in_the_sequence(client: Client) -> None:
    await apply_ops(client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS))
    with pytest.raises(ToolFailed):
        await apply_ops(client, insert("notes", {"title": "x"}), insert("nope", {"x": 1}))
    with pytest.raises(ToolFailed):
        await call(client, "apply", plan=make_plan("0" * 64, insert("notes", {"title": "x"})))
    with pytest.raises(ToolFailed):
        await call(client, "upvote_lesson", id="01ARZ3NDEKTSV4RRFFQ69G5FAV")
    await call(client, "plan", plan=make_plan(await schema_hash(client), insert("notes", {"title": "x"})))
    await call(client, "query_rows", table="notes")
    applied = await apply_ops(client, insert("notes", {"title": "d"}))
    assert applied["seq"] == 2
    assert [c["seq"] for c in await history(client)] == [2, 1]


async def test_history_of_a_lesson_lists_only_the_commits_that_touched_it(client: Client) -> None:
    a = await call(client, "save_lesson", **STRIPE)
    b = await call(client, "save_lesson", **DNS)
    await call(client, "upvote_lesson", id=a["id"])
    await call(client, "update_lesson", id=b["id"], tags=["k8s"])
    await call(client, "save_lesson", **STRIPE)  # merges into a
    await apply_ops(client, create_table("notes", *NOTES_COLUMNS))
    assert await kinds(client, target=a["id"]) == ["merge", "vote", "save"]
    assert await kinds(client, target=b["id"]) == ["update", "save"]
    assert len(await history(client)) == 6


async def test_history_of_a_table_lists_only_the_commits_that_touched_it(client: Client) -> None:
    one = await apply_ops(client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS))
    two = await apply_ops(client, create_table("other", column("x", "text")))
    await call(client, "save_lesson", **STRIPE)
    three = await apply_ops(client, insert("notes", {"title": "d"}))
    four = await apply_ops(
        client, insert("other", {"x": "y"}), {"op": "delete", "table": "notes", "where": []}
    )
    reverted = await call(client, "revert_commit", commit_id=four["commit_id"])
    notes_ids = [c["id"] for c in await history(client, target="notes")]
    other_ids = [c["id"] for c in await history(client, target="other")]
    assert notes_ids == [reverted["commit_id"], four["commit_id"], three["commit_id"], one["commit_id"]]
    assert other_ids == [reverted["commit_id"], four["commit_id"], two["commit_id"]]
    assert await history(client, target="never_existed") == []


async def test_history_pages_newest_first_with_a_cursor(client: Client) -> None:
    await apply_ops(client, create_table("t", column("x", "integer")))
    for i in range(6):
        await apply_ops(client, insert("t", {"x": i}), message=f"insert {i}")
    everything = (await call(client, "history"))["commits"]
    assert [c["seq"] for c in everything] == [7, 6, 5, 4, 3, 2, 1]
    first = await call(client, "history", limit=3)
    assert [c["seq"] for c in first["commits"]] == [7, 6, 5] and first["next_cursor"]
    paged = await history(client, limit=3)
    assert paged == everything
    assert [c["message"] for c in paged[:2]] == ["insert 5", "insert 4"]
    by_table = await history(client, target="t", limit=2)
    assert by_table == everything
    last = await call(client, "history", limit=7)
    assert (
        last["next_cursor"] is None
        or (await call(client, "history", cursor=last["next_cursor"]))["commits"] == []
    )


async def test_bad_history_arguments_are_refused(client: Client) -> None:
    await call(client, "save_lesson", **STRIPE)
    for arguments in ({"limit": 0}, {"cursor": "garbage"}, {"project": "../etc"}):
        result = await client.call_tool("history", arguments)
        assert result.is_error and result.content[0].text.startswith("VALIDATION_ERROR: "), arguments


# --- get_commit -------------------------------------------------------------------------------


async def test_get_commit_shows_each_rows_before_and_after(client: Client) -> None:
    await apply_ops(client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS))
    changed = await apply_ops(
        client,
        insert("notes", {"title": "d", "n": 4}),
        {"op": "update", "table": "notes", "where": [cond("id", "=", 2)], "set": {"title": "B"}},
        {"op": "delete", "table": "notes", "where": [cond("id", "=", 1)]},
        message="mixed",
    )
    commit = await call(client, "get_commit", commit_id=changed["commit_id"])
    [listed] = [c for c in await history(client) if c["id"] == changed["commit_id"]]
    assert {k: commit[k] for k in COMMIT_FIELDS} == listed
    assert commit["kind"] == "apply" and commit["message"] == "mixed" and commit["seq"] == 2
    effects = {(e["table"], e["id"]): e for e in commit["effects"]["rows"]}
    assert set(effects) == {("notes", 4), ("notes", 2), ("notes", 1)}
    assert effects["notes", 4]["before"] is None
    assert {"title": "d", "n": 4, "done": False}.items() <= effects["notes", 4]["after"].items()
    assert effects["notes", 2]["before"]["title"] == "b" and effects["notes", 2]["after"]["title"] == "B"
    assert effects["notes", 2]["before"]["done"] is True and effects["notes", 2]["after"]["done"] is True
    assert {"title": "a", "n": 1, "done": False}.items() <= effects["notes", 1]["before"].items()
    assert effects["notes", 1]["after"] is None
    assert commit["effects"]["schema"] == []


async def test_get_commit_shows_schema_changes(client: Client) -> None:
    made = await apply_ops(client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS))
    commit = await call(client, "get_commit", commit_id=made["commit_id"])
    assert len(commit["effects"]["schema"]) >= 1
    assert len(commit["effects"]["rows"]) == 3
    assert all(e["before"] is None and e["table"] == "notes" for e in commit["effects"]["rows"])
    altered = await apply_ops(client, {"op": "rename_column", "table": "notes", "from": "n", "to": "m"})
    commit = await call(client, "get_commit", commit_id=altered["commit_id"])
    assert len(commit["effects"]["schema"]) == 1
    assert commit["schema_hash_before"] == made["schema_hash"]
    assert commit["schema_hash_after"] == altered["schema_hash"]


async def test_get_commit_shows_lesson_rows_under_the_lessons_table(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    await call(client, "upvote_lesson", id=saved["id"])
    await call(client, "update_lesson", id=saved["id"], problem="Stripe webhooks fail signature checks")
    await call(client, "delete_lesson", id=saved["id"])
    delete, update, vote, save = await history(client)

    def only_effect(commit: dict[str, Any]) -> dict[str, Any]:
        [effect] = commit["effects"]["rows"]
        assert (effect["table"], effect["id"]) == ("lessons", saved["id"])
        return effect

    effect = only_effect(await call(client, "get_commit", commit_id=save["id"]))
    assert effect["before"] is None and effect["after"]["problem"] == STRIPE["problem"]
    effect = only_effect(await call(client, "get_commit", commit_id=vote["id"]))
    assert (effect["before"]["upvotes"], effect["after"]["upvotes"]) == (0, 1)
    effect = only_effect(await call(client, "get_commit", commit_id=update["id"]))
    assert effect["before"]["problem"] == STRIPE["problem"]
    assert effect["after"]["problem"] == "Stripe webhooks fail signature checks"
    effect = only_effect(await call(client, "get_commit", commit_id=delete["id"]))
    assert effect["before"]["problem"] == "Stripe webhooks fail signature checks" and effect["after"] is None


async def test_get_commit_refuses_unknown_and_malformed_ids(client: Client) -> None:
    made = await apply_ops(client, create_table("notes", *NOTES_COLUMNS))
    err = await expect_failure(client, "get_commit", commit_id=unknown_id_like(made["commit_id"]))
    assert err.code == "NOT_FOUND"
    for bad in ("not-an-id", "1' OR '1'='1", "", "x" * 500, made["commit_id"] + "'; --"):
        result = await client.call_tool("get_commit", {"commit_id": bad})
        assert result.is_error, bad
        assert result.content[0].text.startswith("VALIDATION_ERROR: "), (bad, result.content[0].text[:200])


# --- revert -----------------------------------------------------------------------------------

# Each changes the seeded notes table; reverting it must give back exactly the rows and schema.
REVERTIBLE: list[tuple[str, list[dict[str, Any]]]] = [
    ("insert", [insert("notes", {"title": "d", "n": 4}, {"title": "e"})]),
    (
        "update some",
        [{"op": "update", "table": "notes", "where": [cond("n", ">", 1)], "set": {"title": "z"}}],
    ),
    ("update all", [{"op": "update", "table": "notes", "where": [], "set": {"n": None, "done": True}}]),
    ("delete some", [{"op": "delete", "table": "notes", "where": [cond("title", "in", ["a", "c"])]}]),
    ("delete all", [{"op": "delete", "table": "notes", "where": []}]),
    ("add column", [{"op": "add_column", "table": "notes", "column": column("tag", "text", default="t")}]),
    ("drop column", [{"op": "drop_column", "table": "notes", "column": "n"}]),
    ("drop column in the middle", [{"op": "drop_column", "table": "notes", "column": "done"}]),
    ("rename column", [{"op": "rename_column", "table": "notes", "from": "n", "to": "num"}]),
    ("alter type", [{"op": "alter_column_type", "table": "notes", "column": "n", "type": "text"}]),
    ("drop table", [{"op": "drop_table", "table": "notes"}]),
    ("create table", [create_table("more", column("x", "json")), insert("more", {"x": {"a": 1}})]),
    (
        "a bit of everything",
        [
            insert("notes", {"title": "d"}),
            {"op": "update", "table": "notes", "where": [cond("id", "=", 1)], "set": {"n": 100}},
            {"op": "delete", "table": "notes", "where": [cond("id", "=", 3)]},
            {"op": "add_column", "table": "notes", "column": column("extra", "real", default=1.5)},
            {"op": "rename_column", "table": "notes", "from": "title", "to": "name"},
            create_table("more", column("x", "text")),
        ],
    ),
]


@pytest.mark.parametrize(("case", "operations"), REVERTIBLE, ids=[c[0] for c in REVERTIBLE])
async def test_reverting_an_apply_brings_back_the_rows_and_the_schema(
    client: Client, case: str, operations: list[dict[str, Any]]
) -> None:
    seeded = await apply_ops(client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS))
    before = await state(client)
    applied = await apply_ops(client, *operations, message=case)
    assert rows_and_schema(await state(client)) != rows_and_schema(before)

    reverted = await call(client, "revert_commit", commit_id=applied["commit_id"])

    assert set(reverted) >= {"commit_id", "seq", "reverted", "schema_hash", "effects"}
    assert reverted["reverted"] == applied["commit_id"]
    assert reverted["seq"] == applied["seq"] + 1
    assert reverted["schema_hash"] == seeded["schema_hash"]
    assert rows_and_schema(await state(client)) == rows_and_schema(before)
    newest = (await call(client, "history"))["commits"][0]
    assert newest["id"] == reverted["commit_id"]
    assert newest["kind"] == "revert"
    assert newest["parent"] == applied["commit_id"]
    assert newest["schema_hash_before"] == applied["schema_hash"]
    assert newest["schema_hash_after"] == seeded["schema_hash"]
    commit = await call(client, "get_commit", commit_id=reverted["commit_id"])
    assert commit["kind"] == "revert"
    # The reverted commit is still in the history: a revert adds, it never rewrites.
    assert [c["id"] for c in await history(client)][1] == applied["commit_id"]


async def test_reverting_the_first_apply_leaves_the_empty_schema(client: Client) -> None:
    empty = await schema_hash(client)
    applied = await apply_ops(client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS))
    reverted = await call(client, "revert_commit", commit_id=applied["commit_id"])
    assert reverted["schema_hash"] == empty
    assert await call(client, "schema") == {"tables": [], "schema_hash": empty}
    err = await expect_failure(client, "query_rows", table="notes")
    assert err.code == "NOT_FOUND"
    commit = await call(client, "get_commit", commit_id=reverted["commit_id"])
    assert {(e["table"], e["id"]) for e in commit["effects"]["rows"]} == {
        ("notes", 1),
        ("notes", 2),
        ("notes", 3),
    }
    assert all(e["before"] is not None and e["after"] is None for e in commit["effects"]["rows"])
    # The table can be made again, from scratch.
    await apply_ops(client, create_table("notes", column("x", "text")), insert("notes", {"x": "y"}))
    assert [r["x"] for r in await all_rows(client, "notes")] == ["y"]


async def test_reverting_a_revert_redoes_the_change(client: Client) -> None:
    wrong = []
    for n, (case, operations) in enumerate(REVERTIBLE):
        project = f"redo-{n}"
        await apply_ops(
            client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS), project=project
        )
        applied = await apply_ops(client, *operations, project=project)
        after_apply = rows_and_schema(await state(client, project))
        undo = await call(client, "revert_commit", commit_id=applied["commit_id"], project=project)
        redo = await call(client, "revert_commit", commit_id=undo["commit_id"], project=project)
        if redo["reverted"] != undo["commit_id"] or redo["schema_hash"] != applied["schema_hash"]:
            wrong.append((case, redo))
        elif (got := rows_and_schema(await state(client, project))) != after_apply:
            wrong.append((case, {"expected": after_apply["rows"], "got": got["rows"]}))
    assert wrong == []


async def test_a_revert_may_not_undo_what_a_later_commit_built_on(client: Client) -> None:
    """Reverting a table's creation would delete rows a later commit inserted; reverting an insert
    into a table a later commit dropped has nothing left to delete. Both conflict."""
    made = await apply_ops(client, create_table("notes", *NOTES_COLUMNS), project="p1")
    filled = await apply_ops(client, insert("notes", *NOTES_ROWS), project="p1")
    before = await state(client, "p1")
    err = await expect_failure(client, "revert_commit", commit_id=made["commit_id"], project="p1")
    assert err.code == "CONFLICT" and f"#{filled['seq']} apply" in err.message
    assert await state(client, "p1") == before

    await apply_ops(client, create_table("notes", *NOTES_COLUMNS), project="p2")
    filled = await apply_ops(client, insert("notes", *NOTES_ROWS), project="p2")
    dropped = await apply_ops(client, {"op": "drop_table", "table": "notes"}, project="p2")
    before = await state(client, "p2")
    err = await expect_failure(client, "revert_commit", commit_id=filled["commit_id"], project="p2")
    assert err.code == "CONFLICT" and f"#{dropped['seq']} apply" in err.message
    assert await state(client, "p2") == before


async def test_reverting_a_lesson_save_deletes_the_lesson(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    [commit] = await history(client)
    reverted = await call(client, "revert_commit", commit_id=commit["id"])
    assert reverted["reverted"] == commit["id"] and reverted["seq"] == 2
    err = await expect_failure(client, "get_lesson", id=saved["id"])
    assert err.code == "NOT_FOUND"
    assert (await call(client, "recall_lessons", query="stripe webhook signature"))["lessons"] == []
    assert (await call(client, "list_lessons"))["lessons"] == []
    assert await kinds(client) == ["revert", "save"]


async def test_reverting_a_vote_restores_the_counts(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    await call(client, "upvote_lesson", id=saved["id"])
    await call(client, "upvote_lesson", id=saved["id"])
    await call(client, "downvote_lesson", id=saved["id"])
    down, second_up, first_up, _save = await history(client)
    await call(client, "revert_commit", commit_id=down["id"])
    lesson = await call(client, "get_lesson", id=saved["id"])
    assert (lesson["upvotes"], lesson["downvotes"]) == (2, 0)
    # The downvote and its revert changed the downvotes only: the second upvote still reverts.
    undo = await call(client, "revert_commit", commit_id=second_up["id"])
    lesson = await call(client, "get_lesson", id=saved["id"])
    assert (lesson["upvotes"], lesson["downvotes"]) == (1, 0)
    # The first upvote's count was changed again since (by that revert): it conflicts.
    err = await expect_failure(client, "revert_commit", commit_id=first_up["id"])
    assert err.code == "CONFLICT" and f"#{undo['seq']} revert" in err.message


async def test_reverting_a_lesson_delete_brings_it_back_and_recallable(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    await call(client, "upvote_lesson", id=saved["id"])
    before = await call(client, "get_lesson", id=saved["id"])
    await call(client, "delete_lesson", id=saved["id"])
    delete = (await history(client))[0]
    assert delete["kind"] == "delete"
    await call(client, "revert_commit", commit_id=delete["id"])
    back = await call(client, "get_lesson", id=saved["id"])
    for key in (
        "problem",
        "resolution",
        "tags",
        "confidence",
        "upvotes",
        "downvotes",
        "project",
        "created_at",
    ):
        assert back[key] == before[key], key
    got = await call(client, "recall_lessons", query="webhook signature verification failing")
    assert [x["id"] for x in got["lessons"]] == [saved["id"]]
    assert [x["id"] for x in (await call(client, "list_lessons"))["lessons"]] == [saved["id"]]


async def test_reverting_a_merge_restores_the_lesson_as_it_was(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    before = await call(client, "get_lesson", id=saved["id"])
    merged = await call(client, "save_lesson", **{**STRIPE, "tags": ["payments"], "confidence": 0.9})
    assert merged["merged"] is True
    merge = (await history(client))[0]
    assert merge["kind"] == "merge"
    await call(client, "revert_commit", commit_id=merge["id"])
    after = await call(client, "get_lesson", id=saved["id"])
    assert (after["tags"], after["confidence"]) == (before["tags"], before["confidence"])


async def test_reverting_a_lesson_update_restores_its_text(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    await call(client, "update_lesson", id=saved["id"], problem="Something else entirely", tags=["x"])
    update = (await history(client))[0]
    await call(client, "revert_commit", commit_id=update["id"])
    lesson = await call(client, "get_lesson", id=saved["id"])
    assert lesson["problem"] == STRIPE["problem"] and lesson["tags"] == ["stripe"]


# --- revert conflicts -------------------------------------------------------------------------


async def test_a_revert_is_refused_when_a_later_commit_changed_the_same_rows(client: Client) -> None:
    await apply_ops(client, create_table("notes", *NOTES_COLUMNS))
    filled = await apply_ops(client, insert("notes", *NOTES_ROWS))
    edited = await apply_ops(
        client, {"op": "update", "table": "notes", "where": [cond("id", "=", 2)], "set": {"n": 20}}
    )
    before = await state(client)
    err = await expect_failure(client, "revert_commit", commit_id=filled["commit_id"])
    assert err.code == "CONFLICT"
    assert f"#{edited['seq']} apply" in err.message
    assert await state(client) == before


async def test_a_revert_conflict_names_every_later_commit_on_the_same_rows(client: Client) -> None:
    await apply_ops(client, create_table("notes", *NOTES_COLUMNS))
    filled = await apply_ops(client, insert("notes", *NOTES_ROWS))
    first = await apply_ops(client, {"op": "delete", "table": "notes", "where": [cond("id", "=", 1)]})
    unrelated = await apply_ops(client, create_table("other", column("x", "text")))
    second = await apply_ops(
        client, {"op": "update", "table": "notes", "where": [cond("id", "=", 3)], "set": {"title": "C"}}
    )
    err = await expect_failure(client, "revert_commit", commit_id=filled["commit_id"])
    assert err.code == "CONFLICT"
    assert f"#{first['seq']} apply, #{second['seq']} apply" in err.message
    assert f"#{unrelated['seq']}" not in err.message


async def test_a_revert_is_refused_when_a_later_commit_changed_the_same_tables_schema(client: Client) -> None:
    made = await apply_ops(client, create_table("notes", *NOTES_COLUMNS))
    widened = await apply_ops(client, {"op": "add_column", "table": "notes", "column": column("x", "text")})
    before = await state(client)
    err = await expect_failure(client, "revert_commit", commit_id=made["commit_id"])
    assert err.code == "CONFLICT"
    assert f"#{widened['seq']} apply" in err.message
    assert await state(client) == before


async def test_a_lesson_revert_is_refused_when_a_later_commit_changed_the_lesson(client: Client) -> None:
    saved = await call(client, "save_lesson", **STRIPE)
    await call(client, "upvote_lesson", id=saved["id"])
    vote, save = await history(client)
    err = await expect_failure(client, "revert_commit", commit_id=save["id"])
    assert err.code == "CONFLICT"
    assert f"#{vote['seq']} vote" in err.message
    assert (await call(client, "get_lesson", id=saved["id"]))["upvotes"] == 1
    assert len(await history(client)) == 2


async def test_a_later_vote_does_not_block_reverting_an_edit_of_the_text(client: Client) -> None:
    """A vote changes the counts, not the text: the edit before it reverts, and the vote stays.
    A later edit of the same text does block it, named as history numbers it (#seq)."""
    saved = await call(client, "save_lesson", **STRIPE)
    await call(client, "update_lesson", id=saved["id"], resolution="A bad edit", tags=["oops"])
    edit = (await history(client))[0]
    await call(client, "upvote_lesson", id=saved["id"])
    reverted = await call(client, "revert_commit", commit_id=edit["id"])
    lesson = await call(client, "get_lesson", id=saved["id"])
    assert (lesson["resolution"], lesson["tags"], lesson["upvotes"]) == (STRIPE["resolution"], ["stripe"], 1)
    got = await call(client, "recall_lessons", query="raw request body re-serialising JSON")
    assert [x["id"] for x in got["lessons"]][:1] == [saved["id"]]
    # Reverting the revert redoes the edit, also past the vote; a later edit of the text blocks.
    await call(client, "revert_commit", commit_id=f"#{reverted['seq']}")
    assert (await call(client, "get_lesson", id=saved["id"]))["resolution"] == "A bad edit"
    await call(client, "update_lesson", id=saved["id"], resolution="Another edit")
    later = (await history(client))[0]
    err = await expect_failure(client, "revert_commit", commit_id=edit["id"])
    assert err.code == "CONFLICT" and f"#{later['seq']} update" in err.message
    assert f"#{edit['seq']} cannot be reverted" in err.message
    assert (await call(client, "get_commit", commit_id=f"#{later['seq']}"))["id"] == later["id"]


async def test_reverting_the_same_commit_twice_conflicts_with_the_first_revert(client: Client) -> None:
    await apply_ops(client, create_table("notes", *NOTES_COLUMNS), insert("notes", *NOTES_ROWS))
    edited = await apply_ops(client, {"op": "update", "table": "notes", "where": [], "set": {"n": 0}})
    undo = await call(client, "revert_commit", commit_id=edited["commit_id"])
    before = await state(client)
    err = await expect_failure(client, "revert_commit", commit_id=edited["commit_id"])
    assert err.code == "CONFLICT"
    assert f"#{undo['seq']} revert" in err.message
    assert await state(client) == before


async def test_unrelated_later_commits_do_not_block_a_revert(client: Client) -> None:
    await apply_ops(client, create_table("notes", *NOTES_COLUMNS))
    first_row = await apply_ops(client, insert("notes", {"title": "first"}))
    await apply_ops(client, insert("notes", {"title": "second"}))  # same table, other row
    await apply_ops(client, create_table("other", column("x", "text")), insert("other", {"x": "kept"}))
    a = await call(client, "save_lesson", **STRIPE)
    b = await call(client, "save_lesson", **DNS)
    await call(client, "upvote_lesson", id=b["id"])

    reverted = await call(client, "revert_commit", commit_id=first_row["commit_id"])
    assert reverted["seq"] == 8
    assert [r["title"] for r in await all_rows(client, "notes")] == ["second"]
    assert await all_rows(client, "other") == [{"id": 1, "x": "kept"}]

    a_save = (await history(client, target=a["id"]))[0]
    await call(client, "revert_commit", commit_id=a_save["id"])
    assert [x["id"] for x in (await call(client, "list_lessons"))["lessons"]] == [b["id"]]
    assert (await call(client, "get_lesson", id=b["id"]))["upvotes"] == 1


async def test_revert_commit_refuses_unknown_and_malformed_ids(client: Client) -> None:
    made = await apply_ops(client, create_table("notes", *NOTES_COLUMNS))
    before = await state(client)
    err = await expect_failure(client, "revert_commit", commit_id=unknown_id_like(made["commit_id"]))
    assert err.code == "NOT_FOUND"
    for bad in ("not-an-id", "1' OR '1'='1", "", "x" * 500):
        result = await client.call_tool("revert_commit", {"commit_id": bad})
        assert result.is_error and result.content[0].text.startswith("VALIDATION_ERROR: "), bad
    assert await state(client) == before


# --- long histories ---------------------------------------------------------------------------


def snapshot_seqs(backend: str, tmp_path: Path, request: pytest.FixtureRequest, project: str) -> list[int]:
    """Sequence numbers of the stored snapshots of a project, read straight from the database
    (the ``snapshots`` table of ``stores/sqlite/db.py`` and ``stores/postgres/db.py``)."""
    if backend == "local":
        from stores.sqlite.db import connect

        conn = connect(tmp_path / "lore.db")  # where conftest's open_store puts the local store
        try:
            rows = conn.execute(
                "SELECT seq, length(state) FROM snapshots WHERE project = ? ORDER BY seq", (project,)
            ).fetchall()
        finally:
            conn.close()
    else:
        import psycopg

        with psycopg.connect(request.getfixturevalue("postgres_url"), autocommit=True) as pg:
            pg.execute("SELECT set_config('lore.org', 'local', false)")
            rows = pg.execute(
                "SELECT seq, length(state::text) FROM snapshots WHERE project = %s ORDER BY seq", (project,)
            ).fetchall()
    assert all(size > 2 for _, size in rows), rows
    return [seq for seq, _ in rows]


async def test_a_history_past_a_hundred_commits_stays_whole_and_revertible(
    client: Client, backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Snapshots are taken every 100 commits; nothing about them may show in the tools."""
    made = await apply_ops(client, create_table("t", column("x", "integer")))
    base = made["schema_hash"]
    last = made
    for i in range(104):
        last = await call(client, "apply", plan=make_plan(base, insert("t", {"x": i}), message=f"row {i}"))
        base = last["schema_hash"]
    assert last["seq"] == 105
    assert snapshot_seqs(backend, tmp_path, request, "default") == [100]
    commits = await history(client, limit=50)
    assert [c["seq"] for c in commits] == list(range(105, 0, -1))
    assert all(c["parent"] == commits[n + 1]["id"] for n, c in enumerate(commits[:-1]))
    assert table_of(await call(client, "schema"), "t")["row_count"] == 104
    # A commit from before the snapshot and one after can both still be undone.
    early = commits[-3]  # inserted x=1, id 2
    reverted = await call(client, "revert_commit", commit_id=early["id"])
    assert reverted["seq"] == 106
    await call(client, "revert_commit", commit_id=last["commit_id"])
    assert await ids_of(client, "t", where=[cond("x", "in", [1, 103])]) == []
    assert table_of(await call(client, "schema"), "t")["row_count"] == 102


async def test_concurrent_lesson_changes_and_applies_form_one_unbroken_chain(client: Client) -> None:
    made = await apply_ops(client, create_table("t", column("x", "integer")))
    first = await call(client, "save_lesson", **STRIPE)
    topics = ["Kafka consumer lag", "Nginx 502 after deploy", "Terraform state lock", "Celery double runs"]
    results = await asyncio.gather(
        *(
            call(client, "apply", plan=make_plan(made["schema_hash"], insert("t", {"x": i})))
            for i in range(6)
        ),
        *(
            call(client, "save_lesson", problem=f"{t} in production", resolution=f"Fix for {t}")
            for t in topics
        ),
        *(call(client, "upvote_lesson", id=first["id"]) for _ in range(4)),
    )
    assert len(results) == 14
    commits = await history(client, limit=100)
    assert [c["seq"] for c in commits] == list(range(16, 0, -1))
    assert all(c["parent"] == commits[n + 1]["id"] for n, c in enumerate(commits[:-1]))
    assert sorted(c["kind"] for c in commits[:14]) == ["apply"] * 6 + ["save"] * 4 + ["vote"] * 4
    assert (await call(client, "get_lesson", id=first["id"]))["upvotes"] == 4
    assert await ids_of(client, "t") == [1, 2, 3, 4, 5, 6]


# --- the same order on both backends -----------------------------------------------------------

# Made in this order; Postgres jsonb keeps object keys shortest first ("b", "aa", "zz"), SQLite
# JSON text in the order written: a revert lists the tables it drops or restores by name.
TABLES_OUT_OF_ORDER = ["zz", "b", "aa"]


async def test_reverting_an_apply_that_made_tables_drops_them_in_name_order(client: Client) -> None:
    made = await apply_ops(client, *(create_table(t, column("x", "text")) for t in TABLES_OUT_OF_ORDER))
    reverted = await call(client, "revert_commit", commit_id=made["commit_id"])
    assert reverted["effects"]["schema"] == [
        {"op": "drop_table", "table": t} for t in sorted(TABLES_OUT_OF_ORDER)
    ]


async def test_reverting_an_apply_that_dropped_tables_restores_them_in_name_order(client: Client) -> None:
    await apply_ops(client, *(create_table(t, column("x", "text")) for t in TABLES_OUT_OF_ORDER))
    dropped = await apply_ops(client, *({"op": "drop_table", "table": t} for t in TABLES_OUT_OF_ORDER))
    reverted = await call(client, "revert_commit", commit_id=dropped["commit_id"])
    assert reverted["effects"]["schema"] == [
        {"op": "restore_table", "table": t} for t in sorted(TABLES_OUT_OF_ORDER)
    ]


async def test_a_history_page_can_carry_each_commit_in_full(client: Client) -> None:
    """Issue 35: a lesson's page reads its commits with their diffs in one call, not eleven."""
    saved = await call(client, "save_lesson", problem="Cron runs twice", resolution="Use a lock file")
    await call(client, "upvote_lesson", id=saved["id"])
    await call(client, "update_lesson", id=saved["id"], resolution="Use flock on a lock file")
    page = await call(client, "history", target=saved["id"], limit=10, effects=True)
    assert [c["kind"] for c in page["commits"]] == ["update", "vote", "save"]
    for commit in page["commits"]:
        assert commit == await call(client, "get_commit", commit_id=commit["id"])
    plain = await call(client, "history", target=saved["id"])
    assert all("effects" not in c for c in plain["commits"])
    with pytest.raises(ToolFailed) as refused:
        await call(client, "history", limit=21, effects=True)
    assert refused.value.code == "VALIDATION_ERROR" and "at most 20" in str(refused.value)
