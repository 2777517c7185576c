"""Load benchmark for the team server: many MCP clients over streamable HTTP at once.

Why: ``lore-memory mcp --transport http`` serves a whole team from one process, so
what matters is how many tool calls it answers per second under concurrency, how
latency spreads when calls queue, whether anything fails, and how much memory the
process grows to. This measures that end to end, the way a team's agents see it.

What is done, per backend (``--store local|postgres|both``):

1. A fresh database (a SQLite file, or Postgres: ``--database-url`` or a pgserver
   in the work directory), initialised with ``lore-memory init --json`` for the root
   key, then preloaded with ``--preload`` synthetic lessons in-process
   (``LessonService.make_draft``, ``Embedder.encode_documents``, ``store.save_many``,
   as ``benchmarks/run.py`` bulk-loads), before the server starts.
2. The server as people run it: ``lore-memory mcp --transport http`` on 127.0.0.1,
   ``LORE_RATE_LIMIT_PER_MINUTE`` set to ``--rate-limit`` (high, so no call is
   limited unless asked for), waited for on ``GET /healthz``, then one recall to be
   sure the embedding model is loaded.
3. ``--clients`` concurrent SDK clients (``mcp.Client`` over
   ``streamable_http_client`` with an ``httpx2.AsyncClient`` sending
   ``Authorization: Bearer <key>``), each its own session and HTTP connection pool,
   in one asyncio process. They connect, then loop back to back with no think time:
   ``--recall-share`` (80%) ``recall_lessons`` with a distinct query, the rest
   ``save_lesson`` with a distinct synthetic lesson, ``--warmup`` seconds untimed, then
   ``--duration`` seconds measured. A call started inside the window counts; its
   latency is timed around ``Client.call_tool``.
4. Errors by kind: a tool result with ``is_error`` (by its ``CODE:``), an MCP error
   (by its JSON-RPC code; the server's 429 arrives as -32029 and is counted apart),
   a transport failure (by exception type, after which the client reconnects). HTTP
   statuses of every response in the window are counted by an httpx event hook.
5. The server's peak RSS (``/proc/<pid>/status`` VmHWM before it is stopped, and
   psutil polling), its CPU seconds and those of this client process over the window,
   the machine's busy CPU share and the load average (before, during, after).
6. SIGTERM to the server, and its exit status and how long it took to exit.

    .venv/bin/python benchmarks/load.py                          # 32 clients, 60 s, SQLite then Postgres
    .venv/bin/python benchmarks/load.py --duration 10 --clients 8 --store local   # smoke
    .venv/bin/python benchmarks/load.py --auth both        # an OAuth access token beside the key
    .venv/bin/python benchmarks/load.py --scenario tenants --duration 30   # one org's heavy applies
                                                                         # beside another org's saves
    .venv/bin/python benchmarks/load_replicas.py --replicas 2 --duration 20 --warmup 5 --clients 16
        # two servers on one Postgres, each client alternating between them, against one
        # (the same options; writes results-load-replicas.json)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx2
import psutil
from http_server import free_port, wait_healthy
from load_tenants import bench_tenants
from load_tenants import render as render_tenants
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client
from run import (
    LoadStats,
    RssMonitor,
    batched,
    code_fingerprint,
    load_average,
    log,
    lore_command,
    machine_info,
    peak_rss_mb,
    percentiles,
)
from synthetic import Generator, Lesson

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService, embedding_text
from stores import open_local_store, open_postgres_store

# The repository root, for the OAuth client the tests use (the OAuth phase of --auth).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.support.oauth_client import access_token

HERE = Path(__file__).resolve().parent
PROJECT = "default"
RATE_LIMITED_CODE = -32029  # lore_mcp.transport.http.RATE_LIMITED_JSONRPC_CODE
CALL_TIMEOUT_S = 120.0


@dataclass
class Config:
    clients: int
    duration: float
    warmup: float
    preload: int
    recall_share: float
    rate_limit: int
    store: str
    database_url: str | None
    pool_size: int | None
    batch: int
    seed: int
    out: Path
    workdir: Path
    keep: bool
    # "mixed": many clients of one key, recalls and saves; "tenants": see load_tenants.py.
    scenario: str = "mixed"
    heavy_clients: int = 12
    light_clients: int = 4
    rows: int = 5000
    # What the clients send as their bearer: "key" (lore_sk_), "oauth" (lore_at_) or "both" in turn.
    auth: str = "key"
    # Servers on one Postgres; above 1, load_replicas.py measures 1 against this many.
    replicas: int = 1
    # How the requests are spread over replicas: each client alternating ("round-robin"), or one
    # balancer for all sending each request to the replica with fewest in flight ("least-busy").
    balance: str = "round-robin"


# -- set-up: database, root key, preload -------------------------------------------------


def server_env(backend: str, db_path: Path, database_url: str | None, cfg: Config) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    env.update(
        HF_HUB_OFFLINE="1",
        LORE_PROJECT=PROJECT,
        LORE_DB_PATH=str(db_path),
        LORE_RATE_LIMIT_PER_MINUTE=str(cfg.rate_limit),
    )
    if backend == "postgres":
        assert database_url is not None
        env.update(LORE_STORE="postgres", LORE_DATABASE_URL=database_url)
    if cfg.pool_size is not None:
        env["LORE_POOL_SIZE"] = str(cfg.pool_size)
    return env


def lore_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [lore_command()[0], *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def root_key(env: dict[str, str]) -> str:
    """The root key from ``init --json``; on an already initialised database, a new root key."""
    init = lore_cli(env, "init", "--json")
    if init.returncode == 0:
        return json.loads(init.stdout)["key"]
    if "already initialised" not in init.stderr:
        raise RuntimeError(f"lore-memory init failed: {init.stderr.strip()}")
    created = lore_cli(env, "keys", "create", "--root", "--name", f"load-bench-{os.getpid()}", "--json")
    if created.returncode != 0:
        raise RuntimeError(f"lore-memory keys create failed: {created.stderr.strip()}")
    return json.loads(created.stdout)["key"]


def open_store(backend: str, db_path: Path, database_url: str | None) -> Any:
    return open_postgres_store(database_url) if backend == "postgres" else open_local_store(db_path)


def preload(store: Any, lessons: Iterator[Lesson], embedder: Embedder, batch: int) -> tuple[LoadStats, int]:
    """Bulk-load in-process (as run.py does); returns the timings and the lessons stored afterwards."""
    stats = LoadStats()
    service = LessonService(store, embedder, default_project=PROJECT)
    scope = service.scope(None)
    started = time.perf_counter()
    for chunk in batched(lessons, batch):
        t0 = time.perf_counter()
        drafts = [service.make_draft(**lesson.arguments())[0] for lesson in chunk]
        t1 = time.perf_counter()
        vectors = embedder.encode_documents([embedding_text(d.problem, d.resolution) for d in drafts])
        t2 = time.perf_counter()
        results = store.save_many(scope, list(zip(drafts, vectors, strict=True)))
        stats.draft_s += t1 - t0
        stats.embed_s += t2 - t1
        stats.save_s += time.perf_counter() - t2
        stats.lessons += len(chunk)
        stats.merged += sum(r.merged for r in results)
    stats.total_s = time.perf_counter() - started
    return stats, store.count(scope.org, scope.project)


def start_postgres(cfg: Config) -> tuple[str, Any]:
    """--database-url, or a fresh pgserver (PostgreSQL 16 + pgvector) in the work directory and its handle."""
    if cfg.database_url:
        return cfg.database_url, None
    import pgserver

    pgdata = cfg.workdir / "pgdata"
    pgdata.mkdir(exist_ok=True)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    return server.get_uri(), server


# -- the server process ------------------------------------------------------------------


def cpu_seconds(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def postgres_cpu_seconds(postmaster_pid: int | None) -> float:
    """CPU of a local Postgres: the postmaster and its backends (only those alive now are counted)."""
    if postmaster_pid is None:
        return 0.0
    total = 0.0
    try:
        postmaster = psutil.Process(postmaster_pid)
        for process in [postmaster, *postmaster.children(recursive=True)]:
            with contextlib.suppress(psutil.Error):
                total += cpu_seconds(process)
    except psutil.Error:
        return 0.0
    return total


# -- the clients -------------------------------------------------------------------------


@dataclass
class Sample:
    op: str  # "recall" or "save"
    start: float  # perf_counter when the call was made
    latency_ms: float
    error: str | None  # None: a good result; else the error's kind


@dataclass
class Run:
    """Shared by all clients of one load run."""

    url: str
    key: str
    cfg: Config
    saves: Generator
    queries: Generator
    samples: list[Sample] = field(default_factory=list)
    connect_errors: Counter[str] = field(default_factory=Counter)
    statuses: Counter[int] = field(default_factory=Counter)
    connects: int = 0
    hits: list[int] = field(default_factory=list)
    merged: int = 0
    go: anyio.Event = field(default_factory=anyio.Event)
    measure_start: float = float("inf")
    end: float = float("inf")
    # Makes each client's HTTP transport (load_replicas.py: the balancer); None: httpx2's own.
    transport: Callable[[], httpx2.AsyncBaseTransport] | None = None

    def in_window(self, t: float) -> bool:
        return self.measure_start <= t < self.end


def tool_error_kind(result: Any) -> str:
    text = next((getattr(c, "text", "") for c in result.content), "")
    code = text.split(":", 1)[0].strip()
    return f"tool error {code}" if code.isupper() and " " not in code else "tool error (no code)"


def mcp_error_kind(exc: MCPError) -> str:
    if exc.code == RATE_LIMITED_CODE:
        return "429 rate limited"
    return f"MCP error {exc.code}: {exc.message[:80]}"


def exception_kind(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, MCPError):
        return mcp_error_kind(exc)
    return f"{type(exc).__name__}: {str(exc)[:80]}"


async def client_loop(run: Run, index: int, connected: list[int]) -> None:
    rng = random.Random(run.cfg.seed * 1000 + index)

    async def count_status(response: httpx2.Response) -> None:
        if run.in_window(time.perf_counter()):
            run.statuses[response.status_code] += 1

    while time.perf_counter() < run.end:
        pending: list[tuple[str, float]] = []  # the call in flight, sampled if the session breaks
        try:
            async with (
                httpx2.AsyncClient(
                    headers={"Authorization": f"Bearer {run.key}"},
                    timeout=60,
                    event_hooks={"response": [count_status]},
                    transport=run.transport() if run.transport else None,
                ) as http,
                Client(
                    streamable_http_client(run.url, http_client=http), read_timeout_seconds=CALL_TIMEOUT_S
                ) as client,
            ):
                run.connects += 1
                if not connected[index]:
                    connected[index] = 1
                    await run.go.wait()
                while time.perf_counter() < run.end:
                    if await call_once(run, client, rng, pending) == "429 rate limited":
                        await anyio.sleep(1.0)
        except Exception as exc:  # the session broke: count it, then reconnect
            kind = exception_kind(exc)
            if pending:
                op, t0 = pending[0]
                run.samples.append(Sample(op, t0, (time.perf_counter() - t0) * 1000, kind))
            else:
                run.connect_errors[kind] += 1
            log(f"  client {index}: {kind}; reconnecting")
            await anyio.sleep(0.5)


async def call_once(
    run: Run, client: Client, rng: random.Random, pending: list[tuple[str, float]]
) -> str | None:
    """One recall or save, sampled; its error's kind, or None. ``pending`` holds it while it runs."""
    t0 = time.perf_counter()
    if rng.random() < run.cfg.recall_share:
        op, tool, arguments = "recall", "recall_lessons", {"query": run.queries.query()}
    else:
        op, tool, arguments = "save", "save_lesson", run.saves.lesson().arguments()
    pending[:] = [(op, t0)]
    error: str | None = None
    try:
        result = await client.call_tool(tool, arguments)
    except MCPError as exc:
        error = mcp_error_kind(exc)
    else:
        if result.is_error or result.structured_content is None:
            error = tool_error_kind(result)
        elif op == "recall":
            run.hits.append(len(result.structured_content["lessons"]))
        else:
            run.merged += bool(result.structured_content["merged"])
    pending.clear()
    run.samples.append(Sample(op, t0, (time.perf_counter() - t0) * 1000, error))
    return error


