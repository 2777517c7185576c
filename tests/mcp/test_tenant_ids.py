"""Lesson ids are per project: no tenant learns of, or depends on, another's ids (issue 12, item 5).

A lesson's key is (org, project, id). Importing into a project looks only at that project:
an id another org or project holds imports as a lesson of its own, and nobody can block an
id's later import by taking it first. Subscriptions and completions of lesson ids reach
only the project the caller's key reads.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import ResourceTemplateReference
from sqlalchemy.engine import make_url

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from stores import Store, open_local_store, open_postgres_store
from stores.engine import history
from stores.engine.lesson_images import lesson_image
from stores.engine.lessons import LessonDraft, RecallQuery, Scope
from stores.errors import NotFoundError
from tests.support.clients import connected, no_deprecation_warnings
from tests.support.helpers import ToolFailed, call, vector
from tests.support.team import team_server

TAKEN = "01JTAKENBYANYTHNG000000000"  # one id that several orgs and projects hold in these tests
LESSON_URI = f"lore://lessons/{TAKEN}"


def lesson(problem: str, lesson_id: str = TAKEN, **fields: Any) -> dict[str, Any]:
    """A lesson as import_lessons takes it."""
    return {"id": lesson_id, "problem": problem, "resolution": f"the fix for {problem}", **fields}


@asynccontextmanager
async def org_client(store: Store, embedder: Embedder, org: str) -> AsyncIterator[Client]:
    """An in-process client of a server for ``org`` (as ``LORE_ORG`` picks it over stdio)."""
    async with connected(
        build_server(LessonService(store, embedder, default_project="default", org=org))
    ) as c:
        yield c


# -- import never reveals or depends on what others hold -----------------------------------


async def test_an_id_another_org_holds_imports_and_their_lesson_is_untouched(
    store: Store, embedder: Embedder
) -> None:
    async with org_client(store, embedder, "acme") as acme, org_client(store, embedder, "globex") as globex:
        first = await call(acme, "import_lessons", lessons=[lesson("acme's flaky deploy")])
        assert (first["added"], first["skipped"]) == (1, 0)

        # globex cannot tell that acme holds the id: its import adds, as for any new id.
        taken = await call(globex, "import_lessons", lessons=[lesson("globex's cache stampede")])
        assert (taken["added"], taken["skipped"]) == (1, 0)

        assert (await call(acme, "get_lesson", id=TAKEN))["problem"] == "acme's flaky deploy"
        assert (await call(globex, "get_lesson", id=TAKEN))["problem"] == "globex's cache stampede"
        again = await call(globex, "import_lessons", lessons=[lesson("globex's cache stampede")])
        assert (again["added"], again["skipped"]) == (0, 1)  # its own id: idempotent as ever


async def test_taking_an_id_first_does_not_block_its_owners_later_import(
    store: Store, embedder: Embedder
) -> None:
    async with org_client(store, embedder, "acme") as acme, org_client(store, embedder, "mallory") as mallory:
        await call(mallory, "import_lessons", lessons=[lesson("squatted", confidence=0.1)])
        owned = await call(acme, "import_lessons", lessons=[lesson("acme's real lesson", confidence=0.9)])
        assert (owned["added"], owned["skipped"]) == (1, 0)
        stored = await call(acme, "get_lesson", id=TAKEN)
        assert (stored["problem"], stored["confidence"]) == ("acme's real lesson", 0.9)
        assert (await call(mallory, "get_lesson", id=TAKEN))["problem"] == "squatted"


async def test_exporting_a_project_and_importing_it_into_another_adds_every_lesson_with_its_id(
    client: Client,
) -> None:
    saved = [
        await call(client, "save_lesson", problem=p, resolution=f"fix {p}", project="alpha", tags=["ops"])
        for p in ("nginx returns 502 after a deploy", "cron runs twice on DST change", "pip resolver loops")
    ]
    exported = (await call(client, "export_lessons", project="alpha"))["lessons"]
    assert len(exported) == 3

    result = await call(client, "import_lessons", lessons=exported, project="beta")
    assert (result["added"], result["skipped"]) == (3, 0)
    beta = (await call(client, "list_lessons", project="beta", limit=100))["lessons"]
    assert sorted(x["id"] for x in beta) == sorted(s["id"] for s in saved)
    hits = (await call(client, "recall_lessons", query="nginx 502 after deploy", project="beta"))["lessons"]
    assert hits[0]["id"] == saved[0]["id"]

    again = await call(client, "import_lessons", lessons=exported, project="beta")
    assert (again["added"], again["skipped"]) == (0, 3)
    assert len((await call(client, "list_lessons", project="alpha", limit=100))["lessons"]) == 3


async def test_the_same_id_in_two_projects_is_two_lessons_each_changed_and_reverted_alone(
    client: Client,
) -> None:
    await call(client, "import_lessons", lessons=[lesson("alpha's lesson")], project="alpha")
    await call(client, "import_lessons", lessons=[lesson("beta's lesson")], project="beta")

    async def get(project: str) -> dict[str, Any]:
        return await call(client, "get_lesson", id=TAKEN, project=project)

    await call(client, "upvote_lesson", id=TAKEN, project="alpha")
    await call(client, "downvote_lesson", id=TAKEN, project="beta")
    assert ((await get("alpha"))["upvotes"], (await get("alpha"))["downvotes"]) == (1, 0)
    assert ((await get("beta"))["upvotes"], (await get("beta"))["downvotes"]) == (0, 1)

    await call(client, "update_lesson", id=TAKEN, project="beta", problem="beta's lesson, corrected")
    assert (await get("alpha"))["problem"] == "alpha's lesson"

    await call(client, "delete_lesson", id=TAKEN, project="alpha")
    with pytest.raises(ToolFailed) as gone:
        await get("alpha")
    assert gone.value.code == "NOT_FOUND"
    assert (await get("beta"))["problem"] == "beta's lesson, corrected"

    [deleted, *_] = (await call(client, "history", project="alpha"))["commits"]
    [updated, *_] = (await call(client, "history", project="beta"))["commits"]
    assert (deleted["kind"], updated["kind"]) == ("delete", "update")
    await call(client, "revert_commit", commit_id=deleted["id"], project="alpha")
    await call(client, "revert_commit", commit_id=updated["id"], project="beta")
    assert ((await get("alpha"))["problem"], (await get("alpha"))["upvotes"]) == ("alpha's lesson", 1)
    assert ((await get("beta"))["problem"], (await get("beta"))["downvotes"]) == ("beta's lesson", 1)

    # A commit id of one project is not found from another.
    with pytest.raises(ToolFailed) as elsewhere:
        await call(client, "revert_commit", commit_id=deleted["id"], project="beta")
    assert elsewhere.value.code == "NOT_FOUND"


# -- a store migrated from ids unique across the database ----------------------------------


def populate(store: Store) -> dict[str, str]:
    """Lessons, tags, a vote, a deletion and their commits, through the store's own API."""
    alpha = Scope("acme", "alpha")
    ids = {
        name: store.save(alpha, LessonDraft(problem=problem, resolution="r", tags=tags), vector(name)).id
        for name, problem, tags in (
            ("kept", "zeppelin mooring lines snap in crosswinds", ("airship",)),
            ("voted", "gradle daemon eats all memory", ("jvm",)),
            ("deleted", "a lesson that is deleted before the upgrade", ()),
        )
    }
    store.vote(alpha, ids["voted"], up=True)
    store.delete(alpha, ids["deleted"])
    return ids


