"""Input at the edges of what the backends can hold is VALIDATION_ERROR on both, and stores nothing.

Each case here reached INTERNAL_ERROR on one backend, or was stored by SQLite and
refused by Postgres, or passed a name check it should not have: times that leave
years 1-9999 once converted to UTC, vote counts beyond Postgres's 32-bit integer,
U+0000 (Postgres cannot store it), lone surrogates, names with a trailing newline
(``^...$`` with ``match`` lets one by), and ``meta`` beyond its bounds. Values just
inside the edges are stored, and read back the same on both backends.
"""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.errors import InvalidArgument
from lore_mcp.services.keys import KeyService
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.plan_models import PlanModel
from lore_mcp.services.structured import StructuredService
from lore_mcp.services.transfer import Transfer, checked_lesson, refusal
from lore_mcp.tools.registry import DEFAULT_TOOL_GROUPS
from tests.support.bad_input import GOOD, fails, nothing_stored
from tests.support.clients import connected
from tests.support.helpers import call
from tests.support.plans import apply_ops, column, create_table, insert, make_plan, schema_hash

# One era: this module is not about the protocol (tests/conftest.py runs the surface in both).
pytestmark = pytest.mark.era(
    "2026-07-28",
    reason=(
        "values at the backends' edges, checked before any era-specific code; both eras' refusals "
        "are in test_tool_errors"
    ),
)

LESSON_ID = "01JABCDEFGHJKMNPQRSTVWXYZ0"
IMPORTED = {"id": LESSON_ID, **GOOD}
NUL = "bad \x00 text"
SURROGATE = "bad \ud800 text"


# --- import_lessons -----------------------------------------------------------------------------

OUT_OF_RANGE_TIMES = ["0001-01-01T00:00:00+01:00", "9999-12-31T23:30:00-01:00"]


@pytest.mark.parametrize("when", OUT_OF_RANGE_TIMES)
@pytest.mark.parametrize("field", ["created_at", "updated_at", "expires_at"])
async def test_an_import_time_outside_years_1_to_9999_in_utc_is_refused(
    client: Client, field: str, when: str
) -> None:
    message = await fails(client, "import_lessons", lessons=[{**IMPORTED, field: when}])
    assert field in message and "UTC" in message
    await nothing_stored(client)


async def test_import_times_at_the_ends_of_the_range_in_utc_are_kept(client: Client) -> None:
    lesson = {
        **IMPORTED,
        "created_at": "0001-01-01T00:00:00Z",
        "updated_at": "9999-12-31T23:59:59Z",
        "expires_at": "9999-12-31T23:59:59+00:00",
    }
    assert (await call(client, "import_lessons", lessons=[lesson]))["added"] == 1
    got = await call(client, "get_lesson", id=LESSON_ID)
    assert got["created_at"].startswith("0001-01-01T00:00:00")
    assert got["updated_at"].startswith("9999-12-31T23:59:59")
    assert got["expires_at"].startswith("9999-12-31T23:59:59")
    assert [x["id"] for x in (await call(client, "export_lessons"))["lessons"]] == [LESSON_ID]


@pytest.mark.parametrize("count", [2**31, 2**63, 10**30])
@pytest.mark.parametrize("field", ["upvotes", "downvotes"])
async def test_an_import_vote_count_beyond_32_bits_is_refused(client: Client, field: str, count: int) -> None:
    message = await fails(client, "import_lessons", lessons=[{**IMPORTED, field: count}])
    assert field in message
    await nothing_stored(client)


async def test_the_largest_vote_count_is_kept_on_both_backends(client: Client) -> None:
    top = 2**31 - 1
    await call(client, "import_lessons", lessons=[{**IMPORTED, "upvotes": top, "downvotes": top}])
    got = await call(client, "get_lesson", id=LESSON_ID)
    assert (got["upvotes"], got["downvotes"]) == (top, top)


