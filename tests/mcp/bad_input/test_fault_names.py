"""Faults and odd input name themselves (issue 21, item 5).

Each case here used to pass silently or answer with a sentence about something else:
a misspelt argument was dropped and the save succeeded without it; NaN confidence was
"should be less than or equal to 1"; a JSON value 60 deep was refused because the plan
around it took five levels of the allowance; a 60 MB line on stdio was read whole; a
full disk answered ``INTERNAL_ERROR`` (SQLite) or "Postgres is unreachable" (Postgres).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from mcp import Client
from sqlalchemy import text
from sqlalchemy.engine import make_url

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.keys import KeyService
from lore_mcp.services.lessons import LessonService
from lore_mcp.tools.registry import TOOL_GROUPS
from lore_mcp.transport.stdio import MAX_LINE_BYTES
from stores import Store
from stores.errors import UnavailableError
from stores.postgres.db import as_owner, engine_for, transaction
from tests.support.bad_input import GOOD, nothing_stored, refused
from tests.support.clients import connected
from tests.support.helpers import call
from tests.support.plans import apply_ops, column, create_table, insert, schema_hash
from tests.support.processes import RawServer, remote_params, server_env
from tests.support.team import team_server


def nested(depth: int) -> Any:
    """A JSON value of ``depth`` nested arrays around a number."""
    value: Any = 7
    for _ in range(depth):
        value = [value]
    return value


# --- unknown arguments ---------------------------------------------------------------------------


async def test_a_misspelt_argument_is_refused_naming_it_and_the_nearest_and_saves_nothing(
    client: Client,
) -> None:
    message = await refused(client, "save_lesson", **GOOD, tag=["redis"])
    assert message.startswith("save_lesson has no argument 'tag'; did you mean 'tags'?"), message
    assert "problem, resolution, context, tags, confidence, source, project, ttl_days" in message
    await nothing_stored(client)
    # Spelt right, the same call saves with its tags.
    saved = await call(client, "save_lesson", **GOOD, tags=["redis"])
    assert (await call(client, "get_lesson", id=saved["id"]))["tags"] == ["redis"]


async def test_several_unknown_arguments_are_all_named(client: Client) -> None:
    message = await refused(client, "recall_lessons", query="redis", limt=3, min_confidance=0.5)
    assert "recall_lessons has no arguments 'limt', 'min_confidance'" in message
    assert "'limit' for 'limt'" in message and "'min_confidence' for 'min_confidance'" in message


async def test_every_tool_refuses_an_argument_it_does_not_have(store: Store, embedder: Embedder) -> None:
    """Every tool of every group (the key tools included), before any other check runs."""
    service = LessonService(store, embedder, default_project="default")
    server = build_server(service, keys=KeyService(store.keys), tools=list(TOOL_GROUPS))
    async with connected(server) as client:
        names = [t.name for t in (await client.list_tools()).tools]
        assert set(names) == {name for group in TOOL_GROUPS.values() for name in group}
        for name in names:
            message = await refused(client, name, no_such_argument=1)
            assert message.startswith(f"{name} has no argument 'no_such_argument'"), message
            assert message.endswith("."), message
    assert store.count("local") == 0


async def test_remote_mode_forwards_a_misspelt_argument_and_the_team_server_names_it(
    store: Store, embedder: Embedder
) -> None:
    with team_server(store, embedder) as server:
        root = server.keys.init_org("local")
        async with connected(remote_params(server.base, root.key)) as client:
            message = await refused(client, "save_lesson", **GOOD, tag=["redis"])
            assert message.startswith("save_lesson has no argument 'tag'; did you mean 'tags'?"), message
            saved = await call(client, "save_lesson", **GOOD, tags=["redis"])
            assert (await call(client, "get_lesson", id=saved["id"]))["tags"] == ["redis"]
    assert store.count("local") == 1


# --- numbers that are not finite ------------------------------------------------------------------

# The raw JSON a client can send (JSON parsers on both transports read NaN and Infinity),
# and the exact sentence each gets.
NON_FINITE: list[tuple[str, str, str]] = [
    (
        "save_lesson",
        '{"problem": "p", "resolution": "r", "confidence": NaN}',
        "confidence must be a finite number between 0 and 1, not NaN.",
    ),
    (
        "save_lesson",
        '{"problem": "p", "resolution": "r", "confidence": Infinity}',
        "confidence must be a finite number between 0 and 1, not Infinity.",
    ),
    (
        "save_lesson",
        '{"problem": "p", "resolution": "r", "ttl_days": Infinity}',
        "ttl_days must be a finite number greater than 0 and at most 36500, not Infinity.",
    ),
    (
        "recall_lessons",
        '{"query": "redis", "min_confidence": -Infinity}',
        "min_confidence must be a finite number between 0 and 1, not -Infinity.",
    ),
    (
        "update_lesson",
        '{"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "confidence": NaN}',
        "confidence must be a finite number between 0 and 1, not NaN.",
    ),
    (
        "import_lessons",
        '{"lessons": [{"id": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "problem": "p", "resolution": "r", '
        '"confidence": NaN}]}',
        "lessons[0].confidence must be a finite number between 0 and 1, not NaN.",
    ),
    (
        "query_rows",
        '{"table": "t", "where": [{"column": "n", "op": ">", "value": Infinity}]}',
        "where[0].value must be a finite number, not Infinity.",
    ),
]


def test_nan_and_infinity_are_refused_with_a_sentence_that_says_so(tmp_path: Path) -> None:
    """Over stdio, from a real process: a client's JSON encoder would never write NaN."""
    server = RawServer(server_env(tmp_path / "lore.db"))
    try:
        server.initialize()
        for i, (tool, arguments, sentence) in enumerate(NON_FINITE, start=1):
            server.send(
                f'{{"jsonrpc": "2.0", "id": {i}, "method": "tools/call", '
                f'"params": {{"name": "{tool}", "arguments": {arguments}}}}}'
            )
            reply = server.reply()
            assert reply["id"] == i
            assert reply["result"]["isError"] is True, reply
            assert reply["result"]["content"][0]["text"] == f"VALIDATION_ERROR: {sentence}"
        server.request(99, "tools/call", {"name": "list_lessons", "arguments": {}})
        assert server.reply()["result"]["structuredContent"]["lessons"] == []
    finally:
        server.close()


