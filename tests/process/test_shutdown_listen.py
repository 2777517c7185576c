"""SIGTERM with a ``subscriptions/listen`` stream open: the stream ends gracefully and the server
drains at once, instead of counting the stream as a request in flight until the drain time runs
out and exiting with ``EXIT_AFTER_DEADLINE``."""

from __future__ import annotations

import signal
import subprocess
import time
import urllib.request
from pathlib import Path

import anyio
import pytest

from lore_mcp.transport.http import EXIT_AFTER_DEADLINE
from tests.process.test_replicas import new_key
from tests.support.processes import lore_command, server_env
from tests.support.team import free_port, http_client

DRAIN_S = 8  # a server that waited for the stream would exit EXIT_AFTER_DEADLINE after this


def healthy(base: str, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, "lore-memory exited while starting"
        try:
            with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.1)
    pytest.fail("lore-memory did not become healthy")


async def test_sigterm_ends_open_listen_streams_and_exits_cleanly(tmp_path: Path, postgres_url: str) -> None:
    env = server_env(
        tmp_path / "unused.db",
        LORE_STORE="postgres",
        LORE_DATABASE_URL=postgres_url,
        LORE_DRAIN_TIMEOUT_S=str(DRAIN_S),
    )
    key = new_key(postgres_url, "shutdown")
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = lore_command("mcp", "--transport", "http", "--host", "127.0.0.1", "--port", str(port))
    with (tmp_path / "server.log").open("wb") as log:
        proc = subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        try:
            healthy(base, proc)
            async with (
                http_client(f"{base}/mcp", key) as client,
                client.listen(resource_subscriptions=["lore://stats"]) as subscription,
            ):
                proc.send_signal(signal.SIGTERM)
                with anyio.fail_after(DRAIN_S + 10):
                    heard = [event async for event in subscription]  # ends when the server ends it
            status = await anyio.to_thread.run_sync(lambda: proc.wait(DRAIN_S + 10))
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert heard == []
    assert status == 0, (status, EXIT_AFTER_DEADLINE, (tmp_path / "server.log").read_text()[-2000:])
