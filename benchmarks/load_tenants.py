"""Two tenants on one team server: one org's heavy applies beside another org's saves.

Why: a team server is fair only if one org's heavy work cannot starve another's cheap calls.
This runs ``lore-memory mcp --transport http`` per backend with two orgs, each with its own
root key. The *quiet* org's ``--light-clients`` save lessons back to back, first alone (the
unloaded figure), then while the *heavy* org's ``--heavy-clients`` loop ``apply`` with a plan
that rewrites every row of a ``--rows`` table through a ``like`` filter (seconds of work
each). Reported per phase: the quiet org's save p50/p95 and errors by code; the heavy org's
outcomes (done, ``BUSY``, ``UNAVAILABLE`` …) and their latency; ``GET /healthz`` statuses
sampled every 0.5 s. The target: the quiet org's p95 under load within 2x of its unloaded
p95, and 0 errors.

    .venv/bin/python benchmarks/load.py --scenario tenants --store both --duration 30
    # the same against another version of the code (its servers inherit PYTHONPATH):
    PYTHONPATH=/tmp/lore-old .venv/bin/python benchmarks/load.py --scenario tenants --out /tmp/t.json
"""

from __future__ import annotations

import subprocess
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from http_server import free_port, wait_healthy
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from run import log, lore_command, percentiles
from synthetic import Generator

ROW_TEXT = "a row of the heavy org's table, rewritten by every heavy apply "


@dataclass
class Phase:
    saves: list[float] = field(default_factory=list)
    save_errors: Counter[str] = field(default_factory=Counter)
    heavy: list[float] = field(default_factory=list)
    heavy_outcomes: Counter[str] = field(default_factory=Counter)
    health: Counter[int] = field(default_factory=Counter)

    def summary(self) -> dict[str, Any]:
        return {
            "saves": len(self.saves),
            "save_ms": percentiles(self.saves) if self.saves else None,
            "save_errors": dict(self.save_errors),
            "heavy_calls": sum(self.heavy_outcomes.values()),
            "heavy_outcomes": dict(self.heavy_outcomes),
            "heavy_ms": percentiles(self.heavy) if self.heavy else None,
            "healthz": {str(k): v for k, v in self.health.items()},
        }


def org_key(env: dict[str, str], org: str) -> str:
    """A root key of ``org``, made with ``lore-memory init --json`` as an administrator would."""
    import json

    init = subprocess.run(
        [lore_command()[0], "init", "--json"], env={**env, "LORE_ORG": org}, capture_output=True, text=True
    )
    if init.returncode != 0:
        raise RuntimeError(f"lore-memory init for {org} failed: {init.stderr.strip()}")
    return str(json.loads(init.stdout)["key"])


def code_of(result: Any) -> str:
    text = next((getattr(c, "text", "") for c in result.content), "")
    return text.split(":", 1)[0].strip() or "no code"


async def session(url: str, key: str) -> Any:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=120)
    return http, Client(streamable_http_client(url, http_client=http), read_timeout_seconds=120)


async def prepare_heavy_table(url: str, key: str, rows: int) -> None:
    """The heavy org's table: ``rows`` rows, inserted 1,000 per plan."""
    http, client = await session(url, key)
    async with http, client:
        schema = (await client.call_tool("schema", {})).structured_content
        plan = {
            "baseSchemaHash": schema["schema_hash"],
            "message": "table for the heavy org",
            "operations": [
                {"op": "create_table", "table": "notes", "columns": [{"name": "v", "type": "text"}]}
            ],
        }
        await client.call_tool("apply", {"plan": plan})
        for start in range(0, rows, 1000):
            schema = (await client.call_tool("schema", {})).structured_content
            batch = [{"v": f"{ROW_TEXT}{i}"} for i in range(start, min(rows, start + 1000))]
            plan = {
                "baseSchemaHash": schema["schema_hash"],
                "message": "rows",
                "operations": [{"op": "insert", "table": "notes", "rows": batch}],
            }
            result = await client.call_tool("apply", {"plan": plan})
            if result.is_error:
                raise RuntimeError(f"loading the heavy table failed: {result.content}")


async def heavy_loop(url: str, key: str, phase: Phase, until: float, index: int) -> None:
    http, client = await session(url, key)
    async with http, client:
        n = 0
        while time.perf_counter() < until:
            n += 1
            schema = (await client.call_tool("schema", {})).structured_content
            plan = {
                "baseSchemaHash": schema["schema_hash"],
                "message": f"heavy {index}.{n}",
                "operations": [
                    {
                        "op": "update",
                        "table": "notes",
                        "where": [{"column": "v", "op": "like", "value": "%r%w%e%r%o%"}],
                        "set": {"v": f"{ROW_TEXT}{index}.{n}"},
                    }
                ],
            }
            t0 = time.perf_counter()
            try:
                result = await client.call_tool("apply", {"plan": plan})
                outcome = code_of(result) if result.is_error else "done"
            except MCPError as exc:
                outcome = f"MCP {exc.code}"
            phase.heavy.append((time.perf_counter() - t0) * 1000)
            phase.heavy_outcomes[outcome] += 1
            if outcome == "BUSY":
                await anyio.sleep(1.0)  # as the sentence asks, a little sooner


