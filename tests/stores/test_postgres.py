"""What only Postgres has to prove: row-level security, outages, many writers, migrations."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import psycopg
import pytest

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from stores import Scope, UnavailableError, open_postgres_store
from stores.engine import ranking
from stores.engine.lessons import LessonDraft, RecallQuery
from stores.postgres.db import RLS_ROLE
from tests.stores.test_bulk_import import unit_rows
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call, vector
from tests.support.processes import stdio_params
from tests.support.stores import embedding_storage, empty_postgres

ACME = Scope("acme", "web")
GLOBEX = Scope("globex", "web")


@pytest.fixture
def pg_store(postgres_url: str):
    empty_postgres(postgres_url)
    store = open_postgres_store(postgres_url)
    yield store
    store.close()


def test_an_unscoped_query_sees_nothing_of_another_org(postgres_url: str, pg_store) -> None:
    pg_store.save(ACME, LessonDraft("acme secret", "r"), vector("a"))
    pg_store.save(GLOBEX, LessonDraft("globex secret", "r"), vector("g"))
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        privileged = conn.execute(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()[0]
        if privileged:
            conn.execute(f"SET ROLE {RLS_ROLE}")  # what every Lore connection does
        with conn.transaction(force_rollback=True):
            conn.execute("SELECT set_config('lore.org', 'acme', true)")
            # No org filter at all: the policy still confines the query to acme.
            assert conn.execute("SELECT problem FROM lessons").fetchall() == [("acme secret",)]
            assert conn.execute("UPDATE lessons SET problem = 'pwned'").rowcount == 1
            assert conn.execute("DELETE FROM lessons WHERE org_id = 'globex'").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute("SELECT set_config('lore.org', 'acme', true)")
            conn.execute(
                "INSERT INTO lessons (id, org_id, project, problem, resolution, confidence, created_at, "
                "updated_at) VALUES ('x', 'globex', 'web', 'p', 'r', 0.5, now(), now())"
            )
        # A transaction that never says which org it is sees no lessons at all.
        assert conn.execute("SELECT count(*) FROM lessons").fetchone()[0] == 0
    assert pg_store.get(GLOBEX, pg_store.list(GLOBEX, (), 5, None).lessons[0].id).problem == "globex secret"
    assert pg_store.count("acme") == 1 and pg_store.count("globex") == 1


def test_sixteen_concurrent_writers_lose_nothing(pg_store) -> None:
    writers, per_writer = 16, 8
    target = pg_store.save(ACME, LessonDraft("shared", "r"), vector("shared")).id

    def write(w: int) -> int:
        for i in range(per_writer):
            pg_store.save(ACME, LessonDraft(f"w{w}-{i}", "r"), vector(f"w{w}-{i}"))
            pg_store.vote(ACME, target, up=True)
        return per_writer

    with ThreadPoolExecutor(writers) as pool:
        assert sum(pool.map(write, range(writers))) == writers * per_writer
    assert pg_store.count("acme", "web") == writers * per_writer + 1
    assert pg_store.get(ACME, target).upvotes == writers * per_writer


def test_concurrent_near_duplicates_merge_into_one_lesson(pg_store) -> None:
    def write(i: int) -> str:
        return pg_store.save(ACME, LessonDraft("same lesson", "r"), vector("same", 0.02, i)).id

    with ThreadPoolExecutor(8) as pool:
        ids = set(pool.map(write, range(8)))
    assert len(ids) == 1
    assert pg_store.count("acme") == 1


def test_migrating_again_is_harmless_and_the_cli_reports_the_schema(postgres_url: str, pg_store) -> None:
    pg_store.save(ACME, LessonDraft("kept", "r"), vector("k"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    for _ in range(2):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "lore_mcp",
                "migrate",
                "--store",
                "postgres",
                "--database-url",
                postgres_url,
            ],
            capture_output=True,
            text=True,
            env=env,
        )
        assert out.returncode == 0, out.stderr
        assert "current schema" in out.stderr
    assert pg_store.count("acme") == 1


def test_vectors_stay_in_their_rows_and_migrating_keeps_them_there(postgres_url: str, pg_store) -> None:
    """An exact scan (a small project, or one the index cannot serve) reads every vector of the
    project: moved out of the row by TOAST that was four pages a vector (56 ms for 10,000)."""
    pg_store.save(ACME, LessonDraft("kept", "r"), vector("k"))
    assert embedding_storage(postgres_url) == "m"
    with psycopg.connect(postgres_url, autocommit=True) as conn:  # as a store before migration 14
        conn.execute("ALTER TABLE lessons ALTER COLUMN embedding SET STORAGE EXTENDED")
        conn.execute("DELETE FROM schema_migrations WHERE version = 14")
    assert embedding_storage(postgres_url) == "x"
    open_postgres_store(postgres_url).close()
    assert embedding_storage(postgres_url) == "m"


def _toasted_values(conn: psycopg.Connection) -> int:
    """Values of ``lessons`` kept out of their rows, in its TOAST table."""
    toast = conn.execute("SELECT reltoastrelid::regclass FROM pg_class WHERE relname = 'lessons'").fetchone()
    return int(conn.execute(f"SELECT count(*) FROM {toast[0]}").fetchone()[0])


def test_a_lesson_stays_whole_in_its_row_and_import_images_are_not_compressed(
    postgres_url: str, pg_store
) -> None:
    """A row with its vector is about 2.4 KB, over Postgres's 2 KB target: its texts and words went
    to TOAST, a lookup apiece to read and an insert apiece to write (migration 16 keeps them)."""
    draft = LessonDraft(
        "The nightly export job times out after the table passed ten million rows " * 3,
        "Stream the rows with a server-side cursor and commit every hundred thousand " * 3,
        context="Postgres 16, a Python worker on Kubernetes, psycopg 3 " * 2,
        tags=("postgres", "export", "timeouts"),
    )
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        pg_store.save(ACME, draft, vector("whole"))
        assert _toasted_values(conn) == 0
        storage = "SELECT attstorage FROM pg_attribute"
        storage += " WHERE attrelid = 'commits'::regclass AND attname = 'effects'"
        assert conn.execute(storage).fetchone()[0] == "e"
        # As a store before migration 16: the same lesson's columns leave its row, until it migrates.
        conn.execute("ALTER TABLE lessons RESET (toast_tuple_target)")
        conn.execute("ALTER TABLE commits ALTER COLUMN effects SET STORAGE EXTENDED")
        conn.execute("DELETE FROM schema_migrations WHERE version = 16")
        pg_store.save(GLOBEX, draft, vector("whole"))
        assert _toasted_values(conn) > 0
        open_postgres_store(postgres_url).close()
        before = _toasted_values(conn)
        pg_store.save(Scope("acme", "api"), draft, vector("whole"))
        assert _toasted_values(conn) == before
        assert conn.execute(storage).fetchone()[0] == "e"


def _rls_connection(url: str) -> psycopg.Connection:
    """A connection that works as every Lore connection does (the RLS role when privileged)."""
    conn = psycopg.connect(url, autocommit=True)
    privileged = conn.execute(
        "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
    ).fetchone()[0]
    if privileged:
        conn.execute(f"SET ROLE {RLS_ROLE}")
    return conn


def test_a_tags_nearest_lessons_are_exact_and_the_callers_whatever_plan_is_cheaper(
    postgres_url: str, pg_store
) -> None:
    """Migration 18's exact scan of a tag (recall's, in a large project), run as its migrating login, with
    sorting made to look dear: an ordered walk of the HNSW index would filter after its search."""
    rows, question = unit_rows(400, 7), vector("question")
    drafts = [
        LessonDraft(f"acme {i}", "r", tags=("rare",) if i % 4 == 0 else ("t",)) for i in range(len(rows))
    ]
    pg_store.save_many(ACME, list(zip(drafts, rows, strict=True)))
    near_it = [
        (LessonDraft(f"globex {i}", "r", tags=("rare",)), vector("question", 0.01, i)) for i in range(30)
    ]
    pg_store.save_many(GLOBEX, near_it)
    with _rls_connection(postgres_url) as conn, conn.transaction(force_rollback=True):
        conn.execute("SELECT set_config('lore.org', 'acme', true)")
        for setting in ("enable_sort", "enable_seqscan", "enable_bitmapscan"):
            conn.execute(f"SET LOCAL {setting} = off")
        found = conn.execute(
            "SELECT l.problem FROM lore_nearest_tagged('web', ARRAY['rare'], now(), 0, %s::vector, 20) AS t(pk, d) "
            "JOIN lessons AS l USING (pk) ORDER BY t.d",
            (str(question.tolist()),),
        ).fetchall()
    tagged = list(range(0, len(rows), 4))
    assert [p for (p,) in found] == [f"acme {tagged[j]}" for j in np.argsort(-(rows[tagged] @ question))[:20]]


def test_a_tags_share_is_estimated_from_the_planners_statistics(postgres_url: str, pg_store) -> None:
    """``lore_tag_share`` (migration 18): the rarest tag's share of rows, from statistics the caller cannot read."""
    drafts = [LessonDraft(f"p {i}", "r", tags=("quarter",) if i % 4 == 0 else ("rest",)) for i in range(400)]
    pg_store.save_many(ACME, [(draft, vector(draft.problem)) for draft in drafts])
    shares = "SELECT lore_tag_share(ARRAY['quarter']), lore_tag_share(ARRAY['quarter', 'rest']), lore_tag_share('{}')"
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        privileged = admin.execute(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()[0]
        admin.execute("ANALYZE lessons")
    with _rls_connection(postgres_url) as conn:
        quarter, both, none = conn.execute(shares).fetchone()
    if privileged:  # the function reads pg_stats as its owner
        assert (quarter, both, none) == (pytest.approx(0.25, abs=0.02), pytest.approx(0.25, abs=0.02), 1)
    else:
        assert (quarter, both, none) == (1, 1, 1)


def test_full_text_candidates_stay_in_the_callers_org_and_project(postgres_url: str, pg_store) -> None:
    mine = pg_store.save(ACME, LessonDraft("zookeeper quorum lost", "restart"), vector("a")).id
    pg_store.save(Scope("acme", "other"), LessonDraft("zookeeper quorum other project", "r"), vector("b"))
    pg_store.save(GLOBEX, LessonDraft("zookeeper quorum at globex", "r"), vector("g"))
    candidates = "SELECT c.pk FROM lore_lexical_candidates('web', 'zookeep', 50, now(), 0, '{}') AS c(pk)"
    with _rls_connection(postgres_url) as conn:
        with conn.transaction(force_rollback=True):
            conn.execute("SELECT set_config('lore.org', 'acme', true)")
            pks = [row[0] for row in conn.execute(candidates)]
            assert len(pks) == 1  # not globex's, whose row the next query could not show anyway
            assert [row[0] for row in conn.execute("SELECT id FROM lessons WHERE pk = ANY(%s)", (pks,))] == [
                mine
            ]
        # The function runs as its owner, who may bypass the policies: it must filter by
        # lore.org itself, so a transaction that names no org gets nothing from it.
        assert conn.execute(candidates).fetchall() == []
        with conn.transaction(force_rollback=True):
            conn.execute("SELECT set_config('lore.org', 'initech', true)")
            assert conn.execute(candidates).fetchall() == []
    hits = pg_store.recall(ACME, RecallQuery(text="zookeeper quorum", vector=vector("unrelated")))
    assert [h.lesson.id for h in hits] == [mine]


def test_full_text_is_indexed_with_each_rows_project_and_upgrades_keep_finding(
    postgres_url: str, pg_store
) -> None:
    """Migration 15: the index holds a word naming each row's org and project, so GIN finds a project's
    matches without a bitmap of all the project's keys; a store from before rebuilds it on open."""
    mine = pg_store.save(ACME, LessonDraft("zookeeper quorum lost", "restart"), vector("a")).id
    pg_store.save(Scope("acme", "other"), LessonDraft("zookeeper quorum other project", "r"), vector("b"))
    with psycopg.connect(postgres_url, autocommit=True) as admin:  # as a store before migration 15
        admin.execute("DROP INDEX lessons_tsv")
        admin.execute("DROP FUNCTION lore_scope_word(text, text)")
        admin.execute("CREATE INDEX lessons_tsv ON lessons USING gin (tsv)")
        admin.execute("DELETE FROM schema_migrations WHERE version = 15")
    open_postgres_store(postgres_url).close()
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        definition = admin.execute("SELECT pg_get_indexdef('lessons_tsv'::regclass)").fetchone()[0]
        assert "lore_scope_word(org_id, project)" in definition
    candidates = "SELECT c.pk FROM lore_lexical_candidates('web', %s, %s, 50, now(), 0, '{}') AS c(pk)"
    with _rls_connection(postgres_url) as conn, conn.transaction(force_rollback=True):
        conn.execute("SELECT set_config('lore.org', 'acme', true)")
        pks = [row[0] for row in conn.execute(candidates, ("zookeep", "zookeep"))]
        assert [row[0] for row in conn.execute("SELECT id FROM lessons WHERE pk = ANY(%s)", (pks,))] == [mine]
        # A query of stop words alone has no lexeme: the project's word alone would match all its rows.
        assert conn.execute(candidates, ("the", "the")).fetchall() == []
    hits = pg_store.recall(ACME, RecallQuery(text="zookeeper quorum", vector=vector("unrelated")))
    assert [h.lesson.id for h in hits] == [mine]


def test_term_postings_are_estimated_from_the_planners_statistics(postgres_url: str, pg_store) -> None:
    # 300 lessons say "kubernetes", 3 of them also "zeppelin": after ANALYZE the estimate
    # says which is rare without scanning anything.
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        privileged = admin.execute(
            "SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = current_user"
        ).fetchone()[0]
        with admin.transaction():
            admin.execute("SELECT set_config('lore.org', 'acme', true)")
            admin.execute(
                "INSERT INTO lessons (id, org_id, project, problem, resolution, confidence, created_at, updated_at) "
                "SELECT 'l' || i, 'acme', 'web', 'kubernetes pod ' || i || CASE WHEN i <= 3 THEN ' zeppelin' "
                "ELSE '' END, 'r', 0.5, now(), now() FROM generate_series(1, 300) AS i"
            )
        admin.execute("ANALYZE lessons")
    terms = ["kubernetes", "zeppelin", "the", "neverseen"]
    with _rls_connection(postgres_url) as conn:
        common, rare, stopword, unseen = conn.execute("SELECT lore_term_postings(%s)", (terms,)).fetchone()[0]
    assert stopword is None  # no lexeme: it can match nothing
    if privileged:
        assert common == pytest.approx(300, rel=0.05)
        assert 1 <= rare < 20 and 1 <= unseen < 20
        postings = dict(zip(terms, [common, rare, stopword, unseen], strict=True))
        assert set(ranking.rare_terms(terms, postings, budget=100)) == {"zeppelin", "neverseen"}
    else:
        # A login that cannot bypass row-level security cannot read the statistics of a
        # table under policies: every term then counts as rare, and all are searched.
        assert common == rare == unseen == 1


async def test_a_stdio_server_on_postgres_serves_lessons(postgres_url: str, tmp_path: Path) -> None:
    empty_postgres(postgres_url)
    params = stdio_params(tmp_path / "unused.db", LORE_STORE="postgres", LORE_DATABASE_URL=postgres_url)
    async with connected(params) as client:
        saved = await call(
            client, "save_lesson", problem="Celery tasks run twice", resolution="Set acks_late"
        )
        got = await call(client, "recall_lessons", query="background jobs execute more than once")
        assert got["lessons"][0]["id"] == saved["id"]


@pytest.fixture
def own_postgres(tmp_path: Path):
    """A Postgres of this test's own, so it can be stopped and started again."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pgserver

    pgdata = tmp_path / "pgdata"
    pgdata.mkdir()
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    state = {"server": server, "url": server.get_uri()}

    def restart() -> None:
        state["server"] = pgserver.get_server(pgdata, cleanup_mode="stop")

    state["restart"] = restart
    yield state
    state["server"].cleanup()


async def test_tools_answer_unavailable_during_an_outage_and_recover(
    own_postgres, embedder: Embedder
) -> None:
    store = open_postgres_store(own_postgres["url"])
    try:
        server = build_server(LessonService(store, embedder, default_project="default"))
        async with connected(server) as client:
            saved = await call(
                client, "save_lesson", problem="Disk full on the runner", resolution="Prune images"
            )

            own_postgres["server"].cleanup()  # the real server stops
            for tool, args in (
                ("recall_lessons", {"query": "disk full"}),
                ("save_lesson", {"problem": "p", "resolution": "r"}),
                ("upvote_lesson", {"id": saved["id"]}),
            ):
                with pytest.raises(ToolFailed) as err:
                    await call(client, tool, **args)
                assert err.value.code == "UNAVAILABLE", err.value
                assert "Postgres" in err.value.message

            own_postgres["restart"]()  # and comes back
            got = await call(client, "recall_lessons", query="disk full")
            assert got["lessons"][0]["id"] == saved["id"]
            assert (await call(client, "upvote_lesson", id=saved["id"]))["upvotes"] == 1
    finally:
        store.close()


def test_an_unreachable_postgres_is_a_clear_error() -> None:
    with pytest.raises(UnavailableError, match="unreachable"):
        open_postgres_store("postgresql://lore:lore@127.0.0.1:9/lore")


def test_saved_lessons_go_straight_into_the_full_text_indexes(postgres_url: str, pg_store) -> None:
    """No pending list for recall to read through on every search (migration 8): after 10,000
    saves it held 316 pages and recall at 10k took 31 ms instead of 20."""
    for i in range(60):
        draft = LessonDraft(
            f"pod {i} of kubernetes node {i * 7} evicted", f"drain node {i}", tags=(f"k8s-{i}",)
        )
        pg_store.save(ACME, draft, vector(f"pod {i}"))
    with psycopg.connect(postgres_url, autocommit=True) as owner:
        pending = owner.execute(
            "SELECT gin_clean_pending_list('lessons_tsv'::regclass), gin_clean_pending_list('lessons_tags'::regclass)"
        ).fetchone()
    assert pending == (0, 0)
