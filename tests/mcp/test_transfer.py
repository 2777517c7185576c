"""Export and import: JSON Lines files from the CLI, and export_lessons / import_lessons over MCP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.transfer import Transfer
from stores import open_local_store
from tests.support.clients import connected
from tests.support.corpus import CORPUS, QUERIES
from tests.support.helpers import ToolFailed, call

SECRET = "ghp_" + "a1B2" * 9


async def load_corpus(client: Client, project: str | None = None, n: int = 30) -> dict[str, str]:
    ids = {}
    for lesson in CORPUS[:n]:
        saved = await call(
            client,
            "save_lesson",
            problem=lesson.problem,
            resolution=lesson.resolution,
            tags=list(lesson.tags),
            **({"project": project} if project else {}),
        )
        ids[lesson.key] = saved["id"]
    return ids


async def recall_all(client: Client, keys: list[str]) -> list[list[tuple[str, float]]]:
    results = []
    for key in keys:
        hits = (await call(client, "recall_lessons", query=QUERIES[key], limit=5))["lessons"]
        results.append([(h["id"], round(h["score"], 4)) for h in hits])
    return results


async def test_export_then_import_into_a_fresh_store_recalls_the_same(
    client: Client, embedder: Embedder, tmp_path: Path
) -> None:
    ids = await load_corpus(client)
    first = next(iter(ids.values()))
    await call(client, "upvote_lesson", id=first)
    await call(client, "upvote_lesson", id=first)
    keys = [k for k in QUERIES if k in ids][:8]
    before = await recall_all(client, keys)

    pages: list[dict[str, Any]] = []
    cursor = None
    while True:
        page = await call(client, "export_lessons", limit=7, **({"cursor": cursor} if cursor else {}))
        pages.extend(page["lessons"])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(p["id"] for p in pages) == sorted(ids.values())

    fresh = open_local_store(tmp_path / "fresh.db")
    try:
        async with connected(
            build_server(LessonService(fresh, embedder, default_project="default"))
        ) as other:
            for start in range(0, len(pages), 10):
                result = await call(other, "import_lessons", lessons=pages[start : start + 10])
                assert result["added"] == len(pages[start : start + 10]) and result["skipped"] == 0
            again = await call(other, "import_lessons", lessons=pages[:10])
            assert (again["added"], again["skipped"]) == (0, 10)
            assert await recall_all(other, keys) == before
            assert (await call(other, "get_lesson", id=first))["upvotes"] == 2
            history = (await call(other, "history"))["commits"]
            assert [c["kind"] for c in history] == ["import"] * 3
            # An import is a commit like any other: reverting it removes what it added.
            await call(other, "revert_commit", commit_id=history[0]["id"])
            assert len((await call(other, "list_lessons", limit=100))["lessons"]) == 20
    finally:
        fresh.close()


async def test_import_lessons_redacts_and_refuses_bad_batches_whole(client: Client) -> None:
    lesson = {
        "id": "01JABCDEFGHJKMNPQRSTVWXYZ0",
        "problem": "CI cannot clone the private repo",
        "resolution": f"use the token {SECRET} in the clone URL",
    }
    result = await call(client, "import_lessons", lessons=[lesson])
    assert result == {"added": 1, "skipped": 0, "merged": 0, "redacted": ["github_token"]}
    stored = await call(client, "get_lesson", id=lesson["id"])
    assert SECRET not in stored["resolution"] and "[REDACTED:github_token]" in stored["resolution"]

    good = {**lesson, "id": "01JABCDEFGHJKMNPQRSTVWXYZ1"}
    for bad in (
        {**lesson, "id": "not-a-ulid"},
        {**lesson, "id": "01JABCDEFGHJKMNPQRSTVWXYZ2", "problem": ""},
        {**lesson, "id": "01JABCDEFGHJKMNPQRSTVWXYZ3", "confidence": 2},
        {**lesson, "id": "01JABCDEFGHJKMNPQRSTVWXYZ4", "upvotes": -1},
    ):
        with pytest.raises(ToolFailed) as err:
            await call(client, "import_lessons", lessons=[good, bad])
        assert err.value.code == "VALIDATION_ERROR"
    with pytest.raises(ToolFailed) as err:
        await call(
            client,
            "import_lessons",
            lessons=[{**good, "id": f"01JABCDEFGHJKMNPQRSTVW{i:04d}"} for i in range(101)],
        )
    assert err.value.code == "VALIDATION_ERROR"
    with pytest.raises(ToolFailed):
        await call(client, "get_lesson", id=good["id"])
    assert len((await call(client, "history"))["commits"]) == 1


def lore(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lore_mcp", *args], env=env, capture_output=True, text=True, timeout=180
    )


def cli_env(db: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update(LORE_DB_PATH=str(db), HF_HUB_OFFLINE="1")
    return env


async def test_the_cli_round_trips_a_file_and_reports_bad_lines(
    store: Any, embedder: Embedder, tmp_path: Path
) -> None:
    service = LessonService(store, embedder, default_project="default")
    async with connected(build_server(service)) as client:
        await load_corpus(client, n=12)
        await load_corpus(client, project="other", n=12)
    transfer = Transfer(service)
    export = tmp_path / "export.jsonl"
    with export.open("w") as f:
        for line in transfer.export_lines("local", None, with_history=True):
            f.write(json.dumps(line) + "\n")
    lines = export.read_text().splitlines()
    kinds = [json.loads(line)["type"] for line in lines]
    assert kinds.count("lesson") == 24 and kinds.count("commit") == 24

    target = tmp_path / "target.db"
    env = cli_env(target)
    first = lore(env, "import", str(export))
    assert first.returncode == 0, first.stderr
    assert "imported 24 lessons, skipped 0" in first.stderr and "24 commit lines not replayed" in first.stderr
    # stderr is a pipe: one line per batch (a batch per project here), with the total
    assert "lore-memory: import: 12/24 lessons\nlore-memory: import: 24/24 lessons\n" in first.stderr
    second = lore(env, "import", str(export))
    assert "imported 0 lessons, skipped 24" in second.stderr

    broken = tmp_path / "broken.jsonl"
    first_lesson = json.loads(lines[0])
    # Another lesson (it adds a detail), so it is imported beside the first, not merged into it.
    extra = {
        **first_lesson,
        "id": "01JABCDEFGHJKMNPQRSTVWXYZ9",
        "problem": first_lesson["problem"] + " on ARM",
    }
    broken.write_text(
        "\n".join([lines[0], "{not json", json.dumps({"type": "lesson", "id": "x"}), json.dumps(extra), "[]"])
        + "\n"
    )
    strict = lore(cli_env(tmp_path / "strict.db"), "import", "--strict", str(broken))
    assert strict.returncode == 1
    for number in (2, 3, 5):
        assert f"line {number}:" in strict.stderr
    assert "nothing was imported" in strict.stderr
    assert not (tmp_path / "strict.db").exists() or _count(tmp_path / "strict.db") == 0

    lenient = lore(cli_env(tmp_path / "lenient.db"), "import", "--project", "moved", str(broken))
    assert lenient.returncode == 1  # something was skipped: say so to scripts
    assert "imported 2 lessons" in lenient.stderr and "3 malformed lines skipped" in lenient.stderr
    assert _count(tmp_path / "lenient.db", project="moved") == 2

    out = tmp_path / "again.jsonl"
    exported = lore(env, "export", "--project", "other", "--out", str(out))
    assert exported.returncode == 0 and "exported 12 lessons" in exported.stderr
    assert {json.loads(line)["project"] for line in out.read_text().splitlines()} == {"other"}


def _count(db: Path, project: str = "default") -> int:
    s = open_local_store(db)
    try:
        return s.count("local", project)
    finally:
        s.close()


async def test_the_cli_reads_a_file_with_a_byte_order_mark_and_says_it_resumes(
    store: Any, embedder: Embedder, tmp_path: Path
) -> None:
    """Issue 21: a BOM at the start of the file lost its first line; and the CLI import commits
    a batch at a time, which it now says, with how to resume."""
    service = LessonService(store, embedder, default_project="default")
    async with connected(build_server(service)) as client:
        await load_corpus(client, n=3)
    lines = [json.dumps(line) for line in Transfer(service).export_lines("local", None, with_history=False)]
    marked = tmp_path / "marked.jsonl"
    marked.write_bytes(b"\xef\xbb\xbf" + ("\n".join(lines) + "\n").encode())
    env = cli_env(tmp_path / "target.db")
    done = lore(env, "import", str(marked))
    assert done.returncode == 0, done.stderr
    assert "imported 3 lessons, skipped 0 already present, 0 malformed lines skipped" in done.stderr
    assert "run the same command again: lessons already imported are skipped" in done.stderr
    assert "each its own transaction and `import` commit" in done.stderr
