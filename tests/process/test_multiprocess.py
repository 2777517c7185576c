"""Several processes on one SQLite file: nothing lost, never "database is locked"."""

from __future__ import annotations

import asyncio
import multiprocessing
import random
from pathlib import Path

from stores import Scope, open_local_store
from stores.engine.lessons import LessonDraft
from tests.support.clients import connected
from tests.support.helpers import call, vector
from tests.support.processes import stdio_params

SERVERS = 3
LESSONS_PER_SERVER = 8
WORDS = (
    "kafka redis nginx postgres webpack babel kubernetes helm terraform ansible grpc protobuf oauth saml "
    "jwt cors csp webhook stripe twilio sendgrid s3 lambda cloudfront dns tls certificate cron celery "
    "rabbitmq sqlite alembic django flask fastapi pydantic numpy pandas spark airflow dbt snowflake "
    "bigquery react vue svelte tailwind vite jest playwright selenium docker compose podman systemd "
    "journald prometheus grafana loki sentry opentelemetry elasticsearch kibana memcached varnish haproxy"
).split()


def lesson_text(server: int, i: int) -> tuple[str, str]:
    rng = random.Random(server * 1000 + i)
    a, b, c, d = rng.sample(WORDS, 4)
    return (
        f"{a} and {b} disagree after the upgrade (case {server}-{i})",
        f"Pin {c}, then reconfigure {d} and restart the worker (case {server}-{i})",
    )


async def test_several_server_processes_share_one_file_without_losing_lessons(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"

    async def run_server(server: int) -> list[str]:
        async with connected(stdio_params(db)) as client:
            ids = []
            for i in range(LESSONS_PER_SERVER):
                problem, resolution = lesson_text(server, i)
                saved = await call(client, "save_lesson", problem=problem, resolution=resolution)
                assert saved["merged"] is False, (problem, saved)
                ids.append(saved["id"])
            return ids

    per_server = await asyncio.gather(*(run_server(s) for s in range(SERVERS)))
    all_ids = {i for ids in per_server for i in ids}
    assert len(all_ids) == SERVERS * LESSONS_PER_SERVER

    # Each process sees the others' lessons on its next recall.
    async with connected(stdio_params(db)) as client:
        for server in range(SERVERS):
            problem, resolution = lesson_text(server, 0)
            got = await call(client, "recall_lessons", query=f"{problem} {resolution}", limit=3)
            assert got["lessons"][0]["id"] == per_server[server][0]
        listed = await call(client, "list_lessons", limit=100)
        assert {x["id"] for x in listed["lessons"]} == all_ids


WRITERS = 4
WRITES_PER_WRITER = 60


def _hammer(db: str, writer: int) -> int:
    store = open_local_store(db)
    try:
        scope = Scope("local", "stress")
        for i in range(WRITES_PER_WRITER):
            saved = store.save(scope, LessonDraft(f"w{writer}-{i}", "r"), vector(f"w{writer}-{i}"))
            if i % 10 == 0:
                store.vote(scope, saved.id, up=True)
        return WRITES_PER_WRITER
    finally:
        store.close()


def test_concurrent_writer_processes_never_fail_and_lose_nothing(tmp_path: Path) -> None:
    db = str(tmp_path / "stress.db")
    # No store exists yet: the writers also race to create and migrate the file.
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WRITERS) as pool:
        written = pool.starmap(_hammer, [(db, w) for w in range(WRITERS)])
    assert sum(written) == WRITERS * WRITES_PER_WRITER
    store = open_local_store(db)
    try:
        assert store.count("local", "stress") == WRITERS * WRITES_PER_WRITER
        page = store.list(Scope("local", "stress"), (), 100, None)
        assert sum(x.upvotes for x in page.lessons) > 0
    finally:
        store.close()