async def drive(run: Run) -> dict[str, Any]:
    """Connect every client, then warm up and measure; returns when every client has closed."""
    cfg = run.cfg
    connected = [0] * cfg.clients
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(cfg.clients):
            tg.start_soon(client_loop, run, i, connected)
        while sum(connected) < cfg.clients:
            await anyio.sleep(0.05)
            if time.perf_counter() - t0 > 120:
                raise RuntimeError(f"only {sum(connected)} of {cfg.clients} clients connected in 120 s")
        connect_s = time.perf_counter() - t0
        start = time.perf_counter()
        run.measure_start = start + cfg.warmup
        run.end = run.measure_start + cfg.duration
        run.go.set()
    return {"connect_all_s": round(connect_s, 2), "finished_s": round(time.perf_counter() - start, 2)}


async def first_recall(url: str, key: str) -> float:
    """One recall on its own, so the model is loaded before the clients start; seconds it took."""
    t0 = time.perf_counter()
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {key}"}, timeout=300) as http,
        Client(streamable_http_client(url, http_client=http), read_timeout_seconds=300) as client,
    ):
        result = await client.call_tool("recall_lessons", {"query": "warm up the embedding model"})
        if result.is_error:
            raise RuntimeError(f"the first recall failed: {tool_error_kind(result)}")
    return time.perf_counter() - t0


