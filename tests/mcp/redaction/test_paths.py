"""A secret in any field of any write path is redacted in storage, in read-backs and in exports.

Every way a client can store text is covered: save_lesson and update_lesson (each text
field and the tags), import_lessons and the CLI import (also meta keys and values, and
the ``--from`` converters), plan and apply (row values in text and json columns, column
defaults, the message that becomes the commit message) and key names. Each check reads
the data back the ways a client can (get, list, recall, export, history, commits,
rows, keys) and looks for the secret in any case, since tags are lower-cased.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.cli.importers import convert
from lore_mcp.redaction import fit, redact
from lore_mcp.services.keys import KeyService
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.transfer import Transfer
from lore_mcp.tools.registry import DEFAULT_TOOL_GROUPS
from tests.support.clients import connected
from tests.support.helpers import call
from tests.support.plans import apply_ops, column, create_table, insert, make_plan, schema_hash
from tests.support.secrets import AWS_KEY_ID, GITHUB_TOKEN, GOOGLE_KEY, OPENAI_CLASSIC_KEY, STRIPE_KEY

# One era: this module is not about the protocol (tests/conftest.py runs the surface in both).
pytestmark = pytest.mark.era(
    "2026-07-28",
    reason=("what is redacted, decided before the store whichever era carries the call"),
)

# Real-looking secrets, one of each kind the issue names. Prefixes are split from
# bodies so repository secret scanners do not flag this file.
AWS = AWS_KEY_ID
GITHUB = GITHUB_TOKEN
JWT = "eyJhbGciOiJIUzI1NiJ9" + ".eyJzdWIiOiIxIn0.c2lnbmF0dXJl"
CARD = "4111 1111 1111 1111"  # passes the Luhn check
URL_PASSWORD = "Hunter2pass"
URL = f"postgres://bob:{URL_PASSWORD}@db.example.com/app"

SECRETS = {
    "aws_access_key": AWS,
    "github_token": GITHUB,
    "jwt": JWT,
    "credit_card": CARD,
    "url_password": URL,
}
# What must never be found, in any case: the secret itself (or its password part).
NEEDLES = [AWS, GITHUB, JWT, CARD, CARD.replace(" ", ""), f":{URL_PASSWORD}@"]
ALL_KINDS = sorted(SECRETS)


def assert_clean(value: Any) -> None:
    """No secret anywhere in ``value`` (any JSON), in any letter case."""
    text = json.dumps(value, ensure_ascii=False, default=str).lower()
    for needle in NEEDLES:
        assert needle.lower() not in text, f"{needle!r} survived in {text[:500]}"


def marker(kind: str) -> str:
    return f"[REDACTED:{kind}]"


async def read_backs(client: Client, lesson_id: str) -> list[dict[str, Any]]:
    """Every way a client reads a lesson back: get, list, recall, export, history, commits."""
    got = await call(client, "get_lesson", id=lesson_id)
    listed = await call(client, "list_lessons", verbose=True, limit=100)
    recalled = await call(client, "recall_lessons", query=got["problem"], verbose=True)
    exported = await call(client, "export_lessons")
    history = await call(client, "history")
    commits = [await call(client, "get_commit", commit_id=c["id"]) for c in history["commits"]]
    assert lesson_id in [x["id"] for x in listed["lessons"]]
    assert lesson_id in [x["id"] for x in exported["lessons"]]
    return [got, listed, recalled, exported, history, *commits]


def secret_fields(kind: str, secret: str) -> dict[str, Any]:
    return {
        "problem": f"{kind} deploy failed with {secret} in the log",
        "resolution": f"rotate {secret} and reload the {kind} service",
        "context": f"the {kind} config held {secret}",
        "source": f"ticket about {secret}",
        "tags": [secret, kind],
    }


def assert_fields_redacted(lesson: dict[str, Any], kind: str) -> None:
    for name in ("problem", "resolution", "context", "source"):
        assert marker(kind) in lesson[name], (name, lesson[name])
    assert marker(kind) in lesson["tags"][0], lesson["tags"]


# --- the patterns themselves --------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "secret"), sorted(SECRETS.items()))
def test_each_secret_is_found_in_its_original_case(kind: str, secret: str) -> None:
    result = redact(f"x {secret} y")
    assert result.kinds == (kind,)
    assert_clean(result.text)


def test_a_lower_cased_aws_key_or_jwt_is_still_a_secret() -> None:
    assert redact(AWS.lower()).kinds == ("aws_access_key",)
    assert redact(JWT.lower()).kinds == ("jwt",)
    # Words that merely start like a key stay: the lower-case form needs a digit.
    assert redact("asiapacificregionx and akiaabcdefghijklmnop").kinds == ()


def test_cutting_redacted_text_never_splits_a_marker() -> None:
    text = "h" * 43 + " [REDACTED:aws_access_key]"
    assert fit(text, 64) == "h" * 43
    assert fit("ab [REDACTED:jwt] cd", 64) == "ab [REDACTED:jwt] cd"
    assert fit("[REDACTED:jwt] " + "z" * 80, 20) == "[REDACTED:jwt] zzzzz"


# --- lessons -----------------------------------------------------------------------------------


async def test_save_lesson_redacts_a_secret_in_every_field_before_lower_casing_tags(client: Client) -> None:
    for kind, secret in SECRETS.items():
        saved = await call(client, "save_lesson", **secret_fields(kind, secret))
        assert saved["redacted"] == [kind] and saved["merged"] is False
        reads = await read_backs(client, saved["id"])
        assert_clean(reads)
        assert_fields_redacted(reads[0], kind)
        assert reads[0]["tags"][1] == kind


async def test_a_tag_that_redaction_makes_too_long_is_cut_without_the_secret(client: Client) -> None:
    grows = "Postgres://u:Pw9@" + "h" * 47  # 64 characters; the marker makes it 84
    ends_in_key = "H" * 43 + " " + AWS  # 64 characters; the marker would cross the limit
    saved = await call(
        client, "save_lesson", problem="tag limits", resolution="cut", tags=[grows, ends_in_key]
    )
    assert saved["redacted"] == ["aws_access_key", "url_password"]
    tags = (await call(client, "get_lesson", id=saved["id"]))["tags"]
    assert tags == [("postgres://u:[REDACTED:url_password]@" + "h" * 47)[:64], "h" * 43]
    assert ":pw9@" not in json.dumps(tags).lower() and all(len(t) <= 64 for t in tags)
    # A tag filter is normalised the same way, so the secret still finds its lesson.
    listed = await call(client, "list_lessons", tags=[ends_in_key])
    assert [x["id"] for x in listed["lessons"]] == [saved["id"]]


async def test_text_at_its_limit_stays_within_it_once_redacted_so_it_can_be_imported_again(
    client: Client,
) -> None:
    grows = " x://u:Pw9@h" * 10  # each password becomes a longer marker
    problem = "p" * (16_000 - len(grows)) + grows
    source = "s" * (500 - len(grows)) + grows
    saved = await call(client, "save_lesson", problem=problem, resolution="r", source=source)
    assert saved["redacted"] == ["url_password"]
    exported = (await call(client, "export_lessons"))["lessons"]
    assert len(exported[0]["problem"]) <= 16_000 and len(exported[0]["source"]) <= 500
    assert ":Pw9@" not in json.dumps(exported)
    await call(client, "delete_lesson", id=saved["id"])
    moved = await call(client, "import_lessons", lessons=exported, project="copy")
    assert moved["added"] == 1


async def test_update_lesson_redacts_a_secret_in_every_field(client: Client) -> None:
    for kind, secret in SECRETS.items():
        saved = await call(client, "save_lesson", problem=f"{kind} plain problem", resolution="plain fix")
        updated = await call(client, "update_lesson", id=saved["id"], **secret_fields(kind, secret))
        assert updated["redacted"] == [kind]
        assert_clean(updated)
        reads = await read_backs(client, saved["id"])
        assert_clean(reads)
        assert_fields_redacted(reads[0], kind)


def import_line(lesson_id: str) -> dict[str, Any]:
    """A lesson to import with every secret in every field, meta keys and values included."""
    everything = " ".join(SECRETS.values())
    return {
        "id": lesson_id,
        "problem": f"import problem {everything}",
        "resolution": f"import resolution {everything}",
        "context": f"import context {everything}",
        "source": f"import source {AWS}",
        "tags": list(SECRETS.values()),
        "meta": {
            "note": f"uses {AWS}",
            GITHUB: "a secret as a key",
            "nested": {"list": [JWT, {"url": URL}], "card": CARD},
        },
    }


def assert_import_redacted(lesson: dict[str, Any]) -> None:
    assert_clean(lesson)
    assert all(marker(kind) in lesson["resolution"] for kind in ALL_KINDS)
    assert sorted(lesson["tags"]) == sorted(
        [
            "[REDACTED:aws_access_key]",
            "[REDACTED:github_token]",
            "[REDACTED:jwt]",
            "[REDACTED:credit_card]",
            "postgres://bob:[REDACTED:url_password]@db.example.com/app",
        ]
    )
    assert lesson["meta"] == {
        "note": "uses [REDACTED:aws_access_key]",
        "[REDACTED:github_token]": "a secret as a key",
        "nested": {
            "list": ["[REDACTED:jwt]", {"url": "postgres://bob:[REDACTED:url_password]@db.example.com/app"}],
            "card": "[REDACTED:credit_card]",
        },
    }


async def test_import_lessons_redacts_every_field_tags_and_meta_keys_and_values(client: Client) -> None:
    lesson_id = "01JABCDEFGHJKMNPQRSTVWXYZ0"
    result = await call(client, "import_lessons", lessons=[import_line(lesson_id)])
    assert result == {"added": 1, "skipped": 0, "merged": 0, "redacted": ALL_KINDS}
    reads = await read_backs(client, lesson_id)
    assert_clean(reads)
    assert_import_redacted(reads[0])


async def test_meta_keys_that_redact_alike_are_all_kept(client: Client) -> None:
    other = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2Yz"
    lesson = {"id": "01JABCDEFGHJKMNPQRSTVWXYZ1", "problem": "p", "resolution": "r"}
    await call(client, "import_lessons", lessons=[{**lesson, "meta": {GITHUB: 1, other: 2}}])
    meta = (await call(client, "get_lesson", id=lesson["id"]))["meta"]
    assert meta == {"[REDACTED:github_token]": 1, "[REDACTED:github_token]#2": 2}


async def test_the_cli_import_redacts_what_the_tool_does(service: LessonService) -> None:
    transfer = Transfer(service)
    lines = [json.dumps({"type": "lesson", **import_line("01JABCDEFGHJKMNPQRSTVWXYZ2")})]
    report = transfer.import_file(lines, org="local", project=None, strict=True, actor="cli:import")
    assert (report.added, report.errors, sorted(report.redacted)) == (1, [], ALL_KINDS)
    async with connected(build_server(service)) as client:
        reads = await read_backs(client, "01JABCDEFGHJKMNPQRSTVWXYZ2")
    assert_clean(reads)
    assert_import_redacted(reads[0])
    exported = list(transfer.export_lines("local", None, with_history=True))
    assert [line["type"] for line in exported] == ["lesson", "commit"]
    assert_clean(exported)


async def test_other_servers_exports_are_redacted_before_tags_are_lower_cased_or_text_is_cut(
    service: LessonService,
) -> None:
    graph = "\n".join(
        json.dumps(line)
        for line in (
            {"type": "entity", "name": AWS, "entityType": "credential", "observations": [f"leaked {GITHUB}"]},
            {"type": "relation", "from": AWS, "to": "billing", "relationType": "unlocks"},
        )
    )
    long_tag = "x" * 50 + " " + GITHUB  # too long for a tag: cut, and the cut falls in the token
    first_line = "y " * 90 + JWT + " and more"  # the problem is cut near 200 characters, in the token
    memories = json.dumps({"memories": [{"content": first_line, "tags": [long_tag, AWS]}]})
    transfer = Transfer(service)
    redacted: set[str] = set()
    for source, text in (("server-memory", graph), ("mcp-memory-service", memories)):
        converted = convert(source, text)
        assert converted.errors == []
        report = transfer.import_file(converted.lines, org="local", project=None, strict=True)
        assert report.errors == [] and report.added == 1
        redacted |= report.redacted
    assert {"aws_access_key", "github_token", "jwt"} <= redacted
    async with connected(build_server(service)) as client:
        listed = (await call(client, "list_lessons", verbose=True))["lessons"]
        exported = await call(client, "export_lessons")
    assert len(listed) == 2
    assert_clean([listed, exported])
    for lesson in listed:
        assert all(len(tag) <= 64 for tag in lesson["tags"])
        assert "[REDACTED:aws_access_key]" in lesson["tags"]
    # No fragment of a cut token survives either.
    text = json.dumps(listed)
    assert GITHUB[:20] not in text and JWT[:24] not in text


# --- structured memory ---------------------------------------------------------------------------


async def test_plan_and_apply_redact_row_values_defaults_and_the_message(client: Client) -> None:
    table = create_table(
        "notes",
        column("v", "text"),
        column("doc", "json"),
        column("owner", "text", default=f"default {URL}"),
    )
    rows = insert(
        "notes",
        {"v": f"key {AWS}", "doc": {"token": [f"bearer of {JWT}"], GITHUB: {"deep": CARD}}},
        {"v": "plain", "doc": f"as a string {GITHUB}"},
    )
    update = {
        "op": "update",
        "table": "notes",
        "where": [{"column": "v", "op": "=", "value": "plain"}],
        "set": {"v": f"card {CARD}", "doc": [URL]},
    }
    message = f"load notes with {AWS}"

    base = await schema_hash(client)
    planned = await call(client, "plan", plan=make_plan(base, table, rows, update, message=message))
    assert planned["ok"] is True and planned["redacted"] == ALL_KINDS
    assert_clean(planned)

    applied = await apply_ops(client, table, rows, update, message=message)
    assert applied["redacted"] == ALL_KINDS
    assert_clean(applied)

    got = await call(client, "query_rows", table="notes")
    assert_clean(got)
    assert [r["v"] for r in got["rows"]] == ["key [REDACTED:aws_access_key]", "card [REDACTED:credit_card]"]
    assert got["rows"][0]["doc"] == {
        "token": ["bearer of [REDACTED:jwt]"],
        "[REDACTED:github_token]": {"deep": "[REDACTED:credit_card]"},
    }
    assert got["rows"][1]["doc"] == ["postgres://bob:[REDACTED:url_password]@db.example.com/app"]
    assert got["rows"][0]["owner"] == "default postgres://bob:[REDACTED:url_password]@db.example.com/app"
    history = await call(client, "history")
    assert history["commits"][0]["message"] == "load notes with [REDACTED:aws_access_key]"
    commit = await call(client, "get_commit", commit_id=applied["commit_id"])
    schema = await call(client, "schema")
    assert_clean([history, commit, schema])


async def test_a_message_at_its_limit_stays_within_it_once_redacted(client: Client) -> None:
    message = "m" * 1_960 + " x://u:Pw9@h" * 3  # 1,996 characters; 2,059 once redacted
    applied = await apply_ops(client, create_table("t", column("v", "text")), message=message)
    assert applied["redacted"] == ["url_password"]
    stored = (await call(client, "history"))["commits"][0]["message"]
    assert len(stored) <= 2_000 and ":Pw9@" not in stored and "[REDACTED:url_password]" in stored


async def test_a_plan_without_secrets_reports_none(client: Client) -> None:
    applied = await apply_ops(
        client, create_table("clean", column("v", "text")), insert("clean", {"v": "ok"})
    )
    assert applied["redacted"] == []


# --- keys ---------------------------------------------------------------------------------------


async def test_key_names_are_redacted_in_the_tool_and_the_cli(service: LessonService) -> None:
    keys = KeyService(service.store.keys)  # type: ignore[attr-defined]
    keys.init_org("local", name=f"org of {AWS}")
    server = build_server(service, keys=keys, tools=(*DEFAULT_TOOL_GROUPS, "admin"))
    async with connected(server) as client:
        created = await call(client, "create_key", name=f"ci {GITHUB}")
        assert created["name"] == "ci [REDACTED:github_token]" and created["redacted"] == ["github_token"]
        cli_made = keys.create_key("local", name=f"laptop {URL}", project=None, root=False)  # `keys create`
        assert cli_made.redacted == ["url_password"]
        listed = await call(client, "list_keys")
    assert [k["name"] for k in listed["keys"]] == [
        "root",
        "ci [REDACTED:github_token]",
        "laptop postgres://bob:[REDACTED:url_password]@db.example.com/app",
    ]
    assert_clean([created, listed])
    assert_clean(keys.keys.get_org("local"))


async def test_a_key_name_that_redaction_makes_too_long_stays_within_the_limit(
    service: LessonService,
) -> None:
    keys = KeyService(service.store.keys)  # type: ignore[attr-defined]
    keys.init_org("local")
    name = "n" * 80 + " " + "x://u:Pw9@h"  # 92 characters; 114 once redacted
    created = keys.create_key("local", name=name, project=None, root=False)
    assert len(created.name) <= 100 and ":Pw9@" not in created.name
    assert created.redacted == ["url_password"]


# --- the common shapes (issue 21): through the tools ------------------------------------------

OPENAI_KEY = OPENAI_CLASSIC_KEY
# kind -> (as pasted, what must not survive): the shapes issue 21 found missed.
COMMON = {
    "google_api_key": (GOOGLE_KEY, "SyD-9tSrke72PouQMnMX"),
    "stripe_key": (STRIPE_KEY, "4eC39HqLyjWDarjtT1zdp7dc"),
    "secret_assignment": ("PASSWORD=Hunter2xyz", "hunter2xyz"),
    "openai_key": (OPENAI_KEY[:10] + "\u200b" + OPENAI_KEY[10:], OPENAI_KEY[10:]),
    "gitlab_token": ("glpat-" + "x1Y2z3A4b5C6d7E8f9G0", "x1y2z3a4b5c6d7e8f9g0"),
}
WIDE_KEY = "".join(chr(ord(c) + 0xFEE0) for c in OPENAI_KEY)  # the key in fullwidth letters


def assert_gone(value: Any, *needles: str) -> None:
    """None of ``needles`` anywhere in ``value``, in any case."""
    text = json.dumps(value, ensure_ascii=False, default=str).lower()
    for needle in needles:
        assert needle.lower() not in text, f"{needle!r} survived in {text[:500]}"


async def test_the_common_shapes_are_redacted_in_every_field_and_every_read_back(client: Client) -> None:
    for kind, (secret, needle) in COMMON.items():
        saved = await call(client, "save_lesson", **secret_fields(kind, secret))
        assert saved["redacted"] == [kind]
        reads = await read_backs(client, saved["id"])
        assert_gone(reads, needle, secret)
        assert_fields_redacted(reads[0], kind)
    saved = await call(client, "save_lesson", problem=f"wide {WIDE_KEY} key", resolution="rotate")
    got = await call(client, "get_lesson", id=saved["id"])
    assert got["problem"] == "wide [REDACTED:openai_key] key" and saved["redacted"] == ["openai_key"]


async def test_a_recall_query_holding_a_secret_is_redacted_before_it_is_embedded(
    client: Client, service: LessonService, monkeypatch: pytest.MonkeyPatch
) -> None:
    embedded: list[str] = []
    encode = service.embedder.encode_query

    def spy(text: str) -> Any:
        embedded.append(text)
        return encode(text)

    monkeypatch.setattr(service.embedder, "encode_query", spy)
    query = f"deploy failed {COMMON['stripe_key'][0]} with PASSWORD=Hunter2xyz and {WIDE_KEY}"
    await call(client, "recall_lessons", query=query)
    assert embedded == [
        "deploy failed [REDACTED:stripe_key] with PASSWORD=[REDACTED:secret_assignment] and [REDACTED:openai_key]"
    ]


# Issue 34, item 5: characters of the invisible class the first table missed (combining
# grapheme joiner, Mongolian vowel separator, invisible separator), and a key glued to a word.
HIDDEN = {
    "\u034f": ("google_api_key", GOOGLE_KEY[:4] + "\u034f" + GOOGLE_KEY[4:]),
    "\u180e": ("stripe_key", STRIPE_KEY[:9] + "\u180e" + STRIPE_KEY[9:]),
    "\u2063": ("github_token", GITHUB_TOKEN[:5] + "\u2063" + GITHUB_TOKEN[5:]),
    "glued": ("stripe_key", "x" + STRIPE_KEY),
}


@pytest.mark.parametrize("how", list(HIDDEN), ids=["U+034F", "U+180E", "U+2063", "glued"])
async def test_a_key_split_by_any_invisible_character_or_glued_is_redacted_everywhere(
    client: Client, how: str
) -> None:
    kind, secret = HIDDEN[how]
    saved = await call(client, "save_lesson", **secret_fields(kind, secret))
    assert saved["redacted"] == [kind]
    reads = await read_backs(client, saved["id"])
    assert_gone(reads, secret, secret.replace(how, "")[-20:])
    assert_fields_redacted(reads[0], kind)
