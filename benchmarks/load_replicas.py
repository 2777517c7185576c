"""``load_replicas.py --replicas N`` (``load.py``'s options): N team servers on one Postgres against one, on the same machine.

Why: a team deploys Lore as several replicas behind a load balancer with no session affinity.
That must cost little: each replica keeps nothing another lacks (``LORE_STATELESS_HTTP``, one
``LORE_REQUEST_STATE_SECRET``; the rate limit and every lesson live in Postgres), so a client's
requests may land on any of them. This measures what one client population gets from one
server and from N servers when every client's requests alternate between them.

What is done: one Postgres (``--database-url`` or a pgserver), ``lore-memory init`` and the
``--preload`` lessons as ``load.py`` does, then N ``lore-memory mcp --transport http`` processes
on it, all with ``LORE_STATELESS_HTTP=true`` and one secret, each warmed by one recall. Then four
measured phases on those same processes: 1 replica, N, N, 1 (so a machine slowly getting
busier or freer, and the store growing, weighs on both alike). In a phase of n replicas each of
the ``--clients`` clients (``load.client_loop``) sends request i of its own to replica
``i mod n`` (``tests.support.replicas.RoundRobin`` as its ``httpx2`` transport); with n = 1 the
same transport sends everything to the first replica. ``--balance least-busy`` puts one balancer
in front instead, as a load balancer's least-connections mode would: each request of any client
goes to the replica with the fewest requests in flight. Each phase is summarised as ``load.py``
summarises a run, with the CPU seconds of all N servers (idle ones included) and Postgres.

Notices across replicas: in every phase one more client holds a 2026-07-28
``subscriptions/listen`` stream for ``lore://stats`` open on the last replica and counts the
notices it hears in the window. In the one-replica phases every save goes to the first replica,
so each notice heard there crossed from one process to the other (Postgres LISTEN/NOTIFY).
Notices for one URI may be coalesced, so they count at most the saves, not exactly.
"""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from typing import Any

import anyio
import httpx2
import psutil
from http_server import free_port, wait_healthy
from load import (
    CALL_TIMEOUT_S,
    Config,
    ReplicaBench,
    Run,
    cpu_seconds,
    drive,
    first_recall,
    main,
    postgres_cpu_seconds,
    preload_backend,
    root_key,
    server_env,
    stored_count,
    summarise,
    terminate,
)
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from run import load_average, log, lore_command, peak_rss_mb
from synthetic import Generator

from lore_mcp.embedding.embedder import Embedder
from tests.support.replicas import RoundRobin