# -- one backend -------------------------------------------------------------------------


def bench_backend(
    backend: str, cfg: Config, embedder: Embedder, database_url: str | None, postmaster_pid: int | None
) -> list[dict[str, Any]]:
    """A fresh database and server of ``backend``, measured once per credential of ``--auth``
    (the root key, an OAuth access token it approved, or both in turn on the same server)."""
    db_path = cfg.workdir / f"load-{backend}.db"
    env = server_env(backend, db_path, database_url, cfg)
    key = root_key(env)
    load, stored_before = preload_backend(backend, cfg, embedder, db_path, database_url)
    port = free_port()
    base, url = f"http://127.0.0.1:{port}", f"http://127.0.0.1:{port}/mcp"
    command = [lore_command()[0], "mcp", "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
    log_path = cfg.workdir / f"server-{backend}.log"
    with open(log_path, "w") as errlog:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=errlog)
    phases: list[tuple[str, Run, dict[str, Any]]] = []
    try:
        healthy_s = wait_healthy(base, proc)
        first_s = anyio.run(first_recall, url, key)
        log(f"{backend}: healthy after {healthy_s:.1f}s, first recall {first_s:.1f}s; {cfg.clients} clients")
        for auth, credential in credentials(cfg.auth, url, key):
            seed = cfg.seed + 2 * len(phases)  # each phase saves lessons of its own, not the last one's
            run = Run(
                url=url, key=credential, cfg=cfg, saves=Generator(seed + 1), queries=Generator(seed + 2)
            )
            log(f"{backend}: measuring with {auth} credentials")
            phases.append((auth, run, measure(run, proc.pid, postmaster_pid)))
        log(f"{backend}: SIGTERM")
        rc, exit_s = terminate(proc)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    stored_after = stored_count(backend, embedder, db_path, database_url)
    server = {"healthy_after_s": round(healthy_s, 2), "first_recall_s": round(first_s, 2)}
    server |= {"sigterm_exit_code": rc, "sigterm_exit_s": round(exit_s, 2), "log": str(log_path)}
    return [
        summarise(
            backend,
            run,
            auth=auth,
            timing=measured["timing"],
            load=load,
            stored=(stored_before, stored_after),
            server={**server, **measured["rss"]},
            loads=measured["loads"],
        )
        for auth, run, measured in phases
    ]


