"""Real ``lore-memory`` processes: stdio servers, the HTTP server, the CLI, remote mode."""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import StdioServerParameters

from tests.support.team import free_port

READ_TIMEOUT = 60


def server_env(db_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update({"LORE_DB_PATH": str(db_path), "HF_HUB_OFFLINE": "1", **extra})
    return env


def stdio_params(db_path: Path, **extra: str) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "lore_mcp", "mcp"], env=server_env(db_path, **extra)
    )


class RawServer:
    """A server process driven line by line, to send frames no well-behaved client would."""

    def __init__(self, env: dict[str, str]) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lore_mcp", "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self._pump_thread = threading.Thread(target=self._pump, daemon=True)
        self._pump_thread.start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def send(self, raw: str | bytes) -> None:
        assert self.proc.stdin is not None
        data = raw.encode() if isinstance(raw, str) else raw
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def request(self, msg_id: int, method: str, params: dict[str, Any] | None = None) -> None:
        self.send(json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}}))

    def reply(self) -> dict[str, Any]:
        try:
            return json.loads(self.lines.get(timeout=READ_TIMEOUT))
        except queue.Empty:
            pytest.fail("the server sent no reply")

    def initialize(self) -> dict[str, Any]:
        self.request(
            0,
            "initialize",
            {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        )
        result = self.reply()
        self.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        return result

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self._pump_thread.join(timeout=10)
        assert self.proc.stdout is not None
        self.proc.stdout.close()


def lore_env(db_path: Path) -> dict[str, str]:
    """Environment for a `lore-memory` process on a fresh SQLite file."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update(LORE_DB_PATH=str(db_path), HF_HUB_OFFLINE="1")
    return env


def lore_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "lore_mcp", *args]


@contextmanager
def lore_http(env: dict[str, str], log: Path, *extra: str) -> Iterator[str]:
    """`lore-memory mcp --transport http` on a free loopback port until the block ends; yields
    the /mcp URL once ``GET /healthz`` answers."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            lore_command("mcp", "--transport", "http", "--host", "127.0.0.1", "--port", str(port), *extra),
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    pytest.fail(f"lore-memory exited while starting:\n{log.read_text()[-3000:]}")
                try:
                    with urllib.request.urlopen(f"{base}/healthz", timeout=2) as response:
                        if response.status == 200:
                            break
                except OSError:
                    pass
                if time.monotonic() > deadline:
                    pytest.fail(f"lore-memory did not become healthy:\n{log.read_text()[-3000:]}")
                time.sleep(0.1)
            yield f"{base}/mcp"
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def lore(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lore_mcp", *args], env=env, capture_output=True, text=True, timeout=120
    )


def wait_healthy(base: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the server exited while starting"
        try:
            if httpx2.get(f"{base}/healthz", timeout=2).status_code == 200:
                return
        except httpx2.TransportError:
            pass
        time.sleep(0.1)
    raise AssertionError("the server did not become healthy")


def remote_params(api_url: str, api_key: str, **extra: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update(LORE_STORE="remote", LORE_API_URL=api_url, LORE_API_KEY=api_key, **extra)
    return StdioServerParameters(command=sys.executable, args=["-m", "lore_mcp", "mcp"], env=env)