def bench_replicas(
    cfg: Config, embedder: Embedder, database_url: str | None, postmaster_pid: int | None
) -> list[dict[str, Any]]:
    """The four phases (1, N, N, 1 replicas) on one Postgres; one summary per phase."""
    env = server_env("postgres", cfg.workdir / "unused.db", database_url, cfg)
    env.update(LORE_STATELESS_HTTP="true", LORE_REQUEST_STATE_SECRET=secrets.token_hex(32))
    key = root_key(env)
    load, stored_before = preload_backend("postgres", cfg, embedder, cfg.workdir / "unused.db", database_url)
    procs: list[subprocess.Popen[bytes]] = []
    bases: list[str] = []
    results: list[dict[str, Any]] = []
    try:
        for i in range(cfg.replicas):
            port = free_port()
            bases.append(f"http://127.0.0.1:{port}")
            command = [*lore_command(), "--transport", "http", "--host", "127.0.0.1", "--port", str(port)]
            with open(cfg.workdir / f"server-replica-{i}.log", "w") as errlog:
                procs.append(subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=errlog))
        for base, proc in zip(bases, procs, strict=True):
            healthy_s = wait_healthy(base, proc)
            first_s = anyio.run(first_recall, f"{base}/mcp", key)
            log(f"replica {base}: healthy after {healthy_s:.1f}s, first recall {first_s:.1f}s")
        for phase, n in enumerate([1, cfg.replicas, cfg.replicas, 1]):
            seed = cfg.seed + 2 * phase  # each phase saves lessons of its own
            run = Run(
                url=f"{bases[0]}/mcp",
                key=key,
                cfg=cfg,
                saves=Generator(seed + 1),
                queries=Generator(seed + 2),
                transport=balancer(cfg.balance, bases[:n]),
            )
            log(f"replicas: measuring {n} of {cfg.replicas}, {cfg.clients} clients")
            results.append(measure_phase(run, n, procs, postmaster_pid, load, stored_before, bases[-1]))
        rss = [peak_rss_mb(proc.pid) for proc in procs]
        exits = [terminate(proc) for proc in procs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    stored_after = stored_count("postgres", embedder, cfg.workdir / "unused.db", database_url)
    for r in results:
        r["stored_before_after"] = [stored_before, stored_after]
        r["server"] |= {"peak_rss_mb_each": rss, "sigterm_exit_code_s": [[c, round(s, 2)] for c, s in exits]}
    return results


class LeastBusy(httpx2.AsyncBaseTransport):
    """One balancer for every client: a request goes to the replica with the fewest requests in
    flight through it (counted until the response's headers arrive; ties go in turn)."""

    def __init__(self, bases: list[str]) -> None:
        self.robins = [RoundRobin([base], record=False) for base in bases]
        self.busy = [0] * len(bases)
        self.turn = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.turn += 1
        n = len(self.robins)
        replica = min(range(n), key=lambda i: (self.busy[i], (i - self.turn) % n))
        self.busy[replica] += 1
        try:
            return await self.robins[replica].handle_async_request(request)
        finally:
            self.busy[replica] -= 1

    async def aclose(self) -> None:
        """Shared by every client: one closing its HTTP client leaves it open for the others."""


def balancer(balance: str, bases: list[str]) -> Any:
    """What makes each client's transport: its own round robin, or the one shared balancer."""
    if balance == "least-busy":
        shared = LeastBusy(bases)
        return lambda: shared
    return lambda: RoundRobin(bases, record=False)


def measure_phase(
    run: Run,
    n: int,
    procs: list[subprocess.Popen[bytes]],
    postmaster_pid: int | None,
    load: Any,
    stored_before: int,
    listener: str,
) -> dict[str, Any]:
    """One phase: ``load.drive`` under the CPU window of every server and Postgres, with a
    listen stream on ``listener`` (a base URL) counting the notices it hears."""
    servers = [psutil.Process(p.pid) for p in procs]
    loads_before = load_average()
    heard: list[float] = []

    async def measured() -> dict[str, Any]:
        cpu: dict[str, float] = {}
        async with anyio.create_task_group() as tg:
            tg.start_soon(cpu_window, run, servers, postmaster_pid, cpu)
            async with anyio.create_task_group() as listening:
                listening.start_soon(listen, run, f"{listener}/mcp", heard)
                timing = await drive(run)
                listening.cancel_scope.cancel()
        return {**timing, "cpu": cpu}

    timing = anyio.run(measured)
    summary = summarise(
        "postgres",
        run,
        auth="key",
        timing=timing,
        load=load,
        stored=(stored_before, None),
        server={"replicas_running": len(procs)},
        loads={"before": loads_before, "during": [], "after": load_average()},
    )
    saves = sum(1 for s in run.samples if s.op == "save" and s.error is None and run.in_window(s.start))
    notices = {"listener": listener, "heard_in_window": sum(1 for t in heard if run.in_window(t))}
    return {
        "replicas": n,
        "balance": run.cfg.balance,
        "notices": {**notices, "saves_in_window": saves},
        **summary,
    }


async def listen(run: Run, url: str, heard: list[float]) -> None:
    """Hold a ``subscriptions/listen`` stream for ``lore://stats`` on ``url``, noting when each
    notice arrives, until cancelled; a stream that fails is logged (its phase then hears fewer)."""
    try:
        await _listen(run, url, heard)
    except Exception as exc:
        log(f"  the listen stream on {url} failed: {type(exc).__name__}: {exc}")


async def _listen(run: Run, url: str, heard: list[float]) -> None:
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {run.key}"}, timeout=60) as http,
        Client(
            streamable_http_client(url, http_client=http),
            mode="2026-07-28",
            read_timeout_seconds=CALL_TIMEOUT_S,
        ) as client,
        client.listen(resource_subscriptions=["lore://stats"]) as subscription,
    ):
        async for _ in subscription:
            heard.append(time.perf_counter())


