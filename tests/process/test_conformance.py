"""The official MCP conformance suite against a real `lore-memory mcp --transport http` process,
and the protocol features it reaches (``lore_mcp.transport.protocol_extras``) checked on Lore's own data.

The suite (``@modelcontextprotocol/conformance``, run with ``npx`` on Node 22) is a client
that plays one scenario per protocol feature. Scenarios that call its fixtures (``test_*``
tools, ``test://`` resources, ``test_*`` prompts) cannot pass against a real server; they are
listed in ``conformance-baseline.json`` with a reason. Everything else must pass. Note that
tools-call-simple-text and tools-call-error pass without fixtures: they only check that a
call of an unknown tool answers some text, and an error.

No network or no ``npx`` is a failure, not a skip: the first run downloads Node 22 and the
suite from the npm registry into npm's cache; later runs use the cache (``--prefer-offline``).
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, PromptReference, ResourceTemplateReference

from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.transport.server import LoreServer
from tests.support.clients import no_deprecation_warnings
from tests.support.node import node_env, npx
from tests.support.processes import lore_env, lore_http
from tests.support.stores import open_store
from tests.support.team import team_server

CONFORMANCE = "@modelcontextprotocol/conformance@0.1.16"
BASELINE = Path(__file__).with_name("conformance-baseline.json")
RESULT_DIR = re.compile(r"^server-(?P<scenario>.+)-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\d-\d+Z$")
FAILED = frozenset({"FAILURE", "ERROR"})


# The suite


def load_baseline() -> dict[str, str]:
    baseline = json.loads(BASELINE.read_text())
    assert baseline["suite"] == CONFORMANCE, "the baseline was made for another version of the suite"
    return baseline["scenarios"]


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """Run the whole active suite once; scenario name -> its checks."""
    tmp = tmp_path_factory.mktemp("conformance")
    out = tmp / "results"
    with lore_http(lore_env(tmp / "lore.db"), tmp / "server.log", "--dev-no-auth") as url:
        try:
            run = subprocess.run(
                [*npx(CONFORMANCE), "conformance", "server", "--url", url, "--output-dir", str(out)],
                env=node_env(),
                cwd=tmp,
                capture_output=True,
                text=True,
                timeout=240,
            )
        except subprocess.TimeoutExpired as exc:
            pytest.fail(f"the conformance suite ran over 240 s:\n{str(exc.stdout)[-3000:]}")
    ran = re.findall(r"^=== Running scenario: (\S+) ===$", run.stdout, re.MULTILINE)
    if not ran:
        pytest.fail(
            f"the conformance suite did not run (exit {run.returncode}; no network for npx?):\n"
            f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}"
        )
    results: dict[str, list[dict[str, Any]]] = {}
    for directory in sorted(out.iterdir()) if out.is_dir() else []:
        match = RESULT_DIR.match(directory.name)
        assert match, f"unexpected entry in the suite's output: {directory.name}"
        results[match["scenario"]] = json.loads((directory / "checks.json").read_text())
    assert sorted(results) == sorted(ran), f"scenarios run {ran}, results for {sorted(results)}"
    return results


def failures(checks: list[dict[str, Any]]) -> list[str]:
    failed = [f"{c['id']}: {c.get('errorMessage', c['status'])}" for c in checks if c["status"] in FAILED]
    return failed or ([] if checks else ["no checks reported"])


def test_baseline_lists_only_fixture_scenarios_with_a_reason() -> None:
    for scenario, reason in load_baseline().items():
        assert reason.strip() and "\n" not in reason, scenario
        assert re.search(r"\btest_\w+|\btest://", reason), f"{scenario}: not a fixture reason: {reason}"


def test_every_scenario_outside_the_baseline_passes(suite: dict[str, list[dict[str, Any]]]) -> None:
    baseline = load_baseline()
    failing = {name: failures(checks) for name, checks in suite.items() if name not in baseline}
    failing = {name: why for name, why in failing.items() if why}
    assert not failing, "conformance scenarios failing:\n" + json.dumps(failing, indent=2)
    assert len(suite) - len(baseline) >= 12  # what passes today; the suite did not shrink silently


def test_baselined_scenarios_still_exist_and_still_fail(suite: dict[str, list[dict[str, Any]]]) -> None:
    baseline = load_baseline()
    gone = sorted(set(baseline) - set(suite))
    assert not gone, f"baselined scenarios the suite no longer has (remove them): {gone}"
    passing = sorted(name for name in baseline if not failures(suite[name]))
    assert not passing, f"baselined scenarios that pass now (remove them from the baseline): {passing}"


# What the suite cannot check without fixtures: the same features on Lore's own data.


@pytest.fixture
def local_server(tmp_path: Path, embedder: Embedder, request: pytest.FixtureRequest) -> Iterator[LoreServer]:
    store = open_store("local", tmp_path, request)
    yield build_server(LessonService(store, embedder, default_project="default"))
    store.close()


class Inbox:
    """Notifications a client received."""

    def __init__(self) -> None:
        self.messages: list[Any] = []

    async def __call__(self, message: Any) -> None:
        self.messages.append(message)

    def updated(self) -> list[str]:
        return [
            m.params.uri
            for m in self.messages
            if getattr(m, "method", "") == "notifications/resources/updated"
        ]

    def logs(self) -> list[Any]:
        return [m.params for m in self.messages if getattr(m, "method", "") == "notifications/message"]

    async def wait_for(self, count: int, what: str = "updated") -> list[Any]:
        with anyio.fail_after(5):
            while len(getattr(self, what)()) < count:
                await anyio.sleep(0.01)
        await anyio.sleep(0.05)  # and nothing more arrives
        return getattr(self, what)()


async def save(client: Client, problem: str) -> str:
    result = await client.call_tool("save_lesson", {"problem": problem, "resolution": f"fix for {problem}"})
    assert not result.is_error, result
    return result.structured_content["id"]


async def test_lesson_ids_complete_by_prefix(local_server: LoreServer) -> None:
    async with Client(local_server, mode="legacy") as client:
        first = await save(client, "pip install fails behind a corporate proxy")
        second = await save(client, "docker build cannot reach the package mirror")
        template = ResourceTemplateReference(type="ref/resource", uri="lore://lessons/{id}")

        every = (await client.complete(template, {"name": "id", "value": ""})).completion
        assert sorted(every.values) == sorted([first, second]) and every.total == 2 and not every.has_more
        one = (await client.complete(template, {"name": "id", "value": first.lower()})).completion
        assert one.values == [first]
        none = (await client.complete(template, {"name": "id", "value": "ZZZ"})).completion
        assert none.values == []

        with pytest.raises(MCPError) as unknown:
            await client.complete(
                ResourceTemplateReference(type="ref/resource", uri="lore://nothing/{x}"),
                {"name": "x", "value": ""},
            )
        assert unknown.value.code == INVALID_PARAMS


async def test_prompt_completion_and_unknown_prompts_are_invalid_params(local_server: LoreServer) -> None:
    @local_server.prompt(name="triage", description="Triage a failure.")
    def triage(failure: str) -> str:
        return f"Recall lessons about: {failure}"

    async with Client(local_server, mode="legacy") as client:
        prompt = PromptReference(type="ref/prompt", name="triage")
        assert (await client.complete(prompt, {"name": "failure", "value": "pi"})).completion.values == []
        for call in (
            client.complete(PromptReference(type="ref/prompt", name="nope"), {"name": "x", "value": ""}),
            client.complete(prompt, {"name": "nope", "value": ""}),
            client.get_prompt("nope"),
            client.get_prompt("triage"),  # its argument is missing
        ):
            with pytest.raises(MCPError) as error:
                await call
            assert error.value.code == INVALID_PARAMS
        assert "pip" in (await client.get_prompt("triage", {"failure": "pip"})).messages[0].content.text


async def test_subscribers_hear_of_changes_to_what_they_watch(local_server: LoreServer) -> None:
    inbox = Inbox()
    async with (
        Client(local_server, mode="legacy", message_handler=inbox) as watcher,
        Client(local_server, mode="legacy") as writer,
    ):
        assert watcher.server_capabilities.resources.subscribe
        lesson = await save(writer, "pytest hangs on exit with a live thread")
        other = await save(writer, "ruff and black disagree on a trailing comma")
        with no_deprecation_warnings():
            await watcher.subscribe_resource(f"lore://lessons/{lesson}")
            await watcher.subscribe_resource("lore://stats")

        await writer.call_tool("upvote_lesson", {"id": lesson})
        assert sorted(await inbox.wait_for(2)) == sorted([f"lore://lessons/{lesson}", "lore://stats"])

        inbox.messages.clear()
        await writer.call_tool("recall_lessons", {"query": "pytest hangs"})  # reads change nothing
        await writer.call_tool("upvote_lesson", {"id": other})  # another lesson: only the stats changed
        assert await inbox.wait_for(1) == ["lore://stats"]

        inbox.messages.clear()
        with no_deprecation_warnings():
            await watcher.unsubscribe_resource("lore://stats")
        await writer.call_tool("delete_lesson", {"id": lesson})
        assert await inbox.wait_for(1) == [f"lore://lessons/{lesson}"]


async def test_subscriptions_stay_within_the_org(
    tmp_path: Path, embedder: Embedder, request: pytest.FixtureRequest
) -> None:
    store = open_store("local", tmp_path, request)
    try:
        with team_server(store, embedder) as team:
            acme = team.keys.init_org("acme").key
            globex = team.keys.init_org("globex").key
            inbox = Inbox()
            async with AsyncExitStack() as stack:

                async def connect(key: str, inbox: Inbox | None = None) -> Client:
                    http = await stack.enter_async_context(
                        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=60)
                    )
                    transport = streamable_http_client(team.url, http_client=http)
                    client = Client(transport, mode="legacy", message_handler=inbox)
                    return await stack.enter_async_context(client)

                watcher = await connect(acme, inbox)
                outsider = await connect(globex)
                colleague = await connect(acme)
                with no_deprecation_warnings():
                    await watcher.subscribe_resource("lore://stats")
                await save(outsider, "globex saves a lesson")
                await save(colleague, "acme saves a lesson")
                assert await inbox.wait_for(1) == ["lore://stats"]
    finally:
        store.close()


async def test_log_level_is_per_session_and_filters(local_server: LoreServer) -> None:
    inbox = Inbox()
    async with Client(local_server, mode="legacy", message_handler=inbox) as client:
        assert client.server_capabilities.logging is not None
        await client.call_tool("list_lessons", {})
        assert inbox.logs() == []  # nothing until the session asks
        with no_deprecation_warnings():
            await client.set_logging_level("debug")
        await client.call_tool("list_lessons", {})
        [log] = await inbox.wait_for(1, "logs")
        assert log.level == "debug" and log.logger == "lore" and "list_lessons answered in" in log.data
        with no_deprecation_warnings():
            await client.set_logging_level("info")
        inbox.messages.clear()
        await client.call_tool("list_lessons", {})
        await anyio.sleep(0.1)
        assert inbox.logs() == []
