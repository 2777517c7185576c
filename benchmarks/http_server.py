"""A team server process for the benchmarks: a free loopback port, and waiting for ``/healthz``."""

from __future__ import annotations

import socket
import subprocess
import time

import httpx2


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(base: str, proc: subprocess.Popen[bytes], timeout: float = 120) -> float:
    started = time.perf_counter()
    while time.perf_counter() - started < timeout:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with status {proc.returncode} while starting")
        try:
            if httpx2.get(f"{base}/healthz", timeout=2).status_code == 200:
                return time.perf_counter() - started
        except httpx2.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError("the server did not become healthy")