def terminate(proc: subprocess.Popen[bytes]) -> tuple[int | None, float]:
    """SIGTERM, then the exit status (None: still running after 60 s) and how long it took."""
    t0 = time.perf_counter()
    proc.send_signal(signal.SIGTERM)
    try:
        rc: int | None = proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        rc = None
    return rc, time.perf_counter() - t0


def credentials(auth: str, url: str, key: str) -> Iterator[tuple[str, str]]:
    """What the clients send as their bearer, by ``--auth``: the key, or an access token that the
    key approved through the real OAuth flow (tests/support/oauth_client.py; it lives 15 minutes).
    ``both`` runs key, token, token, key, so that a machine slowly getting busier or freer (and
    the store growing) weighs on both alike."""
    if auth == "key":
        yield "key", key
        return
    token = anyio.run(access_token, url, key)
    yield from (
        [("oauth", token)]
        if auth == "oauth"
        else [("key", key), ("oauth", token), ("oauth", token), ("key", key)]
    )


def preload_backend(
    backend: str, cfg: Config, embedder: Embedder, db_path: Path, database_url: str | None
) -> tuple[LoadStats, int]:
    log(f"{backend}: preloading {cfg.preload} lessons in-process")
    store = open_store(backend, db_path, database_url)
    try:
        load, stored_before = preload(store, Generator(cfg.seed).lessons(cfg.preload), embedder, cfg.batch)
    finally:
        store.close()
    log(
        f"  {load.lessons} in {load.total_s:.1f}s ({load.as_dict()['lessons_per_s']}/s); stored {stored_before}"
    )
    return load, stored_before