UNSTORABLE_IMPORTS = {
    "problem": {"problem": NUL},
    "resolution": {"resolution": NUL},
    "context": {"context": NUL},
    "source": {"source": NUL},
    "tag": {"tags": ["ok", NUL]},
    "meta value": {"meta": {"a": {"b": [NUL]}}},
    "meta key": {"meta": {NUL: 1}},
    "surrogate problem": {"problem": SURROGATE},
    "surrogate tag": {"tags": [SURROGATE]},
    "surrogate meta": {"meta": {"a": SURROGATE}},
    "project with a newline": {"project": "alpha\n"},
    "id with a newline": {"id": LESSON_ID[:-1] + "\n"},
    "meta over 16 KB": {"meta": {"blob": "x" * 17_000}},
    "meta 9 levels deep": {"meta": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {}}}}}}}}}},
    "meta 300 keys wide": {"meta": {f"k{i}": i for i in range(300)}},
    "meta integer beyond 64 bits": {"meta": {"n": 2**64}},
}


@pytest.mark.parametrize("case", sorted(UNSTORABLE_IMPORTS))
async def test_an_import_of_text_or_meta_lore_cannot_store_is_refused(client: Client, case: str) -> None:
    await fails(client, "import_lessons", lessons=[{**IMPORTED, **UNSTORABLE_IMPORTS[case]}])
    await nothing_stored(client)


def test_a_lone_surrogate_in_a_meta_key_is_refused_as_the_tool_would() -> None:
    # The MCP client cannot even send such a key (it fails to encode it), but a client
    # writing JSON by hand can: the server's check is tested on the model it uses.
    with pytest.raises(InvalidArgument) as err:
        checked_lesson({**IMPORTED, "meta": {"ok": {SURROGATE: 1}}})
    assert "meta" in refusal(err.value) and "surrogate" in refusal(err.value)


async def test_a_lone_surrogate_in_a_json_key_of_a_plan_is_refused(service: LessonService) -> None:
    tables = StructuredService(service)
    empty = (await tables.schema())["schema_hash"]
    await tables.apply(PlanModel.model_validate(make_plan(empty, create_table("t", column("doc", "json")))))
    base = (await tables.schema())["schema_hash"]
    plan = PlanModel.model_validate(make_plan(base, insert("t", {"doc": {SURROGATE: 1}})))
    for run in (tables.plan, tables.apply):
        with pytest.raises(InvalidArgument, match="surrogate"):
            await run(plan)
    assert len((await tables.history(None, 10, None))["commits"]) == 1


async def test_meta_just_inside_its_bounds_is_kept(client: Client) -> None:
    meta = {"deep": {"a": {"b": {"c": {"d": {"e": {"f": 1}}}}}}, **{f"k{i}": i for i in range(200)}}
    await call(client, "import_lessons", lessons=[{**IMPORTED, "meta": meta}])
    assert (await call(client, "get_lesson", id=LESSON_ID))["meta"] == meta


async def test_an_import_into_a_project_with_a_trailing_newline_is_refused(client: Client) -> None:
    await fails(client, "import_lessons", lessons=[IMPORTED], project="alpha\n")
    await nothing_stored(client)


async def test_the_cli_import_refuses_the_same_lines_and_writes_nothing(service: LessonService) -> None:
    bad = [
        {**IMPORTED, "created_at": OUT_OF_RANGE_TIMES[0]},
        {**IMPORTED, "upvotes": 2**31},
        {**IMPORTED, "problem": NUL},
        {**IMPORTED, "meta": {"n": 1, "k": NUL}},
        {**IMPORTED, "project": "alpha\n"},
    ]
    lines = [json.dumps({"type": "lesson", **lesson}) for lesson in bad]
    lines.append(json.dumps({"type": "lesson", **IMPORTED, "meta": {"x": float("nan")}}))  # NaN
    report = Transfer(service).import_file(lines, org="local", project=None, strict=True)
    assert [e.split(":")[0] for e in report.errors] == [f"line {n}" for n in range(1, 7)]
    assert report.added == 0
    async with connected(build_server(service)) as client:
        await nothing_stored(client)


# --- lesson tools -------------------------------------------------------------------------------

UNSTORABLE_SAVES = {
    "problem": {"problem": NUL},
    "resolution": {"resolution": NUL},
    "context": {"context": NUL},
    "source": {"source": NUL},
    "tag": {"tags": [NUL]},
    "surrogate tag": {"tags": [SURROGATE]},
    "surrogate context": {"context": SURROGATE},
    "surrogate source": {"source": SURROGATE},
    "project with a newline": {"project": "alpha\n"},
}


