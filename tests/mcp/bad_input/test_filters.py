"""No filter can freeze the server, every call has a deadline, and edge-of-range input is refused.

Issue 12, items 1 and 6 (structured memory): ``like`` once became a backtracking
regular expression, so ``%a%a%a%a%a%a%a%b`` against sixty ``a`` never answered
and held the interpreter; a write waited for SQLite's lock six times the busy
timeout; timestamps at the ends of the range, mixed ``json`` ordering and names
with a trailing newline reached ``INTERNAL_ERROR`` or were accepted. Every test
here runs on both backends through a real MCP client unless it says otherwise.
"""

from __future__ import annotations

import asyncio
import re
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import sqlean
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.transport.server import LoreServer
from stores import Scope, Store, deadline, open_local_store
from stores.engine import queries
from stores.engine.filters import like
from stores.engine.plans import MAX_LIKE_CHARS, coerce
from stores.engine.structured import TableDef
from stores.errors import InvalidInputError
from stores.sqlite import db as local_db
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call
from tests.support.plans import apply_ops, column, cond, create_table, insert, make_plan, schema_hash, state

# One era: this module is not about the protocol (tests/conftest.py runs the surface in both).
pytestmark = pytest.mark.era(
    "2026-07-28",
    reason=(
        "filter limits and deadlines, checked below the protocol; both eras' refusals are in test_tool_errors"
    ),
)

PATHOLOGICAL = [
    "%a%a%a%a%a%a%a%b",  # 7 wildcards: 24 s before
    "%a%a%a%a%a%a%a%a%a%a%a%a%b",  # 12: never answered
    "%a%_%a%_%a%_%a%_%a%_%a%_%a%_%b",
    "%" + "%a" * 40 + "%b%",
]

# Rows that make one ``like`` slow without any backtracking: each search for 197 a's
# and a b in 20,000 a's takes a few million steps (and matches), and 50 such filters per row.
SLOW_VALUE = "a" * 20_000 + "b"
SLOW_WHERE = [cond("v", "like", "%" + "a" * 197 + "b%")] * 50
SLOW_ROWS = 40


async def notes_with(client: Client, *values: str) -> None:
    await apply_ops(
        client, create_table("notes", column("v", "text")), insert("notes", *({"v": v} for v in values))
    )


async def query(client: Client, table: str, *where: dict[str, Any], **extra: Any) -> list[dict[str, Any]]:
    return (await call(client, "query_rows", table=table, where=list(where), **extra))["rows"]