async def cpu_window(
    run: Run, servers: list[psutil.Process], postmaster_pid: int | None, cpu: dict[str, float]
) -> None:
    """CPU seconds of the servers (together and each), Postgres and this client process, and the
    machine's busy share, over the measured window only."""
    while run.measure_start == float("inf"):
        await anyio.sleep(0.01)
    await anyio.sleep(max(0.0, run.measure_start - time.perf_counter()))
    each = [cpu_seconds(s) for s in servers]
    client, pg = cpu_seconds(psutil.Process()), postgres_cpu_seconds(postmaster_pid)
    before = psutil.cpu_times()
    await anyio.sleep(max(0.0, run.end - time.perf_counter()))
    after = psutil.cpu_times()
    for i, server in enumerate(servers):
        cpu[f"server_{i}"] = cpu_seconds(server) - each[i]
    cpu["server"] = sum(cpu[f"server_{i}"] for i in range(len(servers)))
    cpu["client"] = cpu_seconds(psutil.Process()) - client
    cpu["postgres"] = postgres_cpu_seconds(postmaster_pid) - pg
    busy = (sum(after) - after.idle) - (sum(before) - before.idle)
    cpu["machine_busy_pct"] = 100 * busy / max(1e-9, sum(after) - sum(before))


def render_replicas(report: dict[str, Any]) -> str:
    """The phases as a table, then each replica count's mean against one replica's."""
    machine = report["machine"]
    lines = [
        f"Lore replicas on one Postgres, {report['timestamp']}: {machine['cpu_count']} CPUs "
        f"({machine['cpu_model']}); clients, servers and Postgres on the same machine",
        "",
        "| Phase | Replicas | Clients | Window s | Requests | req/s | all p50 / p95 / p99 ms | Errors | 429s "
        "| Notices heard on the last replica / saves | Server CPU s (each) | Postgres CPU s | Machine busy % "
        "| Load avg before / after |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---|",
    ]
    for i, r in enumerate(report["results"], 1):
        lat, cpu, loads = r["latency_ms"]["all"] or {}, r["cpu_s_in_window"], r["load_average"]
        each = ", ".join(f"{v:.0f}" for k, v in sorted(cpu.items()) if k.startswith("server_"))
        lines.append(
            f"| {i} | {r['replicas']} | {r['clients']} | {r['window_s']:.0f} | {r['requests']:,} | "
            f"{r['requests_per_s']:.1f} | {lat.get('p50', 0):.0f} / {lat.get('p95', 0):.0f} / "
            f"{lat.get('p99', 0):.0f} | {r['error_count']} | {r['rate_limited_429']} | "
            f"{r['notices']['heard_in_window']} / {r['notices']['saves_in_window']} | "
            f"{cpu.get('server', 0):.0f} ({each}) | {cpu.get('postgres', 0):.0f} | "
            f"{r['machine_cpu_busy_pct']:.0f} | {loads['before'][0] if loads['before'] else '?'} / "
            f"{loads['after'][0] if loads['after'] else '?'} |"
        )
    return "\n".join([*lines, "", *compare(report["results"])])


def compare(results: list[dict[str, Any]]) -> list[str]:
    """Mean throughput and p95 of the N-replica phases as a share of the one-replica phases'."""

    def value(r: dict[str, Any], key: str) -> float:
        if key == "rps":
            return float(r["requests_per_s"])
        if key == "cpu":  # server CPU milliseconds per request: the cost a replica adds, if any
            return 1000 * float(r["cpu_s_in_window"].get("server", 0)) / max(1, r["requests"])
        return float((r["latency_ms"]["all"] or {}).get("p95", "nan"))

    def mean(n: int, key: str) -> float:
        values = [value(r, key) for r in results if r["replicas"] == n]
        return sum(values) / len(values) if values else float("nan")

    many = max(r["replicas"] for r in results)
    errors = sum(r["error_count"] for r in results)
    return [
        f"{many} replicas / 1, mean of their phases: throughput {mean(many, 'rps') / mean(1, 'rps'):.1%} "
        f"({mean(many, 'rps'):.1f} / {mean(1, 'rps'):.1f} req/s), p95 {mean(many, 'p95') / mean(1, 'p95'):.1%} "
        f"({mean(many, 'p95'):.0f} / {mean(1, 'p95'):.0f} ms), server CPU per request "
        f"{mean(many, 'cpu'):.0f} / {mean(1, 'cpu'):.0f} ms; errors in all phases {errors}"
    ]


if __name__ == "__main__":
    sys.exit(main(replicas=ReplicaBench(bench_replicas, render_replicas)))