# --- nesting depth, counted from the value --------------------------------------------------------


async def test_a_value_nests_64_deep_wherever_it_sits_in_a_plan(client: Client) -> None:
    await apply_ops(client, create_table("t", column("j", "json"), column("n", "integer")))
    for depth in (60, 64):
        applied = await apply_ops(client, insert("t", {"j": nested(depth), "n": depth}))
    rows = (await call(client, "query_rows", table="t", order_by=[{"column": "n"}]))["rows"]
    assert [(r["n"], r["j"]) for r in rows] == [(60, nested(60)), (64, nested(64))]
    # Its commit holds it deeper still (effects, rows, after), and reads and reverts whole.
    commit = await call(client, "get_commit", commit_id=applied["commit_id"])
    assert [e["after"]["j"] for e in commit["effects"]["rows"]] == [nested(64)]
    await call(client, "revert_commit", commit_id=applied["commit_id"])
    await apply_ops(client, insert("t", {"j": nested(64), "n": 64}))
    # A column default and a new value are counted from themselves too.
    await apply_ops(
        client, {"op": "add_column", "table": "t", "column": column("d", "json", default=nested(64))}
    )
    await apply_ops(
        client,
        {
            "op": "update",
            "table": "t",
            "where": [{"column": "n", "op": "=", "value": 60}],
            "set": {"j": nested(64)},
        },
    )
    # And so is a filter's value (nothing equals it; what matters is that it is read).
    found = await call(
        client, "query_rows", table="t", where=[{"column": "j", "op": "=", "value": nested(64)}]
    )
    assert [r["n"] for r in found["rows"]] == [60, 64]