async def timed(coro: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = await coro
    return result, time.perf_counter() - start


# --- like is linear --------------------------------------------------------------------------


@pytest.mark.parametrize("pattern", PATHOLOGICAL)
async def test_a_pathological_like_answers_no_match_in_well_under_a_second(
    client: Client, pattern: str
) -> None:
    await notes_with(client, "a" * 60)
    rows, elapsed = await timed(query(client, "notes", cond("v", "like", pattern)))
    assert rows == []
    assert elapsed < 1.0


@pytest.mark.parametrize("pattern", PATHOLOGICAL)
async def test_a_pathological_like_in_update_and_delete_changes_nothing_at_once(
    client: Client, pattern: str
) -> None:
    await notes_with(client, "a" * 60)
    before = await state(client)
    for op in (
        {"op": "update", "table": "notes", "where": [cond("v", "like", pattern)], "set": {"v": "changed"}},
        {"op": "delete", "table": "notes", "where": [cond("v", "like", pattern)]},
    ):
        result, elapsed = await timed(apply_ops(client, op))
        assert result["effects"]["rows"] == {"inserted": 0, "updated": 0, "deleted": 0}
        assert elapsed < 1.0
    assert (await state(client))["rows"] == before["rows"]


async def test_a_like_with_many_wildcards_that_does_match_still_updates_the_row(client: Client) -> None:
    await notes_with(client, "a" * 60, "b" * 60)
    result = await apply_ops(
        client,
        {"op": "update", "table": "notes", "where": [cond("v", "like", "%a" * 12 + "%")], "set": {"v": "x"}},
    )
    assert result["effects"]["rows"]["updated"] == 1
    assert [r["v"] for r in await query(client, "notes")] == ["x", "b" * 60]


LIKE_VALUES = [
    "abc",
    "ABC",
    "",
    "a.c",
    "a*c",
    "aXc",
    "a\nc",
    "100%",
    "1000",
    "under_score",
    "underXscore",
    ".*+?[](){}|^$\\",
    "abab",
    "aba",
    "Ünïcödé",
]
LIKE_CASES: list[tuple[str, set[str]]] = [
    ("abc", {"abc", "ABC"}),  # case is ignored
    ("ABC", {"abc", "ABC"}),
    ("", {""}),  # the empty pattern matches only the empty text
    ("%", set(LIKE_VALUES)),
    ("%%", set(LIKE_VALUES)),
    ("_", set()),
    ("___", {"abc", "ABC", "a.c", "a*c", "aXc", "a\nc", "aba"}),  # _ is any one character, newline too
    ("a_c", {"abc", "ABC", "a.c", "a*c", "aXc", "a\nc"}),
    ("a.c", {"a.c"}),  # regex metacharacters stand for themselves
    ("a*c", {"a*c"}),
    ("a%c", {"abc", "ABC", "a.c", "a*c", "aXc", "a\nc"}),
    ("100%", {"100%", "1000"}),  # no escape character: % is always a wildcard
    ("under_score", {"under_score", "underXscore"}),
    (".*+?[](){}|^$\\", {".*+?[](){}|^$\\"}),
    ("%[%", {".*+?[](){}|^$\\"}),
    ("%\\", {".*+?[](){}|^$\\"}),
    ("^%", {".*+?[](){}|^$\\"} - {".*+?[](){}|^$\\"}),  # ^ is not an anchor: nothing starts with it
    ("%$\\", {".*+?[](){}|^$\\"}),
    ("ab%ab", {"abab"}),  # the two ends may not overlap
    ("%ab", {"abab"}),
    ("ab%", {"abc", "ABC", "abab", "aba"}),
    ("%b%", {"abc", "ABC", "abab", "aba"}),
    ("ünï%", {"Ünïcödé"}),
    ("abab", {"abab"}),  # a pattern equal to the value
]


async def test_like_keeps_its_meaning_percent_underscore_case_and_literal_characters(client: Client) -> None:
    await notes_with(client, *LIKE_VALUES)
    for pattern, expected in LIKE_CASES:
        rows = await query(client, "notes", cond("v", "like", pattern))
        assert {r["v"] for r in rows} == expected, pattern
        assert len(rows) == len(expected), pattern


def _backtracking_like(value: str, pattern: str) -> bool:
    """What ``like`` meant before: a regular expression with ``.*`` for ``%`` (slow, but the reference)."""
    parts = [".*" if ch == "%" else "." if ch == "_" else re.escape(ch) for ch in pattern]
    return re.compile("".join(parts), re.IGNORECASE | re.DOTALL).fullmatch(value) is not None


@settings(max_examples=500, deadline=None)
@given(value=st.text(alphabet="abAB_%.\n", max_size=10), pattern=st.text(alphabet="aAb_%.", max_size=8))
def test_like_agrees_with_the_regular_expression_it_replaced(value: str, pattern: str) -> None:
    assert like(value, pattern) == _backtracking_like(value, pattern)


def test_like_over_a_long_value_stays_linear_in_its_length() -> None:
    start = time.perf_counter()
    assert not like("a" * 200_000, "%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%b")
    assert like("a" * 200_000 + "b", "%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%a%b")
    assert time.perf_counter() - start < 1.0


async def test_a_like_pattern_longer_than_the_limit_is_a_validation_error(client: Client) -> None:
    await notes_with(client, "a")
    assert await query(client, "notes", cond("v", "like", "%" * MAX_LIKE_CHARS)) != []
    before = await state(client)
    with pytest.raises(ToolFailed) as err:
        await query(client, "notes", cond("v", "like", "%" * (MAX_LIKE_CHARS + 1)))
    assert err.value.code == "VALIDATION_ERROR"
    assert f"at most {MAX_LIKE_CHARS} characters" in err.value.message
    with pytest.raises(ToolFailed) as err:
        await apply_ops(client, {"op": "delete", "table": "notes", "where": [cond("v", "like", "x" * 201)]})
    assert err.value.code == "VALIDATION_ERROR"
    assert await state(client) == before


async def test_more_filters_than_the_limit_in_a_plan_are_a_validation_error(client: Client) -> None:
    await notes_with(client, "a")
    before = await state(client)
    with pytest.raises(ToolFailed) as err:
        await apply_ops(client, {"op": "delete", "table": "notes", "where": [cond("v", "=", "a")] * 51})
    assert err.value.code == "VALIDATION_ERROR"
    assert "at most 50 filters" in err.value.message
    assert await state(client) == before


# --- other clients keep answering; every call has a deadline -------------------------------------


@pytest.fixture
async def slow_server(service: LessonService) -> LoreServer:
    """A server whose calls may take 3 s, with a table that makes SLOW_WHERE take far longer."""
    server = build_server(service)
    async with connected(server) as client:
        await notes_with(client, *([SLOW_VALUE] * SLOW_ROWS))
        await apply_ops(client, create_table("small", column("v", "text")), insert("small", {"v": "x"}))
    server.request_timeout_s = 3.0
    return server


async def test_while_one_client_runs_a_slow_query_another_keeps_getting_answers(
    slow_server: LoreServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The slow query is held inside its filter loop (not timed: how many answers fit in a
    few seconds depends on how busy the machine is) while the other client asks; then it goes
    on into rows that take far longer than the deadline, which stops it."""
    running, release = threading.Event(), threading.Event()
    select_rows = queries.select_rows

    def held_select_rows(*args: Any) -> Any:
        if not running.is_set():
            running.set()
            release.wait(60)
        return select_rows(*args)

    monkeypatch.setattr(queries, "select_rows", held_select_rows)
    async with connected(slow_server) as slow, connected(slow_server) as other:
        long_query = asyncio.create_task(call(slow, "query_rows", table="notes", where=SLOW_WHERE))
        try:
            assert await asyncio.to_thread(running.wait, 30)
            for _ in range(3):
                rows = await asyncio.wait_for(query(other, "small", cond("v", "like", "%x%")), 30)
                assert rows == [{"id": 1, "v": "x"}]
                listed = await asyncio.wait_for(call(other, "schema"), 30)
                assert {t["name"] for t in listed["tables"]} == {"notes", "small"}
            assert not long_query.done(), "the slow query ended before the other client's answers"
        finally:
            release.set()
            (outcome,) = await asyncio.gather(long_query, return_exceptions=True)
    assert isinstance(outcome, ToolFailed)
    assert outcome.code == "UNAVAILABLE"
    assert "took longer than this server allows" in outcome.message


async def test_an_apply_past_its_deadline_is_unavailable_and_changes_nothing(slow_server: LoreServer) -> None:
    async with connected(slow_server) as client:
        slow_server.request_timeout_s = 30.0
        before = await state(client)
        base = await schema_hash(client)
        plan = make_plan(
            base,
            insert("small", *({"v": f"row {i}"} for i in range(5_000))),
            {"op": "update", "table": "notes", "where": SLOW_WHERE, "set": {"v": "changed"}},
            {"op": "delete", "table": "small", "where": []},
        )
        slow_server.request_timeout_s = 1.0
        with pytest.raises(ToolFailed) as err:
            await call(client, "apply", plan=plan)
        slow_server.request_timeout_s = 30.0
        assert err.value.code == "UNAVAILABLE"
        assert "changed nothing" in err.value.message
        assert await state(client) == before
        # The same plan under a dry run is stopped the same way, not reported as a plan error.
        slow_server.request_timeout_s = 1.0
        with pytest.raises(ToolFailed) as err:
            await call(client, "plan", plan=plan)
        assert err.value.code == "UNAVAILABLE"
        slow_server.request_timeout_s = 30.0
        assert await state(client) == before


async def test_a_deadline_set_through_build_server_applies_to_every_call(service: LessonService) -> None:
    server = build_server(service, request_timeout_s=0.000001)
    assert server.request_timeout_s == 0.000001
    async with connected(server) as client:
        with pytest.raises(ToolFailed) as err:
            await call(client, "schema")
    assert err.value.code == "UNAVAILABLE"
    assert build_server(service).request_timeout_s == 30.0


def test_a_sqlite_statement_running_past_the_deadline_is_stopped_and_rolled_back(tmp_path: Path) -> None:
    conn = local_db.connect(tmp_path / "plain.db")
    conn.execute("CREATE TABLE t (x INTEGER)")
    endless = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
    started = time.perf_counter()
    with pytest.raises(deadline.DeadlineExceeded), deadline.limit(0.3), local_db.write_transaction(conn):
        conn.execute("INSERT INTO t VALUES (-1)")
        conn.execute(endless + "INSERT INTO t SELECT x FROM c")
    assert time.perf_counter() - started < 3.0
    assert not conn.in_transaction
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 0
    with pytest.raises(deadline.DeadlineExceeded), deadline.limit(0.3), local_db.read_transaction(conn):
        conn.execute(endless + "SELECT count(*) FROM c").fetchone()
    # The connection works as before once the request is over.
    with local_db.write_transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    assert conn.execute("SELECT count(*) FROM t").fetchone()[0] == 1
    conn.close()


async def test_a_postgres_statement_running_past_the_deadline_is_stopped_and_rolled_back(
    postgres_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    from tests.support.stores import open_store

    store = open_store("postgres", tmp_path, request)
    scope = Scope("local", "deadline")
    try:
        started = time.perf_counter()
        with (
            pytest.raises(deadline.DeadlineExceeded),
            deadline.limit(0.5),
            store.transaction(scope, write=True) as tx,  # type: ignore[attr-defined]
        ):
            tx.put_table("t", TableDef(columns=(), next_id=1))
            tx.tx.rows("SELECT pg_sleep(10)", {})  # the tx's own deadline-bound execute
        assert time.perf_counter() - started < 5.0
        with store.transaction(scope, write=False) as tx:  # type: ignore[attr-defined]
            assert tx.tables() == {}
    finally:
        store.close()


# --- waiting for SQLite's lock -----------------------------------------------------------------


@pytest.fixture
def local_store(tmp_path: Path) -> Any:
    store = open_local_store(tmp_path / "lore.db")
    yield store
    store.close()


async def test_a_writer_waiting_on_a_held_sqlite_lock_is_unavailable_after_the_busy_timeout_once(
    local_store: Store, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(local_db, "BUSY_TIMEOUT_MS", 1_000)
    server = build_server(LessonService(local_store, embedder, default_project="default"))
    holder = sqlean.connect(str(local_store._backend.path), isolation_level=None)  # type: ignore[attr-defined]
    try:
        async with connected(server) as client:
            base = await schema_hash(client)
            plan = make_plan(base, create_table("notes", column("v", "text")))
            holder.execute("BEGIN IMMEDIATE")
            started = time.perf_counter()
            with pytest.raises(ToolFailed) as err:
                await call(client, "apply", plan=plan)
            took = time.perf_counter() - started
            holder.execute("ROLLBACK")
            assert err.value.code == "UNAVAILABLE"
            assert "locked by another process" in err.value.message
            # Once, not six times (6 s), the busy timeout; the rest is margin for a busy machine.
            assert 0.9 <= took < 5.0
            assert (await call(client, "apply", plan=plan))["seq"] == 1
    finally:
        holder.close()


async def test_a_writer_waiting_on_a_held_sqlite_lock_gives_up_at_the_request_deadline(
    local_store: Store, embedder: Embedder
) -> None:
    server = build_server(LessonService(local_store, embedder, default_project="default"))
    holder = sqlean.connect(str(local_store._backend.path), isolation_level=None)  # type: ignore[attr-defined]
    try:
        async with connected(server) as client:
            base = await schema_hash(client)
            holder.execute("BEGIN IMMEDIATE")
            server.request_timeout_s = 1.0
            started = time.perf_counter()
            with pytest.raises(ToolFailed) as err:
                await call(client, "apply", plan=make_plan(base, create_table("notes", column("v", "text"))))
            took = time.perf_counter() - started
            holder.execute("ROLLBACK")
            server.request_timeout_s = 30.0
    finally:
        holder.close()
    assert err.value.code == "UNAVAILABLE"
    assert "took longer than this server allows" in err.value.message
    # The deadline (1 s), not the busy timeout (30 s); the rest is margin for a busy machine.
    assert 0.9 <= took < 5.0


# --- item 6: edge-of-range input is a VALIDATION_ERROR, alike on both backends -------------------


def _nested(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


LOW = "0001-01-01T00:00:00+01:00"
HIGH = "9999-12-31T23:30:00-01:00"


@pytest.fixture
async def typed(client: Client) -> None:
    await apply_ops(
        client,
        create_table(
            "typed",
            column("at", "timestamp"),
            column("label", "text"),
            column("n", "real"),
            column("data", "json"),
        ),
        insert(
            "typed",
            {"at": "2024-01-01T00:00:00Z", "label": "99999999999999999999", "n": 1e19, "data": 1},
            {"at": "0001-01-01T01:00:00+01:00", "label": "12", "n": 2.0, "data": "a"},
        ),
    )


BAD_OPERATIONS: list[tuple[str, dict[str, Any]]] = [
    ("a row with the lowest time and an offset", insert("typed", {"at": LOW})),
    ("a row with the highest time and an offset", insert("typed", {"at": HIGH})),
    (
        "an update setting such a time",
        {"op": "update", "table": "typed", "where": [], "set": {"at": HIGH}},
    ),
    ("a filter on such a time", {"op": "delete", "table": "typed", "where": [cond("at", "<", LOW)]}),
    (
        "an in-list holding such a time",
        {"op": "delete", "table": "typed", "where": [cond("at", "in", [HIGH])]},
    ),
    ("a column default of such a time", create_table("later", column("at", "timestamp", default=LOW))),
    (
        "text that becomes such a time",
        {"op": "alter_column_type", "table": "typed", "column": "label", "type": "timestamp"},
    ),
    ("a table named with a trailing newline", create_table("notes\n", column("v", "text"))),
    ("a reserved table name with a trailing newline", create_table("lessons\n", column("v", "text"))),
    ("a column named with a trailing newline", create_table("fine", column("v\n", "text"))),
    (
        "text beyond 64 bits becoming an integer",
        {"op": "alter_column_type", "table": "typed", "column": "label", "type": "integer"},
    ),
    (
        "a real beyond 64 bits becoming an integer",
        {"op": "alter_column_type", "table": "typed", "column": "n", "type": "integer"},
    ),
    ("an integer beyond 64 bits", create_table("big", column("n", "integer", default=2**63))),
    ("text holding NUL", insert("typed", {"label": "a\x00b"})),
    ("JSON holding NUL", insert("typed", {"data": {"k": ["a\x00b"]}})),
    ("JSON nested too deep", insert("typed", {"data": _nested(150)})),
]


@pytest.mark.parametrize(("case", "operation"), BAD_OPERATIONS, ids=[c for c, _ in BAD_OPERATIONS])
async def test_edge_of_range_input_in_a_plan_is_a_validation_error_and_changes_nothing(
    client: Client, typed: None, case: str, operation: dict[str, Any]
) -> None:
    before = await state(client)
    with pytest.raises(ToolFailed) as err:
        await apply_ops(client, operation)
    assert err.value.code == "VALIDATION_ERROR", case
    assert len(err.value.message) > 20 and err.value.message.endswith("."), case
    assert await state(client) == before
    # A dry run refuses it too: as the plan's error, or (checked before any operation runs) as the call's.
    try:
        dry = await call(client, "plan", plan=make_plan(await schema_hash(client), operation))
    except ToolFailed as refused:
        assert refused.code == "VALIDATION_ERROR", case
    else:
        assert [e["code"] for e in dry["errors"]] == ["VALIDATION_ERROR"], case
    assert await state(client) == before


@pytest.mark.parametrize(
    ("value", "col_type"),
    [
        (2**63, "integer"),
        (-(2**63) - 1, "integer"),
        (10**400, "real"),
        (10**5000, "integer"),
        ("a\x00b", "text"),
        ("\ud800", "text"),
        ({"k\x00": 1}, "json"),
        (float("nan"), "json"),
        ([float("inf")], "json"),
        (_nested(101), "json"),
        (10**400, "json"),
        (LOW, "timestamp"),
        (HIGH, "timestamp"),
    ],
    ids=lambda v: v if isinstance(v, str) and v.isprintable() else type(v).__name__,
)
def test_the_store_itself_refuses_values_no_backend_can_keep(value: Any, col_type: str) -> None:
    """Whatever the MCP layer checks first, the stores refuse these on their own (with a sentence)."""
    with pytest.raises(InvalidInputError) as err:
        coerce(value, col_type, "c")
    assert str(err.value).startswith("column 'c'") and str(err.value).endswith(".")


async def test_an_integer_out_of_range_is_named_in_the_error(client: Client, typed: None) -> None:
    with pytest.raises(ToolFailed) as err:
        await apply_ops(
            client, {"op": "alter_column_type", "table": "typed", "column": "label", "type": "integer"}
        )
    assert "99999999999999999999" in err.value.message
    assert "outside the integer range" in err.value.message
    with pytest.raises(ToolFailed) as err:
        await apply_ops(client, insert("typed", {"at": HIGH}))
    assert HIGH in err.value.message and "years 0001 to 9999" in err.value.message


async def test_integers_at_the_ends_of_64_bits_are_kept(client: Client) -> None:
    await apply_ops(
        client,
        create_table("ints", column("n", "integer"), column("t", "text")),
        insert("ints", {"n": -(2**63), "t": str(2**63 - 1)}),
        {"op": "alter_column_type", "table": "ints", "column": "t", "type": "integer"},
    )
    assert await query(client, "ints") == [{"id": 1, "n": -(2**63), "t": 2**63 - 1}]


@pytest.mark.parametrize(
    "where",
    [
        [cond("at", "=", LOW)],
        [cond("at", ">=", HIGH)],
        [cond("at", "in", ["2024-01-01T00:00:00Z", LOW])],
    ],
)
async def test_a_query_filter_on_an_edge_time_is_a_validation_error(
    client: Client, typed: None, where: list[dict[str, Any]]
) -> None:
    with pytest.raises(ToolFailed) as err:
        await call(client, "query_rows", table="typed", where=where)
    assert err.value.code == "VALIDATION_ERROR"
    assert "years 0001 to 9999" in err.value.message


async def test_the_earliest_time_in_utc_is_stored_as_a_four_digit_year(client: Client, typed: None) -> None:
    rows = await query(client, "typed", cond("at", "<", "2000-01-01T00:00:00Z"))
    assert [r["at"] for r in rows] == ["0001-01-01T00:00:00.000000Z"]


async def test_names_and_targets_with_a_trailing_newline_are_refused_where_they_are_looked_up(
    client: Client, typed: None
) -> None:
    for tool, args in (
        ("query_rows", {"table": "typed\n"}),
        ("history", {"target": "typed\n"}),
    ):
        with pytest.raises(ToolFailed) as err:
            await call(client, tool, **args)
        assert err.value.code == "VALIDATION_ERROR", tool


MIXED_JSON = [3, "b", None, 1.5, True, {"k": 1}, "A", False, [2], -7, {"a": 2}, ""]
# By kind, then by value within a kind: false, true, numbers, text, arrays and objects, nulls last.
MIXED_ORDER = [False, True, -7, 1.5, 3, "", "A", "b", [2], {"a": 2}, {"k": 1}, None]


async def test_a_json_column_holding_several_kinds_orders_by_kind_then_value(client: Client) -> None:
    await apply_ops(
        client,
        create_table("mixed", column("data", "json")),
        insert("mixed", *({"data": v} for v in MIXED_JSON)),
    )
    ascending = await query(client, "mixed", order_by=[{"column": "data", "direction": "asc"}])
    assert [r["data"] for r in ascending] == MIXED_ORDER
    descending = await query(client, "mixed", order_by=[{"column": "data", "direction": "desc"}])
    assert [r["data"] for r in descending] == MIXED_ORDER[::-1]
    # Paging through the mixed order, two at a time, returns every row once, in order.
    seen: list[Any] = []
    cursor = None
    for _ in range(20):
        args: dict[str, Any] = {"table": "mixed", "order_by": [{"column": "data"}], "limit": 2}
        if cursor:
            args["cursor"] = cursor
        page = await call(client, "query_rows", **args)
        seen += [r["data"] for r in page["rows"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == MIXED_ORDER


async def test_a_cursor_nested_too_deep_is_a_validation_error(client: Client, typed: None) -> None:
    import base64

    cursor = base64.urlsafe_b64encode(b"[" * 2_500).decode()
    with pytest.raises(ToolFailed) as err:
        await call(client, "query_rows", table="typed", cursor=cursor)
    assert err.value.code == "VALIDATION_ERROR"