def stored_count(backend: str, embedder: Embedder, db_path: Path, database_url: str | None) -> int:
    store = open_store(backend, db_path, database_url)
    try:
        scope = LessonService(store, embedder, default_project=PROJECT).scope(None)
        return int(store.count(scope.org, scope.project))
    finally:
        store.close()


def measure(run: Run, pid: int, postmaster_pid: int | None) -> dict[str, Any]:
    """One measured run against the server ``pid``: its timing and CPU, the load average, and
    the server's peak RSS (so far, for VmHWM: a later phase's includes the earlier ones')."""
    load_before = load_average()
    loads: list[list[float] | None] = []
    with RssMonitor(pid, interval_s=0.1) as rss:

        async def measured() -> dict[str, Any]:
            cpu: dict[str, float] = {}
            async with anyio.create_task_group() as tg:
                tg.start_soon(sample_load, run, loads)
                tg.start_soon(cpu_window, run, psutil.Process(pid), postmaster_pid, cpu)
                timing = await drive(run)
            return {**timing, "cpu": cpu}

        timing = anyio.run(measured)
        hwm = peak_rss_mb(pid)
    return {
        "timing": timing,
        "rss": {"peak_rss_mb": hwm if hwm is not None else rss.peak_mb, "peak_rss_polled_mb": rss.peak_mb},
        "loads": {"before": load_before, "during": loads, "after": load_average()},
    }


async def sample_load(run: Run, loads: list[list[float] | None]) -> None:
    while time.perf_counter() < run.end:
        if run.in_window(time.perf_counter()):
            loads.append(load_average())
        await anyio.sleep(5)


async def cpu_window(
    run: Run, server: psutil.Process, postmaster_pid: int | None, cpu: dict[str, float]
) -> None:
    """CPU seconds of the server, this process and Postgres, and the machine's busy share, over
    the measured window only."""
    while run.measure_start == float("inf"):
        await anyio.sleep(0.01)
    await anyio.sleep(max(0.0, run.measure_start - time.perf_counter()))
    cpu["server"], cpu["client"] = cpu_seconds(server), cpu_seconds(psutil.Process())
    cpu["postgres"] = postgres_cpu_seconds(postmaster_pid)
    cpu["machine_busy"] = sum(psutil.cpu_times()) - psutil.cpu_times().idle
    cpu["machine_all"] = sum(psutil.cpu_times())
    await anyio.sleep(max(0.0, run.end - time.perf_counter()))
    cpu["server"] = cpu_seconds(server) - cpu["server"]
    cpu["client"] = cpu_seconds(psutil.Process()) - cpu["client"]
    cpu["postgres"] = postgres_cpu_seconds(postmaster_pid) - cpu["postgres"]
    if postmaster_pid is None:
        del cpu["postgres"]
    times = psutil.cpu_times()
    busy, total = sum(times) - times.idle, sum(times)
    cpu["machine_busy_pct"] = 100 * (busy - cpu.pop("machine_busy")) / (total - cpu.pop("machine_all"))


