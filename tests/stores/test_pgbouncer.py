"""Lore's Postgres store through a real PgBouncer 1.18 in transaction mode (docs/scaling-out.md).

With ``direct_url`` (``LORE_DATABASE_DIRECT_URL``) the store prepares no statements on the
pooled URL, takes its role and timeouts in each transaction (``stores.postgres.db``), and
listens for change notices on the direct URL: saves, recalls, a structured plan and apply,
writers in two stores at once and the notice feed all work through a pool of three server
connections. Skipped where PgBouncer is not installed, failed under ``CI=true``.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from sqlalchemy import text

from stores import Scope, Store, open_postgres_store
from stores.engine import structured
from stores.engine.lessons import LessonDraft, RecallQuery
from stores.postgres.notices import PostgresNotices
from tests.support.helpers import vector
from tests.support.pgbouncer import pgbouncer
from tests.support.plans import column, create_table, insert, make_plan
from tests.support.stores import empty_postgres

HERE = Scope(org="acme", project="alpha")


@pytest.fixture
def pooled(postgres_url: str) -> Iterator[tuple[str, str]]:
    """The pooled URL of the test database, and its direct URL."""
    empty_postgres(postgres_url)
    with pgbouncer(postgres_url) as url:
        yield url, postgres_url


@pytest.fixture
def two(pooled: tuple[str, str]) -> Iterator[tuple[Store, Store]]:
    url, direct = pooled
    a, b = (open_postgres_store(url, pool_size=4, direct_url=direct) for _ in range(2))
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def save(store: Store, problem: str) -> str:
    return store.save(
        HERE, LessonDraft(problem=problem, resolution="restart it"), vector(problem).tolist()
    ).id


def test_saves_and_recalls_go_through_the_pooler_unprepared(two: tuple[Store, Store]) -> None:
    a, b = two
    ids = [save(a if i % 2 else b, f"kafka consumer lag {i}") for i in range(12)]
    for _ in range(8):  # past psycopg's threshold of 5, where it would prepare the statements
        query = RecallQuery(text="kafka consumer lag 3", vector=vector("kafka consumer lag 3").tolist())
        hits = b.recall(HERE, query)
        assert hits[0].lesson.problem == "kafka consumer lag 3"
    assert a.get(HERE, ids[0]).problem == "kafka consumer lag 0"
    assert len(a.list(HERE, (), 50, None).lessons) == a.count(HERE.org, HERE.project) == 12
    assert b.recall(Scope("other", "alpha"), RecallQuery(text="kafka", vector=vector("x").tolist())) == []


def test_each_transaction_takes_the_role_and_timeouts_for_itself(two: tuple[Store, Store]) -> None:
    engine: Any = two[0]._backend._engine  # type: ignore[attr-defined]
    with engine.begin() as conn:
        privileged = conn.execute(
            text("SELECT rolsuper OR rolbypassrls FROM pg_roles WHERE rolname = session_user")
        ).scalar()
        assert conn.connection.dbapi_connection.prepare_threshold is None
    for _ in range(6):  # whichever server connection the pooler lends
        with engine.begin() as conn:
            settings = text("SELECT current_user, current_setting('statement_timeout')")
            user, timeout = conn.execute(settings).one()
            assert timeout == "30s"
            assert user == "lore_rls" or not privileged
    with engine.connect() as conn:  # and nothing stays behind on the server connection
        conn = conn.execution_options(isolation_level="AUTOCOMMIT")
        assert conn.execute(text("SELECT current_setting('statement_timeout')")).scalar() != "30s"


def test_a_structured_plan_and_apply_through_the_pooler(two: tuple[Store, Store]) -> None:
    a, b = two
    with a.transaction(HERE, write=False) as tx:
        base = structured.current_hash(tx)
    ops = (
        create_table("hosts", column("name", "text", primary_key=True), column("cpu", "integer")),
        insert("hosts", {"name": "web1", "cpu": 4}, {"name": "db1", "cpu": 16}),
    )
    plan = make_plan(base, *ops)
    with b.transaction(HERE, write=False) as tx:
        dry = structured.dry_run(structured.snapshot(tx, plan), plan)
    with a.transaction(HERE, write=True) as tx:
        applied = structured.apply(tx, plan, "tester")
    assert dry["ok"] and dry["effects"] == applied["effects"]
    with b.transaction(HERE, write=False) as tx:
        assert sorted(r["name"] for r in tx.rows("hosts").values()) == ["db1", "web1"]


def test_writers_in_two_stores_at_once_through_three_server_connections(two: tuple[Store, Store]) -> None:
    errors: list[BaseException] = []

    def writer(store: Store, name: str) -> None:
        try:
            for i in range(10):
                save(store, f"{name} lesson number {i}")
        except BaseException as exc:  # reported below, with the thread's name
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(s, f"w{n}{s is two[0]}")) for s in two for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert two[0].count(HERE.org, HERE.project) == 60
    commits = two[1].transaction(HERE, write=False)
    with commits as tx:
        seqs = [c.seq for c in tx.commits(None, 100, None)]
    assert sorted(seqs) == list(range(1, len(seqs) + 1))  # the project's writes took turns


def test_the_notice_feed_listens_on_the_direct_url(two: tuple[Store, Store]) -> None:
    feeds = [s.notices for s in two]
    assert isinstance(feeds[0], PostgresNotices) and isinstance(feeds[1], PostgresNotices)
    heard: queue.Queue[dict[str, Any]] = queue.Queue()
    feeds[1].subscribe(heard.put)
    assert feeds[1].wait_listening(10)
    feeds[0].publish({"uris": ["lore://stats"]})  # published through the pooler
    assert heard.get(timeout=10) == {"uris": ["lore://stats"]}