def check_upgraded(store: Any, ids: dict[str, str]) -> None:
    """Everything populate() left still works after the migration, and ids are now per project."""
    alpha, beta = Scope("acme", "alpha"), Scope("acme", "beta")
    assert store.get(alpha, ids["kept"]).tags == ("airship",)
    assert store.get(alpha, ids["voted"]).upvotes == 1
    assert store.count("acme") == 2
    with pytest.raises(NotFoundError):
        store.get(alpha, ids["deleted"])
    by_vector = store.recall(alpha, RecallQuery(text="unrelated words", vector=vector("voted"), limit=1))
    assert [hit.lesson.id for hit in by_vector] == [ids["voted"]]
    by_words = store.recall(alpha, RecallQuery(text="zeppelin mooring", vector=vector("other"), limit=1))
    assert [hit.lesson.id for hit in by_words] == [ids["kept"]]
    assert [x.id for x in store.list(alpha, ("jvm",), 10, None).lessons] == [ids["voted"]]

    with store.transaction(alpha, write=False) as tx:
        [vote, *_] = tx.commits(f"lesson:{ids['voted']}", 10, None)
    assert vote.kind == "vote"
    with store.transaction(alpha, write=True) as tx:
        history.revert(tx, vote.id, "test")
    assert store.get(alpha, ids["voted"]).upvotes == 0

    # A new lesson is found by its vector like the old ones; beta may hold alpha's ids.
    fresh = store.save(alpha, LessonDraft(problem="new after upgrade", resolution="r"), vector("fresh"))
    assert fresh.id not in ids.values() and not fresh.merged
    kept = store.get(alpha, ids["kept"])
    with store.transaction(beta, write=True) as tx:
        assert tx.lesson_titles([kept.id]) == {}
        tx.restore_lesson(kept.id, {**lesson_image(kept, vector("kept").tobytes()), "project": "beta"})
    assert (store.get(alpha, kept.id).project, store.get(beta, kept.id).project) == ("alpha", "beta")
    store.delete(beta, kept.id)
    assert store.get(alpha, kept.id).problem == kept.problem