def summarise(backend: str, run: Run, **parts: Any) -> dict[str, Any]:
    cfg = run.cfg
    window = [s for s in run.samples if run.in_window(s.start)]
    ended = max((s.start + s.latency_ms / 1000 for s in window), default=run.end)
    elapsed = max(ended, run.end) - run.measure_start
    errors = Counter(s.error for s in window if s.error is not None)
    rate_limited = errors.pop("429 rate limited", 0)
    ok = [s for s in window if s.error is None]

    def latency(op: str | None) -> dict[str, float] | None:
        values = [s.latency_ms for s in ok if op is None or s.op == op]
        return percentiles(values, (50, 95, 99)) if values else None

    cpu = parts["timing"].pop("cpu")
    return {
        "store": backend,
        "auth": parts["auth"],
        "clients": cfg.clients,
        "duration_s": cfg.duration,
        "warmup_s": cfg.warmup,
        "window_s": round(elapsed, 2),
        "requests": len(window),
        "ok": len(ok),
        "requests_per_s": round(len(window) / elapsed, 1),
        "ok_per_s": round(len(ok) / elapsed, 1),
        "by_op": {op: sum(1 for s in window if s.op == op) for op in ("recall", "save")},
        "latency_ms": {"recall": latency("recall"), "save": latency("save"), "all": latency(None)},
        "errors": dict(errors),
        "error_count": sum(errors.values()),
        "rate_limited_429": rate_limited,
        "connect_errors": dict(run.connect_errors),
        "sessions_opened": run.connects,
        "http_statuses": {str(k): v for k, v in sorted(run.statuses.items())},
        "recall_mean_hits": round(sum(run.hits) / len(run.hits), 2) if run.hits else None,
        "saves_merged": run.merged,
        "warmup_requests": sum(1 for s in run.samples if s.start < run.measure_start),
        "preload": {"added": parts["load"].lessons, **parts["load"].as_dict()},
        "stored_before_after": list(parts["stored"]),
        "clients_connect_s": parts["timing"]["connect_all_s"],
        "cpu_s_in_window": {k: round(v, 1) for k, v in cpu.items() if k != "machine_busy_pct"},
        "machine_cpu_busy_pct": round(cpu.get("machine_busy_pct", 0.0), 1),
        "server": parts["server"],
        "load_average": parts["loads"],
    }


# -- report ------------------------------------------------------------------------------


def fmt_latency(lat: dict[str, float] | None) -> str:
    return "-" if lat is None else f"{lat['p50']:.0f} / {lat['p99']:.0f}"