@pytest.mark.parametrize("case", sorted(UNSTORABLE_SAVES))
async def test_save_lesson_refuses_text_lore_cannot_store(client: Client, case: str) -> None:
    await fails(client, "save_lesson", **{**GOOD, **UNSTORABLE_SAVES[case]})
    await nothing_stored(client)
    await nothing_stored(client, project="alpha")


@pytest.mark.parametrize("case", sorted(set(UNSTORABLE_SAVES) - {"project with a newline"}))
async def test_update_lesson_refuses_text_lore_cannot_store(client: Client, case: str) -> None:
    saved = await call(client, "save_lesson", **GOOD)
    before = await call(client, "get_lesson", id=saved["id"])
    await fails(client, "update_lesson", id=saved["id"], **UNSTORABLE_SAVES[case])
    assert await call(client, "get_lesson", id=saved["id"]) == before
    assert len((await call(client, "history"))["commits"]) == 1


@pytest.mark.parametrize(
    ("tool", "arguments"),
    [
        ("recall_lessons", {"query": NUL}),
        ("recall_lessons", {"query": "redis", "tags": [NUL]}),
        ("list_lessons", {"tags": [SURROGATE]}),
        ("get_lesson", {"id": LESSON_ID + "\n"}),
        ("upvote_lesson", {"id": LESSON_ID + "\n"}),
        ("list_lessons", {"cursor": LESSON_ID + "\n"}),
        ("list_lessons", {"project": "alpha\n"}),
        ("history", {"target": LESSON_ID + "\n"}),
        ("history", {"target": "notes\n"}),
        ("get_commit", {"commit_id": LESSON_ID + "\n"}),
    ],
)
async def test_reads_refuse_nul_and_names_with_a_trailing_newline(
    client: Client, tool: str, arguments: dict[str, Any]
) -> None:
    await call(client, "save_lesson", **GOOD)
    await fails(client, tool, **arguments)


# --- structured memory --------------------------------------------------------------------------


async def notes(client: Client) -> list[str]:
    """A table with a text and a json column, one row; returns the commit ids so far."""
    await apply_ops(
        client,
        create_table("notes", column("v", "text"), column("doc", "json")),
        insert("notes", {"v": "first", "doc": {"a": 1}}),
    )
    return [c["id"] for c in (await call(client, "history"))["commits"]]


UNSTORABLE_OPERATIONS = {
    "text value": [insert("notes", {"v": NUL})],
    "json value": [insert("notes", {"doc": {"a": [NUL]}})],
    "json key": [insert("notes", {"doc": {NUL: 1}})],
    "json string": [insert("notes", {"doc": NUL})],
    "surrogate value": [insert("notes", {"v": SURROGATE})],
    "json integer beyond 64 bits": [insert("notes", {"doc": {"n": 2**70}})],
    "update set": [{"op": "update", "table": "notes", "where": [], "set": {"v": NUL}}],
    "update filter": [
        {
            "op": "update",
            "table": "notes",
            "where": [{"column": "v", "op": "=", "value": NUL}],
            "set": {"v": "x"},
        }
    ],
    "column default": [{"op": "add_column", "table": "notes", "column": column("w", "text", default=NUL)}],
    "json nested too deep": [insert("notes", {"doc": json.loads("[" * 70 + "]" * 70)})],
}


@pytest.mark.parametrize("case", sorted(UNSTORABLE_OPERATIONS))
@pytest.mark.parametrize("tool", ["plan", "apply"])
async def test_plans_with_text_lore_cannot_store_are_refused(client: Client, tool: str, case: str) -> None:
    commits = await notes(client)
    rows = (await call(client, "query_rows", table="notes"))["rows"]
    base = await schema_hash(client)
    await fails(client, tool, plan=make_plan(base, *UNSTORABLE_OPERATIONS[case]))
    assert (await call(client, "query_rows", table="notes"))["rows"] == rows
    assert [c["id"] for c in (await call(client, "history"))["commits"]] == commits