async def test_a_value_65_deep_is_refused_naming_where_it_is(client: Client) -> None:
    await apply_ops(client, create_table("t", column("j", "json")))
    base = await schema_hash(client)
    plan = {"baseSchemaHash": base, "operations": [insert("t", {"j": 1}, {"j": nested(65)})]}
    message = await refused(client, "apply", plan=plan)
    assert message == "plan.operations[0].rows[1].j nests deeper than 64 levels; flatten it.", message
    message = await refused(client, "plan", plan=plan)
    assert message.startswith("plan.operations[0].rows[1].j nests deeper than 64 levels"), message
    where = [{"column": "j", "op": "=", "value": nested(65)}]
    message = await refused(client, "query_rows", table="t", where=where)
    assert message == "where[0].value nests deeper than 64 levels; flatten it.", message
    assert (await call(client, "query_rows", table="t"))["rows"] == []


# --- stdio line limit -----------------------------------------------------------------------------


def padded_request(msg_id: int, size: int) -> bytes:
    """A tools/list request padded with spaces to exactly ``size`` bytes."""
    head = f'{{"jsonrpc": "2.0", "id": {msg_id}, "method": "tools/list", "params": {{}}'.encode()
    return head + b" " * (size - len(head) - 1) + b"}"


def test_stdio_refuses_a_line_over_the_http_body_limit_and_keeps_serving(tmp_path: Path) -> None:
    server = RawServer(server_env(tmp_path / "lore.db"))
    try:
        server.initialize()
        # A line exactly at the limit is a message like any other.
        server.send(padded_request(1, MAX_LINE_BYTES))
        assert server.reply()["result"]["tools"]
        # One byte more, or 60 MB, is refused by id, and never read whole.
        for msg_id, size in ((2, MAX_LINE_BYTES + 1), (3, 60_000_000)):
            server.send(padded_request(msg_id, size))
            reply = server.reply()
            assert reply["id"] == msg_id, reply
            assert reply["error"]["code"] == -32600
            assert reply["error"]["message"].startswith(
                f"Request too large: a message on stdio may be at most {MAX_LINE_BYTES} bytes (4 MiB)"
            ), reply
        server.request(4, "tools/call", {"name": "save_lesson", "arguments": GOOD})
        assert server.reply()["result"]["isError"] is False
    finally:
        server.close()
    assert server.proc.returncode == 0


# --- out of space and other resources -------------------------------------------------------------

# SQLSTATE class 53 by condition name, and what the sentence must name.
RESOURCE_ERRORS = [
    ("disk_full", "53100", "out of disk space"),
    ("out_of_memory", "53200", "ran out of memory"),
    ("too_many_connections", "53300", "no connection free"),
    ("configuration_limit_exceeded", "53400", "configured limits"),
    ("insufficient_resources", "53000", "lacks the resources"),
]


@pytest.mark.parametrize(("condition", "state", "named"), RESOURCE_ERRORS)
def test_postgres_out_of_resources_is_unavailable_naming_what_ran_out(
    postgres_url: str, condition: str, state: str, named: str
) -> None:
    """The errors come from a real Postgres, raised with their SQLSTATE by PL/pgSQL."""
    engine = engine_for(postgres_url, pool_size=1)
    try:
        with pytest.raises(UnavailableError) as err, transaction(engine, None) as conn:
            conn.exec_driver_sql(f"DO $$ BEGIN RAISE EXCEPTION USING ERRCODE = '{condition}'; END $$")
    finally:
        engine.dispose()
    message = str(err.value)
    assert named in message and f"SQLSTATE {state}" in message and "unreachable" not in message, message
    assert "changed nothing" in message


def test_postgres_temp_file_limit_is_named_not_unreachable(postgres_url: str) -> None:
    """A real 53400: a sort that spills past temp_file_limit."""
    engine = engine_for(postgres_url, pool_size=1)
    try:
        with pytest.raises(UnavailableError) as err, transaction(engine, None) as conn:
            as_owner(conn)  # temp_file_limit is for superusers to set
            conn.exec_driver_sql("SET LOCAL work_mem = '64kB'")
            conn.exec_driver_sql("SET LOCAL temp_file_limit = '64kB'")
            conn.execute(
                text("SELECT count(*) FROM (SELECT g FROM generate_series(1, 200000) g ORDER BY g DESC) s")
            )
    finally:
        engine.dispose()
    assert "SQLSTATE 53400" in str(err.value) and "temp_file_limit" in str(err.value)


