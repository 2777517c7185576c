"""`lore-memory import --from server-memory|mcp-memory-service`: files the real servers wrote
(tests/fixtures, made as tests/fixtures/make_fixtures.md says) imported through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lore_mcp.app import build_server
from lore_mcp.cli.importers import convert, lesson_lines
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lesson_input import ULID_PATTERN
from lore_mcp.services.lessons import LessonService
from stores import open_local_store
from tests.support.clients import connected
from tests.support.helpers import call

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SERVER_MEMORY = FIXTURES / "server-memory.jsonl"
MCP_MEMORY_SERVICE = FIXTURES / "mcp-memory-service.json"


def lore(db: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update(LORE_DB_PATH=str(db), HF_HUB_OFFLINE="1")
    return subprocess.run(
        [sys.executable, "-m", "lore_mcp", "import", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
    )


def observations() -> int:
    lines = [json.loads(line) for line in SERVER_MEMORY.read_text().splitlines() if line.strip()]
    return sum(len(line["observations"]) for line in lines if line["type"] == "entity")


def memories() -> list[dict]:
    return json.loads(MCP_MEMORY_SERVICE.read_text())["memories"]


def test_ids_are_ulids_derived_from_the_content() -> None:
    for source, path in (("server-memory", SERVER_MEMORY), ("mcp-memory-service", MCP_MEMORY_SERVICE)):
        first = lesson_lines(source, path.read_text())
        assert first == lesson_lines(source, path.read_text())
        ids = [json.loads(line)["id"] for line in first]
        assert len(set(ids)) == len(ids) > 0
        assert all(ULID_PATTERN.match(i) for i in ids)
    with pytest.raises(ValueError, match="line 1: not JSON"):
        lesson_lines("server-memory", "{oops")


async def test_a_server_memory_graph_imports_once_and_recalls_by_entity(
    embedder: Embedder, tmp_path: Path
) -> None:
    db = tmp_path / "lore.db"
    n = observations()
    first = lore(db, "--from", "server-memory", str(SERVER_MEMORY))
    assert first.returncode == 0, first.stderr
    assert f"imported {n} lessons, skipped 0 already present, 0 malformed lines skipped" in first.stderr
    second = lore(db, "--from", "server-memory", str(SERVER_MEMORY))
    assert second.returncode == 0, second.stderr
    assert f"imported 0 lessons, skipped {n} already present" in second.stderr

    store = open_local_store(db)
    try:
        async with connected(
            build_server(LessonService(store, embedder, default_project="default"))
        ) as client:
            hits = (
                await call(
                    client,
                    "recall_lessons",
                    query="502 errors from the load balancer",
                    tags=["payments-api"],
                    limit=3,
                    verbose=True,
                )
            )["lessons"]
            top = hits[0]
            assert "--keep-alive 75" in top["resolution"]
            assert top["problem"] == "payments-api (service)"
            assert set(top["tags"]) == {"service", "payments-api"}
            assert top["source"] == "server-memory"
            assert "payments-api depends on postgres-primary" in top["context"]
            people = (await call(client, "list_lessons", tags=["person"]))["lessons"]
            assert [(p["problem"], p["resolution"]) for p in people] == [
                ("Alice (person)", "On-call owner of payments-api")
            ]
            assert len((await call(client, "list_lessons", limit=100))["lessons"]) == n
    finally:
        store.close()


async def test_an_mcp_memory_service_export_imports_once_and_keeps_tags_and_dates(
    embedder: Embedder, tmp_path: Path
) -> None:
    db = tmp_path / "lore.db"
    n = len(memories())
    first = lore(db, "--from", "mcp-memory-service", "--project", "moved", str(MCP_MEMORY_SERVICE))
    assert first.returncode == 0, first.stderr
    assert f"imported {n} lessons, skipped 0 already present, 0 malformed lines skipped" in first.stderr
    second = lore(db, "--from", "mcp-memory-service", "--project", "moved", str(MCP_MEMORY_SERVICE))
    assert f"imported 0 lessons, skipped {n} already present" in second.stderr

    decision = next(m for m in memories() if m["memory_type"] == "decision")
    store = open_local_store(db)
    try:
        async with connected(build_server(LessonService(store, embedder, default_project="moved"))) as client:
            hits = (
                await call(
                    client,
                    "recall_lessons",
                    query="too many Postgres connections",
                    tags=["decision"],
                    verbose=True,
                )
            )["lessons"]
            assert [h["resolution"] for h in hits] == [decision["content"]]
            hit = hits[0]
            assert set(hit["tags"]) == {*decision["tags"], "decision"}
            assert hit["source"] == "mcp-memory-service"
            assert hit["meta"]["content_hash"] == decision["content_hash"]
            created = datetime.fromisoformat(hit["created_at"])
            assert abs(created - datetime.fromtimestamp(decision["created_at"], UTC)).total_seconds() < 0.001
            listed = (await call(client, "list_lessons", limit=100, verbose=True))["lessons"]
            assert len(listed) == n
            assert all("untagged" not in lesson["tags"] for lesson in listed)
            assert {"note"} in [set(lesson["tags"]) for lesson in listed]  # untagged, typed "note"
    finally:
        store.close()


def test_malformed_files_are_reported_by_line_or_memory_without_a_traceback(tmp_path: Path) -> None:
    graph = SERVER_MEMORY.read_text().splitlines()
    broken = tmp_path / "broken.jsonl"
    broken.write_text(
        "\n".join(
            [graph[0], "{not json", json.dumps({"type": "relation", "from": "a"}), '{"type": "edge"}', "[]"]
        )
    )
    strict = lore(tmp_path / "strict.db", "--from", "server-memory", "--strict", str(broken))
    assert strict.returncode == 1 and "Traceback" not in strict.stderr
    for number in (2, 3, 4, 5):
        assert f"lore-memory: line {number}: " in strict.stderr
    assert "not JSON" in strict.stderr and "unknown type 'edge'" in strict.stderr
    assert "nothing was imported" in strict.stderr

    lenient = lore(tmp_path / "lenient.db", "--from", "server-memory", str(broken))
    assert lenient.returncode == 1 and "Traceback" not in lenient.stderr
    kept = len(json.loads(graph[0])["observations"])
    assert f"imported {kept} lessons" in lenient.stderr and "4 malformed lines skipped" in lenient.stderr

    not_json = tmp_path / "export.json"
    not_json.write_text('{"memories": [\n{"content": "x"},\n')
    bad = lore(tmp_path / "bad.db", "--from", "mcp-memory-service", str(not_json))
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "lore-memory: line 3: not JSON" in bad.stderr and "imported 0 lessons" in bad.stderr

    records = tmp_path / "records.json"
    records.write_text(
        json.dumps({"memories": [memories()[0], {"content": ""}, {"content": "x", "created_at": "soon"}, 7]})
    )
    some = lore(tmp_path / "some.db", "--from", "mcp-memory-service", str(records))
    assert some.returncode == 1 and "Traceback" not in some.stderr
    assert "memory 2: 'content' must be non-empty text" in some.stderr
    assert "memory 3: timestamp 'soon' is not ISO 8601" in some.stderr
    assert "memory 4: expected a JSON object" in some.stderr
    assert "imported 1 lessons" in some.stderr

    unknown = lore(tmp_path / "x.db", "--from", "mem0", str(records))
    assert unknown.returncode == 2 and "invalid choice: 'mem0'" in unknown.stderr


def test_conversion_keeps_going_past_a_bad_record() -> None:
    converted = convert("mcp-memory-service", json.dumps([{"content": "ok", "tags": "a, b"}, {"tags": []}]))
    assert converted.errors == ["memory 2: 'content' must be non-empty text"]
    assert json.loads(converted.lines[0])["tags"] == ["a", "b"]