@pytest.mark.parametrize("message", [NUL, SURROGATE])
async def test_a_plan_message_lore_cannot_store_is_refused(client: Client, message: str) -> None:
    commits = await notes(client)
    base = await schema_hash(client)
    await fails(client, "apply", plan=make_plan(base, insert("notes", {"v": "x"}), message=message))
    assert [c["id"] for c in (await call(client, "history"))["commits"]] == commits


async def test_query_rows_refuses_a_nul_in_a_filter(client: Client) -> None:
    await notes(client)
    await fails(client, "query_rows", table="notes", where=[{"column": "v", "op": "=", "value": NUL}])
    await fails(client, "query_rows", table="notes", where=[{"column": "v", "op": "in", "value": ["a", NUL]}])


# --- keys ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ci \x00", "ci \ud800", "\n"])
async def test_a_key_name_lore_cannot_store_is_refused(service: LessonService, name: str) -> None:
    keys = KeyService(service.store.keys)  # type: ignore[attr-defined]
    keys.init_org("local")
    server = build_server(service, keys=keys, tools=(*DEFAULT_TOOL_GROUPS, "admin"))
    async with connected(server) as client:
        await fails(client, "create_key", name=name)
        await fails(client, "create_key", name="ci", project="alpha\n")
        await fails(client, "revoke_key", id="\x00")
        await fails(client, "revoke_key", id=SURROGATE)
        assert [k["name"] for k in (await call(client, "list_keys"))["keys"]] == ["root"]


# --- cursors ------------------------------------------------------------------------------------

# Digits that are not ASCII: ``str.isdigit`` takes them all, ``int`` takes "١٢" as 12 and
# refuses "²"; a history cursor is ASCII digits only.
NOT_ASCII_DIGITS = ["\u00b2", "\u0661\u0662", "\U0001d7cf", "1\n", " 1", "+1", "-1", "1_0", "9" * 13]


@pytest.mark.parametrize("cursor", NOT_ASCII_DIGITS)
async def test_a_history_cursor_other_than_ascii_digits_is_refused(client: Client, cursor: str) -> None:
    await call(client, "save_lesson", **GOOD)
    message = await fails(client, "history", cursor=cursor)
    assert "cursor" in message


async def test_a_history_cursor_of_ascii_digits_pages_on(client: Client) -> None:
    await call(client, "save_lesson", **GOOD)
    await call(client, "save_lesson", problem="Kafka consumer lags", resolution="Add partitions")
    assert [c["seq"] for c in (await call(client, "history", cursor="2"))["commits"]] == [1]


@pytest.mark.parametrize("cursor", ["a\x00", "zzz", LESSON_ID + "\n", "", "\u00b2" * 26])
async def test_export_lessons_refuses_a_cursor_no_server_gave_as_list_lessons_does(
    client: Client, cursor: str
) -> None:
    await call(client, "save_lesson", **GOOD)
    listed = await fails(client, "list_lessons", cursor=cursor)
    exported = await fails(client, "export_lessons", cursor=cursor)
    assert exported == listed


# --- numbers both backends read back alike -------------------------------------------------------

# Floats ``json.dumps`` writes with an exponent (Postgres jsonb gave the large ones back as
# integers), the smallest subnormal, and one with a negative exponent.
EXPONENT_FLOATS = [1e16, -1e16, 1.5e300, 1e308, 5e-324, 1e-07, 123456789012345680.0]


def positive_zero(value: Any) -> bool:
    return type(value) is float and value == 0.0 and math.copysign(1.0, value) == 1.0


async def test_floats_written_with_an_exponent_stay_floats_in_rows_and_commits(client: Client) -> None:
    made = await apply_ops(
        client,
        create_table("nums", column("r", "real"), column("doc", "json")),
        insert("nums", *({"r": x, "doc": {"x": x, "in": [x]}} for x in EXPONENT_FLOATS)),
    )
    rows = (await call(client, "query_rows", table="nums"))["rows"]
    commit = await call(client, "get_commit", commit_id=made["commit_id"])
    written = [e["after"] for e in commit["effects"]["rows"]]
    for got in (rows, written):
        assert [r["r"] for r in got] == EXPONENT_FLOATS
        assert [r["doc"] for r in got] == [{"x": x, "in": [x]} for x in EXPONENT_FLOATS]
        for row in got:
            assert type(row["r"]) is float and type(row["doc"]["x"]) is float
            assert type(row["doc"]["in"][0]) is float