async def light_loop(url: str, key: str, phase: Phase, until: float, lessons: Generator) -> None:
    http, client = await session(url, key)
    async with http, client:
        while time.perf_counter() < until:
            t0 = time.perf_counter()
            try:
                result = await client.call_tool("save_lesson", lessons.lesson().arguments())
                error = code_of(result) if result.is_error else None
            except MCPError as exc:
                error = f"MCP {exc.code}: {exc.message[:60]}"
            phase.saves.append((time.perf_counter() - t0) * 1000)
            if error:
                phase.save_errors[error] += 1


async def health_loop(base: str, phase: Phase, until: float) -> None:
    async with httpx2.AsyncClient(timeout=10) as http:
        while time.perf_counter() < until:
            try:
                phase.health[(await http.get(f"{base}/healthz")).status_code] += 1
            except httpx2.TransportError:
                phase.health[0] += 1
            await anyio.sleep(0.5)


async def run_phase(
    base: str, keys: tuple[str, str], light_clients: int, heavy_clients: int, seconds: float, seed: int
) -> Phase:
    url, (heavy_key, light_key) = f"{base}/mcp", keys
    phase, until = Phase(), time.perf_counter() + seconds
    lessons = Generator(seed)
    async with anyio.create_task_group() as tg:
        for i in range(heavy_clients):
            tg.start_soon(heavy_loop, url, heavy_key, phase, until, i)
        if heavy_clients:
            await anyio.sleep(1.0)  # the heavy work is running before the saves start
        for _ in range(light_clients):
            tg.start_soon(light_loop, url, light_key, phase, until, lessons)
        tg.start_soon(health_loop, base, phase, until)
    return phase


def bench_tenants(backend: str, env: dict[str, str], workdir: Path, args: dict[str, Any]) -> dict[str, Any]:
    """Both phases on one backend's server; ``env`` is the server's environment."""
    keys = (org_key(env, "heavy-org"), org_key(env, "quiet-org"))
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    command = [lore_command()[0], "mcp", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    with open(workdir / f"server-tenants-{backend}.log", "w") as errlog:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=errlog)
    try:
        wait_healthy(base, proc)
        log(f"{backend}: loading the heavy org's table ({args['rows']} rows)")
        anyio.run(prepare_heavy_table, f"{base}/mcp", keys[0], args["rows"])
        seconds = args["duration"]
        log(f"{backend}: quiet org alone, {seconds:.0f} s")
        alone = anyio.run(run_phase, base, keys, args["light_clients"], 0, seconds, args["seed"])
        log(f"{backend}: quiet org beside {args['heavy_clients']} heavy clients, {seconds:.0f} s")
        loaded = anyio.run(
            run_phase, base, keys, args["light_clients"], args["heavy_clients"], seconds, args["seed"] + 1
        )
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
    result = {"backend": backend, "alone": alone.summary(), "loaded": loaded.summary()}
    p95_alone = (result["alone"]["save_ms"] or {}).get("p95")
    p95_loaded = (result["loaded"]["save_ms"] or {}).get("p95")
    if p95_alone and p95_loaded:
        result["p95_ratio"] = round(p95_loaded / p95_alone, 2)
    return result


def render(results: list[dict[str, Any]]) -> str:
    lines = [
        "| backend | quiet org alone p50 / p95 ms | beside heavy org p50 / p95 ms | p95 ratio | quiet errors | heavy outcomes | /healthz under load |",
        "| --- | --- | --- | ---: | --- | --- | --- |",
    ]
    for r in results:
        a, b = r["alone"]["save_ms"] or {}, r["loaded"]["save_ms"] or {}
        errors = sum(r["alone"]["save_errors"].values()) + sum(r["loaded"]["save_errors"].values())
        lines.append(
            f"| {r['backend']} | {a.get('p50', '-')} / {a.get('p95', '-')} | {b.get('p50', '-')} / "
            f"{b.get('p95', '-')} | {r.get('p95_ratio', '-')} | {errors} "
            f"{dict(r['loaded']['save_errors']) or ''} | {r['loaded']['heavy_outcomes']} | {r['loaded']['healthz']} |"
        )
    return "\n".join(lines)