def test_a_local_file_with_database_wide_ids_keeps_everything_when_upgraded(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stores.sqlite import migrations as local_db

    path = tmp_path / "old.db"
    with monkeypatch.context() as old:
        old.setattr(local_db, "MIGRATIONS", local_db.MIGRATIONS[:3])
        old.setattr(local_db, "SCHEMA_VERSION", 3)
        before = open_local_store(path)
        ids = populate(before)
        sequence = "SELECT seq FROM sqlite_sequence WHERE name = 'lessons'"
        highest = before._backend.conns.reader.execute(sequence).fetchone()[0]
        before.close()
    store = open_local_store(path)
    try:
        check_upgraded(store, ids)
        # pks are what the FTS, vector and tombstone rows point at: none was renumbered or reused.
        assert store._backend.conns.reader.execute("SELECT max(pk) FROM lessons").fetchone()[0] > highest
        assert store._backend.conns.reader.execute("PRAGMA foreign_key_check").fetchall() == []
        assert store._backend.conns.reader.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        store.close()


@contextmanager
def scratch_database(postgres_url: str) -> Iterator[str]:
    """A database of its own, dropped afterwards."""
    name = f"lore_ids_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        try:
            admin.execute(f'CREATE DATABASE "{name}"')
        except psycopg.errors.InsufficientPrivilege:
            pytest.skip("this login may not create a database of its own")
    try:
        yield make_url(postgres_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_a_postgres_with_database_wide_ids_keeps_everything_when_upgraded(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stores.postgres import migrations as postgres_db

    with scratch_database(postgres_url) as url:
        with monkeypatch.context() as old:
            old.setattr(postgres_db, "MIGRATIONS", postgres_db.MIGRATIONS[:4])
            old.setattr(postgres_db, "SCHEMA_VERSION", 4)
            before = open_postgres_store(url)
            ids = populate(before)
            before.close()
        store = open_postgres_store(url)
        try:
            check_upgraded(store, ids)
            with psycopg.connect(url) as conn:
                unique = conn.execute(
                    "SELECT pg_get_constraintdef(oid) FROM pg_constraint "
                    "WHERE conrelid = 'lessons'::regclass AND contype = 'u'"
                ).fetchall()
            assert unique == [("UNIQUE (org_id, project, id)",)]
        finally:
            store.close()


# -- subscriptions and completions reach only the caller's project -------------------------


class Inbox:
    """The resources a client was told changed, in the order it was told."""

    def __init__(self) -> None:
        self.uris: list[str] = []

    async def __call__(self, message: Any) -> None:
        if getattr(message, "method", "") == "notifications/resources/updated":
            self.uris.append(str(message.params.uri))

    async def until(self, marker: str) -> list[str]:
        """Everything told up to and including ``marker`` (waiting up to 10 s for it).

        One session's notifications arrive in the order they were sent, so a change to a
        lesson watched only as a marker, made after changes the subscriber must not hear
        of, proves that those sent nothing: theirs would have come before the marker.
        """
        with anyio.fail_after(10):
            while marker not in self.uris:
                await anyio.sleep(0.01)
        return self.uris[: self.uris.index(marker) + 1]


@pytest.fixture
def team(store: Store, embedder: Embedder) -> Iterator[Any]:
    with team_server(store, embedder) as server:
        yield server


async def test_a_project_key_hears_of_and_completes_only_its_own_projects_lessons(team: Any) -> None:
    root = team.keys.init_org("acme").key
    alice = team.keys.create_key("acme", name="alice", project="alpha", root=False).key
    bob = team.keys.create_key("acme", name="bob", project=None, root=False).key  # reads "default"
    globex = team.keys.init_org("globex").key
    alice_inbox, bob_inbox = Inbox(), Inbox()
    async with AsyncExitStack() as stack:

        async def connect(key: str, inbox: Inbox | None = None) -> Client:
            http = await stack.enter_async_context(
                httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
            )
            transport = streamable_http_client(team.url, http_client=http)
            return await stack.enter_async_context(Client(transport, mode="legacy", message_handler=inbox))

        writer, outsider = await connect(root), await connect(globex)
        markers = {}
        for project in ("alpha", "beta", "default"):
            await call(writer, "import_lessons", lessons=[lesson(f"{project}'s lesson")], project=project)
            marker = await call(
                writer, "save_lesson", problem=f"{project} marker", resolution="r", project=project
            )
            markers[project] = f"lore://lessons/{marker['id']}"
        await call(outsider, "import_lessons", lessons=[lesson("globex's lesson")])
        watcher, colleague = await connect(alice, alice_inbox), await connect(bob, bob_inbox)
        with no_deprecation_warnings():
            for client, project in ((watcher, "alpha"), (colleague, "default")):
                for uri in (LESSON_URI, "lore://stats", markers[project]):
                    await client.subscribe_resource(uri)

        # The same id changing in a project neither watcher reads, and in another org;
        await call(writer, "upvote_lesson", id=TAKEN, project="beta")
        await call(writer, "update_lesson", id=TAKEN, project="beta", problem="beta's, edited")
        await call(writer, "delete_lesson", id=TAKEN, project="beta")
        await call(outsider, "upvote_lesson", id=TAKEN)
        # then in alpha, which only alice hears of, and in default, which only bob does;
        await call(writer, "upvote_lesson", id=TAKEN, project="alpha")
        await call(colleague, "downvote_lesson", id=TAKEN)
        # then each one's marker.
        await call(writer, "upvote_lesson", id=markers["alpha"].rsplit("/", 1)[1], project="alpha")
        await call(writer, "upvote_lesson", id=markers["default"].rsplit("/", 1)[1], project="default")
        for inbox, project in ((alice_inbox, "alpha"), (bob_inbox, "default")):
            told = await inbox.until(markers[project])
            assert sorted(told) == sorted([LESSON_URI, "lore://stats", "lore://stats", markers[project]])

        template = ResourceTemplateReference(type="ref/resource", uri="lore://lessons/{id}")
        completed = (await watcher.complete(template, {"name": "id", "value": ""})).completion
        alpha_ids = [TAKEN, markers["alpha"].rsplit("/", 1)[1]]
        assert sorted(completed.values) == sorted(alpha_ids) and completed.total == 2
        mine = (await colleague.complete(template, {"name": "id", "value": ""})).completion
        assert sorted(mine.values) == sorted([TAKEN, markers["default"].rsplit("/", 1)[1]])


async def test_stdio_subscribers_hear_only_of_the_default_projects_lesson_of_a_shared_id(
    client: Client, server: Any
) -> None:
    inbox = Inbox()
    await call(client, "import_lessons", lessons=[lesson("default's lesson")])
    await call(client, "import_lessons", lessons=[lesson("beta's lesson")], project="beta")
    marker = (await call(client, "save_lesson", problem="a marker", resolution="r"))["id"]
    async with Client(server, mode="legacy", message_handler=inbox) as watcher:
        with no_deprecation_warnings():
            await watcher.subscribe_resource(LESSON_URI)
            await watcher.subscribe_resource(f"lore://lessons/{marker}")
        await call(client, "upvote_lesson", id=TAKEN, project="beta")
        await call(client, "delete_lesson", id=TAKEN, project="beta")
        await call(client, "import_lessons", lessons=[lesson("beta's again")], project="beta")
        await call(client, "upvote_lesson", id=TAKEN)
        await call(client, "upvote_lesson", id=marker, project="default")
        assert await inbox.until(f"lore://lessons/{marker}") == [LESSON_URI, f"lore://lessons/{marker}"]
        assert (await call(watcher, "get_lesson", id=TAKEN))["upvotes"] == 1