def render_markdown(report: dict[str, Any]) -> str:
    machine = report["machine"]
    lines = [
        f"Lore team-server load, {report['timestamp']}: {machine['cpu_count']} CPUs ({machine['cpu_model']}), "
        f"Python {machine['python']}; clients and server on the same machine",
        "",
    ]
    code = report["code_fingerprint"]
    if code["before"] != code["after"]:
        lines += ["**Warning: Lore's sources changed during the run; the numbers mix two versions.**", ""]
    lines += [
        "| Store | Auth | Clients | Window s | Requests | req/s | recall p50 / p99 ms | save p50 / p99 ms | "
        "all p50 / p99 ms | Errors | 429s | Server peak RSS MB | Server CPU s | Exit on SIGTERM | "
        "Load avg before / after |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in report["results"]:
        lat, server, loads = r["latency_ms"], r["server"], r["load_average"]
        before = loads["before"][0] if loads["before"] else "?"
        after = loads["after"][0] if loads["after"] else "?"
        lines.append(
            f"| {r['store']} | {r['auth']} | {r['clients']} | {r['window_s']:.0f} | {r['requests']:,} "
            f"({r['by_op']['recall']:,} recall, {r['by_op']['save']:,} save) | {r['requests_per_s']:.1f} | "
            f"{fmt_latency(lat['recall'])} | {fmt_latency(lat['save'])} | {fmt_latency(lat['all'])} | "
            f"{r['error_count']} | {r['rate_limited_429']} | {server['peak_rss_mb']:.0f} | "
            f"{r['cpu_s_in_window'].get('server', 0):.0f} | {server['sigterm_exit_code']} "
            f"({server['sigterm_exit_s']:.1f} s) | {before} / {after} |"
        )
    lines += ["", *oauth_against_key(report["results"])]
    for r in report["results"]:
        extra = [
            f"{r['store']}: preloaded {r['preload']['added']:,} lessons ({r['preload']['lessons_per_s']:.0f}/s), "
            f"stored {r['stored_before_after'][0]:,} -> {r['stored_before_after'][1]:,}; "
            f"machine CPU busy {r['machine_cpu_busy_pct']:.0f}% in the window "
            f"(CPU seconds: {r['cpu_s_in_window']}); HTTP statuses {r['http_statuses']}",
        ]
        if r["errors"] or r["connect_errors"]:
            extra.append(f"  errors: {r['errors']}; connection errors: {r['connect_errors']}")
        lines += extra
    return "\n".join(lines)


def oauth_against_key(results: list[dict[str, Any]]) -> list[str]:
    """For ``--auth both``: each store's OAuth throughput and p95 as a share of the key's."""
    lines = []
    for store in dict.fromkeys(r["store"] for r in results):

        def mean(auth: str, value: Callable[[dict[str, Any]], float], store: str = store) -> float:
            phases = [value(r) for r in results if r["store"] == store and r["auth"] == auth]
            return sum(phases) / len(phases) if phases else float("nan")

        def p95(r: dict[str, Any]) -> float:
            return float(r["latency_ms"]["all"]["p95"])

        if any(r["store"] == store and r["auth"] == "oauth" for r in results):
            rate = mean("oauth", lambda r: r["requests_per_s"]) / mean("key", lambda r: r["requests_per_s"])
            errors = sum(r["error_count"] for r in results if r["store"] == store)
            lines.append(
                f"{store}: OAuth / key, mean of their phases: throughput {rate:.1%}, p95 "
                f"{mean('oauth', p95) / mean('key', p95):.1%} ({mean('oauth', p95):.0f} / "
                f"{mean('key', p95):.0f} ms); errors in all phases {errors}"
            )
    return [*lines, ""] if lines else []


def bench_tenants_on(backend: str, cfg: Config, database_url: str | None) -> dict[str, Any]:
    """The tenants scenario (``load_tenants.py``) on a fresh database of ``backend``."""
    env = server_env(backend, cfg.workdir / f"tenants-{backend}.db", database_url, cfg)
    args = {
        "rows": cfg.rows,
        "duration": cfg.duration,
        "heavy_clients": cfg.heavy_clients,
        "light_clients": cfg.light_clients,
        "seed": cfg.seed,
    }
    return bench_tenants(backend, env, cfg.workdir, args)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--clients", type=int, default=32, help="concurrent MCP clients (default 32)")
    parser.add_argument("--duration", type=float, default=60, help="measured seconds (default 60)")
    parser.add_argument("--warmup", type=float, default=10, help="untimed seconds of load first (default 10)")
    parser.add_argument("--preload", type=int, default=1000, help="lessons loaded before the server starts")
    parser.add_argument("--recall-share", type=float, default=0.8, help="share of calls that are recalls")
    parser.add_argument(
        "--rate-limit", type=int, default=1_000_000, help="LORE_RATE_LIMIT_PER_MINUTE of the server"
    )
    parser.add_argument("--store", choices=["local", "postgres", "both"], default="both")
    parser.add_argument("--database-url", default=None, help="Postgres (default: pgserver in the work dir)")
    parser.add_argument("--pool-size", type=int, default=None, help="LORE_POOL_SIZE (default: the server's)")
    parser.add_argument("--batch", type=int, default=256, help="texts per encode_documents call in preload")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        help="JSON results file (default results-load.json, or results-load-replicas.json with --replicas)",
    )
    parser.add_argument(
        "--workdir", type=Path, default=None, help="databases and server logs (default: temp)"
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--scenario",
        choices=["mixed", "tenants"],
        default="mixed",
        help="mixed: --clients recalling and saving; tenants: one org's heavy applies beside another "
        "org's saves (benchmarks/load_tenants.py)",
    )
    parser.add_argument("--heavy-clients", type=int, default=12, help="tenants: the heavy org's clients")
    parser.add_argument("--light-clients", type=int, default=4, help="tenants: the quiet org's clients")
    parser.add_argument("--rows", type=int, default=5000, help="tenants: rows each heavy apply rewrites")
    parser.add_argument(
        "--auth",
        choices=["key", "oauth", "both"],
        default="key",
        help="the clients' bearer: the root key, an OAuth access token it approved (its phases under "
        "its 15 minutes), or both on the same server in four phases: key, token, token, key",
    )
    parser.add_argument(
        "--replicas",
        type=int,
        default=1,
        help="above 1: that many servers on one Postgres (LORE_STATELESS_HTTP), each client's requests "
        "alternating between them, measured against one server in four phases: 1, N, N, 1",
    )
    parser.add_argument(
        "--balance",
        choices=["round-robin", "least-busy"],
        default="round-robin",
        help="with --replicas: each client alternating between replicas, or one balancer for all "
        "clients sending each request to the replica with the fewest requests in flight",
    )
    return parser


