"""One backend of the property tests: a server on a seeded store, a fingerprint of everything it
holds, and its raw row counts (for ``tests/stores/properties``)."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlean
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.services.keys import KeyService
from lore_mcp.services.lessons import LessonService
from lore_mcp.transport.server import LoreServer
from stores.engine.lessons import Scope
from stores.engine.plans import schema_hash
from stores.engine.structured import describe_schema
from tests.support.fuzz_settings import ALL_GROUPS, ORG, hash_embedder
from tests.support.fuzz_values import PROJECTS, SEED_COLUMNS, SEED_LESSONS, SEED_ROWS, SEED_TABLE
from tests.support.schema_strategies import (
    Ref,
)

# --- one backend: a server on a seeded store, and a fingerprint of everything it holds ----------


@dataclass(frozen=True)
class Complaint:
    """A broken property: ``signature`` names its kind (tool, backend, code, cause), so a long
    run can count distinct failures; ``text`` says what happened."""

    signature: str
    text: str


@dataclass
class Outcome:
    """What one call came back with."""

    kind: str  # "ok" or the error code
    text: str
    result: Any
    seconds: float
    logged: list[str] = field(default_factory=list)


@dataclass
class Side:
    """One backend under test: its store, a server on it, and what the seed left there."""

    name: str
    open: Callable[[], Any]
    raw_counts: Callable[[], tuple[int, ...]]
    store: Any = None
    server: LoreServer | None = None
    seeded: Any = None
    current: Any = None
    known: dict[str, Any] = field(default_factory=dict)

    def rebuild(self) -> None:
        """A fresh, empty store with a server of every tool group on it."""
        self.store = self.open()
        service = LessonService(self.store, hash_embedder(), default_project="default")
        keys = KeyService(self.store.keys)
        keys.init_org(ORG)
        self.server = build_server(service, keys=keys, tools=ALL_GROUPS)

    def fingerprint(self) -> Any:
        """Everything a client could observe, as one comparable value, and what refs resolve to."""
        store = self.store
        with store.transaction(Scope(org=ORG, project="default"), write=False) as tx:
            projects = sorted({*tx.org_projects(), *PROJECTS})
        lessons, commits, tables, hashes = [], [], [], {}
        for project in projects:
            scope = Scope(org=ORG, project=project)
            cursor = None
            while True:
                page = store.list(scope, (), 100, cursor)
                lessons += [_lesson_print(project, lesson) for lesson in page.lessons]
                cursor = page.next_cursor
                if cursor is None:
                    break
            with store.transaction(scope, write=False) as tx:
                described = describe_schema(tx)
                hashes[project] = described["schema_hash"]
                for name, table in sorted(tx.tables().items()):
                    rows = json.dumps(tx.rows(name), sort_keys=True, default=str)
                    tables.append((project, name, table.next_id, repr(table.columns), rows))
                commits += [(project, c.seq, c.id, c.kind) for c in reversed(tx.commits(None, 1000, None))]
        keys = [(k.id, k.name, k.project, k.root, k.revoked_at) for k in store.keys.list_keys(ORG)]
        self.known = {
            "lesson": sorted(lesson[1] for lesson in lessons),
            "commit": [c[2] for c in commits],
            "key": [k[0] for k in keys],
            "schema_hash": hashes,
        }
        return (tuple(lessons), tuple(commits), tuple(tables), tuple(keys), self.raw_counts())

    def lookup(self, project: Any) -> Callable[[Ref], Any]:
        """How refs of a call on ``project`` resolve on this backend."""

        def resolve_ref(ref: Ref) -> Any:
            if ref.kind == "schema_hash":
                wanted = project if isinstance(project, str) else "default"
                return self.known["schema_hash"].get(wanted, schema_hash({})) + ref.suffix
            found = self.known[ref.kind]
            value = found[ref.index % len(found)] if found else "01ARZ3NDEKTSV4RRFFQ69G5FAV"
            return value + ref.suffix

        return resolve_ref


def _lesson_print(project: str, lesson: Any) -> tuple[Any, ...]:
    return (
        project,
        lesson.id,
        lesson.problem,
        lesson.resolution,
        lesson.context,
        lesson.tags,
        lesson.confidence,
        lesson.source,
        lesson.upvotes,
        lesson.downvotes,
        lesson.updated_at,
        lesson.expires_at,
        json.dumps(lesson.meta, sort_keys=True, default=str),
    )


async def seed(client: Client) -> None:
    """The state every example starts from, made through the tools themselves."""
    saved = [await _ok(client, "save_lesson", lesson) for lesson in SEED_LESSONS]
    await _ok(
        client, "save_lesson", {**SEED_LESSONS[0], "problem": "Kafka consumer lags", "project": "alpha"}
    )
    await _ok(client, "upvote_lesson", {"id": saved[0]["id"]})
    columns = [{"name": n, "type": t} for n, t in SEED_COLUMNS.items()]
    kv = [{"name": "k", "type": "text", "nullable": False, "default": ""}, {"name": "v", "type": "json"}]
    base = (await _ok(client, "schema", {}))["schema_hash"]
    operations = [
        {"op": "create_table", "table": SEED_TABLE, "columns": columns},
        {"op": "insert", "table": SEED_TABLE, "rows": SEED_ROWS},
        {"op": "create_table", "table": "kv", "columns": kv},
        {"op": "insert", "table": "kv", "rows": [{"k": "a", "v": 1}, {"k": "b", "v": "1"}]},
    ]
    await _ok(
        client, "apply", {"plan": {"baseSchemaHash": base, "message": "seed", "operations": operations}}
    )
    await _ok(client, "create_key", {"name": "alpha agent", "project": "alpha"})


async def _ok(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, f"seeding failed at {tool}: {result.content[0].text}"
    return result.structured_content


def _sqlite_counts(path: Path) -> Callable[[], tuple[int, ...]]:
    def counts() -> tuple[int, ...]:
        # sqlean, the store's own SQLite: a second SQLite library in this process would take the
        # WAL index for its own, truncate it under the store's live mapping, and crash with SIGBUS.
        with contextlib.closing(sqlean.connect(f"file:{path}?mode=ro", uri=True)) as conn:
            return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in RAW_TABLES)

    return counts


def _postgres_counts(url: str) -> Callable[[], tuple[int, ...]]:
    import psycopg

    def counts() -> tuple[int, ...]:
        with psycopg.connect(url, autocommit=True) as conn:
            return tuple(conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in RAW_TABLES)

    return counts


# Every lesson (expired ones too, which listings leave out), row, table, commit and key.
RAW_TABLES = ("lessons", "mem_tables", "mem_rows", "commits", "api_keys", "orgs")
