"""The team server as people run it: the CLI, a real server process, SIGTERM, remote mode."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest

from lore_mcp.embedding.embedder import Embedder
from stores.engine import structured
from tests.support.clients import connected
from tests.support.helpers import ToolFailed, call
from tests.support.plans import ROWS, big_operations, make_plan
from tests.support.processes import lore, remote_params, wait_healthy
from tests.support.stores import empty_postgres
from tests.support.team import free_port, http_client, team_server


def backend_env(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """Environment for a `lore-memory` process on a fresh, empty database of ``backend``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env["HF_HUB_OFFLINE"] = "1"
    if backend == "local":
        env["LORE_DB_PATH"] = str(tmp_path / "team.db")
    else:
        url = request.getfixturevalue("postgres_url")
        empty_postgres(url)
        env.update(LORE_STORE="postgres", LORE_DATABASE_URL=url)
    return env


async def requests_at(base: str, root_key: str) -> dict[str, int]:
    """The team server's MCP request counts, from ``GET /healthz`` (shown to a root key)."""
    async with httpx2.AsyncClient(timeout=10, headers={"Authorization": f"Bearer {root_key}"}) as http:
        return (await http.get(f"{base}/healthz")).json()["requests"]


def test_init_and_keys_from_the_command_line(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = backend_env(backend, tmp_path, request)
    init = lore(env, "init", "--json")
    assert init.returncode == 0, init.stderr
    root = json.loads(init.stdout)
    assert root["key"].startswith("lore_sk_") and len(root["key"]) == 40 and root["root"] is True
    again = lore(env, "init", "--json")
    assert again.returncode == 1 and "CONFLICT" in again.stderr and "already initialised" in again.stderr

    created = lore(env, "keys", "create", "--name", "ci bot", "--project", "alpha", "--json")
    assert created.returncode == 0, created.stderr
    ci = json.loads(created.stdout)
    assert set(ci) >= {"id", "key"} and ci["project"] == "alpha" and ci["root"] is False

    human = lore(env, "keys", "create", "--name", "laptop")
    assert human.returncode == 0 and "lore_sk_" in human.stdout and "shown this once" in human.stdout

    listed = lore(env, "keys", "list", "--json")
    keys = json.loads(listed.stdout)["keys"]
    assert [k["name"] for k in keys] == ["root", "ci bot", "laptop"]
    assert root["key"] not in listed.stdout and ci["key"] not in listed.stdout
    assert all("key" not in k for k in keys)

    revoked = lore(env, "keys", "revoke", ci["id"])
    assert revoked.returncode == 0 and "Revoked" in revoked.stdout
    table = lore(env, "keys", "list").stdout
    assert "ci bot" in table and root["key"] not in table
    assert json.loads(lore(env, "keys", "list", "--json").stdout)["keys"][1]["revoked_at"] is not None

    unknown = lore(env, "keys", "revoke", "01NOSUCHKEY0000000000000000")
    assert unknown.returncode == 1 and "NOT_FOUND" in unknown.stderr
    bad = lore(env, "keys", "create", "--name", "x", "--project", "no spaces allowed")
    assert bad.returncode == 1 and "VALIDATION_ERROR" in bad.stderr


async def test_sigterm_lets_requests_in_flight_finish(
    backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    env = backend_env(backend, tmp_path, request)
    key = json.loads(lore(env, "init", "--json").stdout)["key"]
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "lore_mcp", "mcp", "--transport", "http", "--port", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        base = f"http://127.0.0.1:{port}"
        wait_healthy(base, proc)
        saved: list[str] = []
        applied: list[dict[str, Any]] = []
        async with http_client(f"{base}/mcp", key) as client:
            await call(client, "recall_lessons", query="warm up the model")
            base_hash = (await call(client, "schema"))["schema_hash"]

            async def big_apply() -> None:
                plan = make_plan(base_hash, *big_operations(), message="in flight at SIGTERM")
                applied.append(await call(client, "apply", plan=plan))

            async def save(i: int) -> None:
                result = await call(
                    client,
                    "save_lesson",
                    problem=f"service {i} of {['billing', 'search', 'auth', 'mail'][i % 4]} leaks file handles",
                    resolution=f"close the pool in worker {i} before fork",
                    tags=[f"t{i}"],
                )
                saved.append(result["id"])

            started_before = (await requests_at(base, key))["started"]
            async with anyio.create_task_group() as tg:
                tg.start_soon(big_apply)
                for i in range(8):
                    tg.start_soon(save, i)
                # Signal only once all nine requests have reached the server and the apply is
                # still running: a request sent after SIGTERM would find the listener closed.
                while True:
                    counts = await requests_at(base, key)
                    if counts["started"] - started_before >= 9:
                        break
                    await anyio.sleep(0.02)
                assert counts["in_flight"] >= 1 and not applied, "the apply ended before SIGTERM"
                proc.send_signal(signal.SIGTERM)
        # Every request in flight was answered, and the server then exited cleanly.
        assert len(saved) == 8
        assert applied[0]["effects"]["rows"]["inserted"] == ROWS
        assert proc.wait(timeout=40) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    from lore_mcp.app import open_store
    from lore_mcp.settings import Settings

    store = open_store(Settings(**_settings_from_env(env)))
    try:
        stored = {lesson.id for lesson in store.list(_scope(), (), 100, None).lessons}
        with store.transaction(_scope(), write=False) as tx:
            assert structured.describe_schema(tx)["tables"][0]["row_count"] == ROWS
    finally:
        store.close()
    assert set(saved) <= stored


def _settings_from_env(env: dict[str, str]) -> dict[str, Any]:
    return {k[len("LORE_") :].lower(): v for k, v in env.items() if k.startswith("LORE_")}


def _scope() -> Any:
    from stores import Scope

    return Scope(org="local", project="default")


SECRET = "sk-proj-" + "Zx9" * 16


async def test_remote_mode_forwards_calls_and_redacts_before_sending(store: Any, embedder: Embedder) -> None:
    bodies: list[bytes] = []
    with team_server(store, embedder, record=bodies) as server:
        root = server.keys.init_org("local")
        alice = server.keys.create_key("local", name="alice", project="alpha", root=False)
        # The seed's Claude Desktop configuration: base URL, key, default project.
        params = remote_params(server.base, root.key, LORE_PROJECT="beta")
        async with connected(params) as client:
            names = {t.name for t in (await client.list_tools()).tools}
            assert {"save_lesson", "recall_lessons", "apply"} <= names
            saved = await call(
                client,
                "save_lesson",
                problem="OpenAI calls fail with 401 after key rotation",
                resolution=f"export OPENAI_API_KEY={SECRET} and restart the worker",
            )
            assert "openai_key" in saved["redacted"]
            recalled = await call(client, "recall_lessons", query="openai 401 after rotating the key")
            assert recalled["lessons"][0]["id"] == saved["id"]
            assert recalled["lessons"][0]["project"] == "beta"
            assert SECRET not in recalled["lessons"][0]["resolution"]
            with pytest.raises(ToolFailed) as err:
                await call(client, "get_lesson", id="01ARZ3NDEKTSV4RRFFQ69G5FAV")
            assert err.value.code == "NOT_FOUND"
            schema = await call(client, "schema")
            assert schema["tables"] == []
        async with connected(remote_params(server.url, alice.key)) as client:
            with pytest.raises(ToolFailed) as err:
                await call(client, "list_lessons", project="beta")
            assert err.value.code == "FORBIDDEN"
            mine = await call(client, "save_lesson", problem="alpha only", resolution="r")
            assert (await call(client, "get_lesson", id=mine["id"]))["project"] == "alpha"
    assert bodies, "the team server saw no requests"
    assert not any(SECRET.encode() in body for body in bodies), "the secret left the machine"


async def test_remote_mode_with_the_server_down_is_unavailable_not_a_hang() -> None:
    port = free_port()  # nothing listens here
    started = time.monotonic()
    async with connected(remote_params(f"http://127.0.0.1:{port}", "lore_sk_" + "a" * 32)) as client:
        assert (await client.list_tools()).tools
        with pytest.raises(ToolFailed) as err:
            await call(client, "recall_lessons", query="anything")
        assert err.value.code == "UNAVAILABLE"
        assert "LORE_API_URL" in err.value.message
    assert time.monotonic() - started < 30


async def test_remote_mode_with_a_refused_key_is_unauthorized(store: Any, embedder: Embedder) -> None:
    with team_server(store, embedder) as server:
        server.keys.init_org("local")
        async with connected(remote_params(server.url, "lore_sk_" + "b" * 32)) as client:
            with pytest.raises(ToolFailed) as err:
                await call(client, "list_lessons")
            assert err.value.code == "UNAUTHORIZED"
