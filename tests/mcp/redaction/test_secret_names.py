"""A project or org name that is a secret is refused, never stored (issue 21, item 6).

Names are stored, listed and shown as they are, and a redacted name would silently be
another project, so Lore refuses such a name with ``VALIDATION_ERROR`` and one sentence
that names the kind of secret but never the name: through every tool that takes a project
(a real MCP client), an imported line, ``init``/``create_key``, and ``LORE_ORG`` or
``LORE_PROJECT`` at start, which stops the command with one line and no traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mcp import Client

from lore_mcp.app import build_server
from lore_mcp.errors import InvalidArgument
from lore_mcp.services.keys import KeyService
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.transfer import Transfer
from lore_mcp.tools.registry import DEFAULT_TOOL_GROUPS
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call
from tests.support.processes import lore
from tests.support.secrets import AWS_KEY_ID, GITHUB_TOKEN, STRIPE_KEY

# One era: this module is not about the protocol (tests/conftest.py runs the surface in both).
pytestmark = pytest.mark.era(
    "2026-07-28",
    reason=("name checks, decided below the protocol whichever era carries the call"),
)

SECRET_PROJECTS = {
    "openai_key": "sk-" + "proj-" + "abc123def456ghi789jkl012mno345",
    "github_token": GITHUB_TOKEN,
    "aws_access_key": AWS_KEY_ID,
    "stripe_key": STRIPE_KEY,
}


@pytest.mark.parametrize(("kind", "project"), sorted(SECRET_PROJECTS.items()))
async def test_a_project_name_that_is_a_secret_is_refused_by_every_tool_and_nothing_is_stored(
    client: Client, kind: str, project: str
) -> None:
    await call(client, "save_lesson", problem="kept", resolution="kept")
    before = await call(client, "export_lessons")
    calls = [
        ("save_lesson", {"problem": "p", "resolution": "r", "project": project}),
        ("recall_lessons", {"query": "p", "project": project}),
        ("list_lessons", {"project": project}),
        ("export_lessons", {"project": project}),
        (
            "import_lessons",
            {
                "lessons": [{"id": "01JABCDEFGHJKMNPQRSTVWXYZ3", "problem": "p", "resolution": "r"}],
                "project": project,
            },
        ),
    ]
    for tool, arguments in calls:
        with pytest.raises(ToolFailed) as refused:
            await call(client, tool, **arguments)
        assert refused.value.code == "VALIDATION_ERROR", tool
        assert f"looks like a secret ({kind})" in refused.value.message, tool
        assert project not in refused.value.message and project.lower() not in refused.value.message.lower()
    assert await call(client, "export_lessons") == before


async def test_a_project_name_holding_a_secret_is_not_echoed_when_it_is_invalid_too(client: Client) -> None:
    with pytest.raises(ToolFailed) as refused:
        await call(
            client, "save_lesson", problem="p", resolution="r", project=SECRET_PROJECTS["openai_key"] + "!"
        )
    assert refused.value.code == "VALIDATION_ERROR"
    assert "[REDACTED:openai_key]" in refused.value.message
    assert "abc123def456" not in refused.value.message


async def test_an_imported_line_whose_project_is_a_secret_is_refused(service: LessonService) -> None:
    line = {"type": "lesson", "id": "01JABCDEFGHJKMNPQRSTVWXYZ4", "problem": "p", "resolution": "r"}
    report = Transfer(service).import_file(
        [json.dumps({**line, "project": SECRET_PROJECTS["github_token"]})],
        org="local",
        project=None,
        strict=False,
    )
    assert report.added == 0 and len(report.errors) == 1
    assert "secret" in str(report.errors[0]) and "Zx9Kq2Lm4" not in str(report.errors[0])


async def test_an_org_or_key_project_that_is_a_secret_is_refused(service: LessonService) -> None:
    keys = KeyService(service.store.keys)  # type: ignore[attr-defined]
    with pytest.raises(InvalidArgument, match=r"org name looks like a secret \(aws_access_key\)"):
        keys.init_org(SECRET_PROJECTS["aws_access_key"])
    keys.init_org("local")
    server = build_server(service, keys=keys, tools=(*DEFAULT_TOOL_GROUPS, "admin"))
    async with connected(server) as client:
        with pytest.raises(ToolFailed) as refused:
            await call(client, "create_key", name="ci", project=SECRET_PROJECTS["stripe_key"])
        listed = await call(client, "list_keys")
    assert refused.value.code == "VALIDATION_ERROR" and "stripe_key" in refused.value.message
    assert [k["name"] for k in listed["keys"]] == ["root"]
    assert keys.keys.get_org(SECRET_PROJECTS["aws_access_key"]) is None


@pytest.mark.parametrize("variable", ["LORE_ORG", "LORE_PROJECT"])
def test_a_secret_as_lore_org_or_lore_project_stops_the_cli_with_one_line_and_no_traceback(
    tmp_path: Path, variable: str
) -> None:
    secret = SECRET_PROJECTS["openai_key"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env |= {"LORE_DB_PATH": str(tmp_path / "lore.db"), variable: secret}
    for command in (["keys", "list"], ["export"], ["mcp"]):
        done = lore(env, *command)
        lines = done.stderr.strip().splitlines()
        assert done.returncode == 2, (command, done.stderr)
        assert lines == [
            f"lore-memory: VALIDATION_ERROR: invalid configuration: {variable} "
            f"(--{variable[5:].lower()}): looks like a secret (openai_key); choose a name that is not a credential."
        ], command
        assert "Traceback" not in done.stderr and "abc123" not in done.stderr + done.stdout
    assert not (tmp_path / "lore.db").exists()