def test_postgres_with_no_connection_free_says_so_not_unreachable(postgres_url: str) -> None:
    """A real refusal at connect time (a role whose CONNECTION LIMIT is 0), which libpq
    reports without its SQLSTATE."""
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS lore_test_no_slots")
        admin.execute("CREATE ROLE lore_test_no_slots LOGIN PASSWORD 'no-slots' CONNECTION LIMIT 0")
        url = make_url(postgres_url).set(username="lore_test_no_slots", password="no-slots")
        engine = engine_for(url.render_as_string(hide_password=False), pool_size=1)
        try:
            with pytest.raises(UnavailableError) as err, transaction(engine, None):
                pass
        finally:
            engine.dispose()
            admin.execute("DROP ROLE lore_test_no_slots")
    message = str(err.value)
    assert message.startswith("Postgres has no connection free (SQLSTATE 53300"), message
    assert "max_connections" in message and "LORE_POOL_SIZE" in message


@contextlib.contextmanager
def disk_full(store: Any, backend: str, request: pytest.FixtureRequest) -> Iterator[None]:
    """Writes fail as on a full disk until the block ends.

    SQLite: the writer connection may not grow the file past its size now
    (``max_page_count``), which SQLite answers exactly as a full disk: SQLITE_FULL,
    "database or disk is full". Postgres: inserts into ``lessons`` raise disk_full
    (SQLSTATE 53100), as Postgres does when a data file cannot grow.
    """
    if backend == "local":
        writer = store._backend.conns.writer  # the connection every write of this store goes through
        limit = writer.execute("PRAGMA max_page_count").fetchone()[0]
        writer.execute(f"PRAGMA max_page_count = {writer.execute('PRAGMA page_count').fetchone()[0]}")
        try:
            yield
        finally:
            writer.execute(f"PRAGMA max_page_count = {limit}")
        return
    with psycopg.connect(request.getfixturevalue("postgres_url"), autocommit=True) as conn:
        conn.execute(
            "CREATE FUNCTION lore_test_disk_full() RETURNS trigger LANGUAGE plpgsql AS "
            "$$ BEGIN RAISE EXCEPTION 'could not extend file: No space left on device' "
            "USING ERRCODE = 'disk_full'; END $$"
        )
        conn.execute(
            "CREATE TRIGGER lore_test_disk_full BEFORE INSERT ON lessons "
            "FOR EACH ROW EXECUTE FUNCTION lore_test_disk_full()"
        )
        try:
            yield
        finally:
            conn.execute("DROP TRIGGER lore_test_disk_full ON lessons")
            conn.execute("DROP FUNCTION lore_test_disk_full()")


# What each backend's refusal starts with.
DISK_FULL = {
    "local": "The disk holding the Lore database ",
    "postgres": "Postgres is out of disk space (SQLSTATE 53100, disk_full)",
}


async def test_a_full_disk_is_unavailable_naming_it_loses_nothing_and_recovers(
    client: Client, store: Store, backend: str, request: pytest.FixtureRequest
) -> None:
    kept = await call(client, "save_lesson", **GOOD)
    big = {
        "problem": "Kafka consumer lag grows " + "x " * 4000,
        "resolution": "Add partitions " + "y " * 4000,
    }
    with disk_full(store, backend, request):
        message = await refused(client, "save_lesson", "UNAVAILABLE", **big)
        # Reads go on while the disk is full.
        assert [lesson["id"] for lesson in (await call(client, "list_lessons"))["lessons"]] == [kept["id"]]
    assert message.startswith(DISK_FULL[backend]), message
    assert "changed nothing" in message and "free space" in message.lower()
    if backend == "local":
        assert "database or disk is full" in message and "LORE_DB_PATH" in message
    assert store.count("local") == 1
    again = await call(client, "save_lesson", **big)
    assert again["id"] != kept["id"] and store.count("local") == 2