def parse_args(argv: list[str] | None = None) -> Config:
    args = build_parser().parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lore-load-"))
    workdir.mkdir(parents=True, exist_ok=True)
    return Config(
        clients=args.clients,
        duration=args.duration,
        warmup=args.warmup,
        preload=args.preload,
        recall_share=args.recall_share,
        rate_limit=args.rate_limit,
        store=args.store,
        database_url=args.database_url,
        pool_size=args.pool_size,
        batch=args.batch,
        seed=args.seed,
        out=args.out or HERE / ("results-load-replicas.json" if args.replicas > 1 else "results-load.json"),
        workdir=workdir,
        keep=args.keep or args.workdir is not None,
        scenario=args.scenario,
        heavy_clients=args.heavy_clients,
        light_clients=args.light_clients,
        rows=args.rows,
        auth=args.auth,
        replicas=args.replicas,
        balance=args.balance,
    )


@dataclass(frozen=True)
class ReplicaBench:
    """What ``load_replicas.py`` hands ``main`` for ``--replicas``: this module does not import it
    (it imports this one), so each stays importable on its own."""

    bench: Callable[[Config, Embedder, str | None, int | None], list[dict[str, Any]]]
    render: Callable[[dict[str, Any]], str]


def bench_backends(
    cfg: Config, backends: list[str], embedder: Embedder, replicas: ReplicaBench | None
) -> list[dict[str, Any]]:
    """The results of the scenario on each backend in turn, each Postgres started for it alone."""
    results: list[dict[str, Any]] = []
    for backend in backends:
        database_url, pg = start_postgres(cfg) if backend == "postgres" else (None, None)
        try:
            pid = pg.get_pid() if pg is not None else None
            if replicas is not None and cfg.replicas > 1:
                results.extend(replicas.bench(cfg, embedder, database_url, pid))
            elif cfg.scenario == "tenants":
                results.append(bench_tenants_on(backend, cfg, database_url))
            else:
                results.extend(bench_backend(backend, cfg, embedder, database_url, pid))
        finally:
            if pg is not None:
                pg.cleanup()
        for r in results if cfg.scenario == "mixed" else []:
            log(f"{r['store']} ({r['auth']}): {r['requests_per_s']} req/s, {r['error_count']} errors")
    return results


def main(argv: list[str] | None = None, replicas: ReplicaBench | None = None) -> int:
    cfg = parse_args(argv)
    if cfg.replicas > 1 and replicas is None:
        print("--replicas runs through benchmarks/load_replicas.py (the same options)", file=sys.stderr)
        return 2
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    backends = ["local", "postgres"] if cfg.store == "both" else [cfg.store]
    if cfg.replicas > 1:
        backends = ["postgres"]  # replicas share one Postgres; SQLite is one process by design
    log(f"work directory {cfg.workdir}")
    load_before, code_before = load_average(), code_fingerprint()
    started = time.perf_counter()
    embedder = Embedder()
    embedder.start()
    embedder.wait()
    results = bench_backends(cfg, backends, embedder, replicas)
    config = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    if config["database_url"]:
        config["database_url"] = "(given)"
    report = {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 1),
        "machine": machine_info(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "code_fingerprint": {"before": code_before, "after": code_fingerprint()},
        "config": config,
        "results": results,
    }
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    cfg.out.write_text(json.dumps(report, indent=2) + "\n")
    if replicas is not None and cfg.replicas > 1:
        print(replicas.render(report))
    else:
        print(render_tenants(results) if cfg.scenario == "tenants" else render_markdown(report))
    log(f"wrote {cfg.out}")
    if not cfg.keep:
        import shutil

        shutil.rmtree(cfg.workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