async def test_floats_written_with_an_exponent_stay_floats_in_imported_meta(client: Client) -> None:
    meta = {"big": 1e16, "huge": [1.5e300], "n": 10**16}
    await call(client, "import_lessons", lessons=[{**IMPORTED, "meta": meta}])
    [exported] = (await call(client, "export_lessons"))["lessons"]
    assert exported["meta"] == meta
    assert type(exported["meta"]["big"]) is float and type(exported["meta"]["huge"][0]) is float
    assert type(exported["meta"]["n"]) is int


async def test_negative_zero_is_stored_as_zero_in_rows_and_commits(client: Client) -> None:
    made = await apply_ops(
        client,
        create_table("nums", column("r", "real"), column("doc", "json"), column("d", "real", default=-0.0)),
        insert("nums", {"r": -0.0, "doc": -0.0}, {"r": 0, "doc": {"z": [-0.0]}}),
    )
    rows = (await call(client, "query_rows", table="nums"))["rows"]
    commit = await call(client, "get_commit", commit_id=made["commit_id"])
    for got in (rows, [e["after"] for e in commit["effects"]["rows"]]):
        assert all(positive_zero(v) for v in (got[0]["r"], got[0]["doc"], got[0]["d"], got[1]["r"]))
        assert positive_zero(got[1]["doc"]["z"][0])
    [nums] = (await call(client, "schema"))["tables"]
    assert positive_zero(next(c for c in nums["columns"] if c["name"] == "d")["default"])


async def test_a_negative_zero_confidence_or_meta_number_is_stored_as_zero(client: Client) -> None:
    saved = await call(client, "save_lesson", **GOOD, confidence=-0.0)
    assert positive_zero((await call(client, "get_lesson", id=saved["id"]))["confidence"])
    updated = await call(client, "update_lesson", id=saved["id"], confidence=-0.0)
    assert positive_zero(updated["confidence"])
    other = {"problem": "Kafka consumer lags", "resolution": "Add partitions"}
    await call(
        client, "import_lessons", lessons=[{**IMPORTED, **other, "confidence": -0.0, "meta": {"z": -0.0}}]
    )
    imported = await call(client, "get_lesson", id=LESSON_ID)
    assert positive_zero(imported["confidence"]) and positive_zero(imported["meta"]["z"])
    newest = (await call(client, "history"))["commits"][0]
    [effect] = (await call(client, "get_commit", commit_id=newest["id"]))["effects"]["rows"]
    assert positive_zero(effect["after"]["confidence"]) and positive_zero(effect["after"]["meta"]["z"])


async def test_a_tag_with_nothing_visible_is_refused_and_changes_nothing(client: Client) -> None:
    """Issue 21: a tag of only invisible characters was accepted as a tag nobody can see."""
    for tag in ("\u200b", "\u200b\u200d\ufeff", "\u0301", " \u2060 "):
        message = await fails(client, "save_lesson", problem="p", resolution="r", tags=[tag])
        assert message == (
            "A tag must have a visible character; this one has only spaces, invisible or combining characters."
        )
    assert (await call(client, "list_lessons"))["lessons"] == []
    saved = await call(client, "save_lesson", problem="p", resolution="r", tags=["caf\u00e9", "\u200bx"])
    assert (await call(client, "get_lesson", id=saved["id"]))["tags"] == ["café", "\u200bx"]


async def test_lower_casing_a_long_tag_never_splits_a_character_from_its_mark(client: Client) -> None:
    """Issue 21: "İ" lower-cases to "i" and a combining dot, so 64 of them became 128 characters
    and the cut at 64 could leave a dot without its letter or a letter without its dot."""
    saved = await call(
        client, "save_lesson", problem="p", resolution="r", tags=["\u0130" * 64, "a" + "\u0130" * 63]
    )
    tags = (await call(client, "get_lesson", id=saved["id"]))["tags"]
    assert len(tags) == 2
    for tag in tags:
        assert len(tag) <= 64
        assert tag.count("i") == tag.count("\u0307"), tag  # every letter keeps its dot
