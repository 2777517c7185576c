"""Lore's performance benchmark: one command, a Markdown table and a JSON file.

Why: Lore runs as a stdio subprocess of an agent's client, so what users feel is
how fast the process answers ``initialize``, how long one ``save_lesson`` and one
``recall_lessons`` take over the wire, how fast a large corpus loads, and how much
memory the server holds. Each number is measured end to end, the way a client
sees it.

What is measured:

1. Cold start, median of ``--cold-runs`` runs, each on a fresh temporary database:
   (a) spawn -> ``initialize`` answered for ``lore-memory mcp``; (b) the same for
   a bare ``MCPServer`` with one trivial tool (``benchmarks/bare_server.py``), in
   the same runs, and the ratio a/b; (c) spawn -> first ``recall_lessons``
   answered, which includes loading the embedding model. These use raw JSON-RPC
   lines over the process's pipes, so no client start-up is counted. One
   untimed spawn of each first warms the OS file cache.
2. ``save_lesson`` latency p50/p95 over stdio through the ``mcp`` SDK ``Client``
   (legacy initialize handshake), model warm, on a copy of each corpus, so the
   corpus itself is not changed.
3. Bulk load rate: in-process ``LessonService.make_draft`` (validation and
   redaction), ``Embedder.encode_documents`` in batches of ``--batch`` texts and
   ``store.save_many`` per batch, the way large corpora are loaded.
4. ``recall_lessons`` latency p50/p95/p99 over stdio at each corpus size, query
   embedding included: a server spawned on the loaded database is warmed with a
   few queries, then ``--queries`` distinct queries (never repeated, so the
   query-vector cache never answers) are timed around ``Client.call_tool``.
   Corpora grow incrementally in one database file: load to the first size,
   measure, load the difference to the next size, measure, and so on.
5. Peak RSS of the server during each recall run: polled with psutil and read
   from ``/proc/<pid>/status`` (VmHWM) before the server exits.

Targets are printed beside the numbers; missing one does not fail the run.

    .venv/bin/python benchmarks/run.py                 # 1k, 10k, 100k (30-60 minutes on 2 cores)
    .venv/bin/python benchmarks/run.py --quick         # 1k only, fewer queries: a smoke run
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TextIO

import anyio
import numpy as np
import psutil
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from synthetic import Generator, Lesson

import lore_mcp
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService, embedding_text
from stores import open_local_store, open_postgres_store

HERE = Path(__file__).resolve().parent
CODE_ROOT = Path(lore_mcp.__file__).resolve().parent.parent  # where the measured Lore is imported from
BARE_SERVER = HERE / "bare_server.py"
PROTOCOL_VERSION = "2025-11-25"
CALL_TIMEOUT_S = 300.0
PROJECT = "default"
PG_SHARED_BUFFERS = "1GB"  # for the pgserver a --store postgres run starts
# Set by main() for --store postgres: every store and server of the run then uses this database.
DATABASE_URL: str | None = None

TARGETS = {
    "initialize_s": 1.0,  # spawn -> initialize answered
    "initialize_ratio": 1.3,  # lore / bare MCPServer
    # Issue targets: 25 ms on the local store, 30 ms on Postgres (a round trip per statement).
    "recall_p50_ms_at_100k": {"local": 25.0, "postgres": 30.0},
    "bulk_load_per_s": 200.0,
}


@dataclass
class Config:
    sizes: list[int]
    queries: int
    saves: int
    cold_runs: int
    batch: int
    warmup_queries: int
    seed: int
    store: str
    out: Path
    workdir: Path
    keep: bool
    quick: bool = False
    corpus: Path | None = None
    database_url: str | None = None
    loaded: bool = False


# -- small helpers ----------------------------------------------------------------------


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def percentiles(samples: Sequence[float], ps: Sequence[int] = (50, 95, 99)) -> dict[str, float]:
    arr = np.asarray(samples, dtype=np.float64)
    out = {f"p{p}": round(float(np.percentile(arr, p)), 3) for p in ps}
    out |= {"mean": round(float(arr.mean()), 3), "min": round(float(arr.min()), 3)}
    out |= {"max": round(float(arr.max()), 3), "n": len(samples)}
    return out


def lore_command() -> list[str]:
    """The installed console script next to this interpreter, as a user's client would run it."""
    script = Path(sys.executable).with_name("lore-memory")
    found = str(script) if script.exists() else shutil.which("lore-memory")
    if found is None:
        raise SystemExit("lore-memory is not installed in this environment; run `pip install -e .`")
    return [found, "mcp"]


def bare_command() -> list[str]:
    return [sys.executable, str(BARE_SERVER)]


def open_bench_store(db_path: Path) -> Any:
    """The store under test: the SQLite file at ``db_path``, or the Postgres of the run."""
    if DATABASE_URL is not None:
        return open_postgres_store(DATABASE_URL)
    return open_local_store(db_path)


def server_env(db_path: Path) -> dict[str, str]:
    env = {"LORE_DB_PATH": str(db_path), "LORE_PROJECT": PROJECT}
    if DATABASE_URL is not None:
        env.update({"LORE_STORE": "postgres", "LORE_DATABASE_URL": DATABASE_URL})
    if "PYTHONPATH" in os.environ:  # the SDK's stdio client passes only a safe subset of the environment
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def peak_rss_mb(pid: int) -> float | None:
    """VmHWM (the kernel's high-water mark of resident memory), Linux only."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        return None
    return None


def machine_info() -> dict[str, Any]:
    import onnxruntime
    import sqlean

    def version(dist: str) -> str | None:
        try:
            return importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            return None

    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gb": round(psutil.virtual_memory().total / 2**30, 1),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "onnxruntime": onnxruntime.__version__,
        "numpy": np.__version__,
        "sqlite": sqlean.sqlite_version,
        "mcp": version("mcp"),
        "lore_memory": version("lore-memory-mcp"),
    }


def _cpu_model() -> str | None:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or None


def code_fingerprint() -> str:
    """A hash of Lore's sources, so a run can be tied to the code it measured."""
    digest = hashlib.sha256()
    for path in sorted([*CODE_ROOT.glob("lore_mcp/**/*.py"), *CODE_ROOT.glob("stores/**/*.py")]):
        digest.update(str(path.relative_to(CODE_ROOT)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


# -- 1. cold start: raw JSON-RPC over the child's pipes --------------------------------------


class RawServer:
    """A server process spoken to in raw JSON-RPC lines, so nothing but the server is timed."""

    def __init__(self, command: list[str], env: dict[str, str], errlog: TextIO, timeout_s: float = 180.0):
        self.started = time.perf_counter()
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=errlog,
            env={**os.environ, **env},
        )
        self._next_id = 0
        # A hung server is killed, which ends the blocking readline below.
        self._watchdog = threading.Timer(timeout_s, self.proc.kill)
        self._watchdog.daemon = True
        self._watchdog.start()

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> tuple[dict[str, Any], float]:
        """Send a request; return its response and the seconds since spawn when it arrived."""
        self._next_id += 1
        self.send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"server exited (rc={self.proc.poll()}) before answering {method}")
            message = json.loads(line)
            if message.get("id") == self._next_id:
                elapsed = time.perf_counter() - self.started
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return message, elapsed

    def initialize(self) -> float:
        params = {
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "lore-bench", "version": "1"},
        }
        _, elapsed = self.request("initialize", params)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return elapsed

    def close(self) -> None:
        self._watchdog.cancel()
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()
        try:
            self.proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def cold_lore(workdir: Path, run: int, errlog: TextIO) -> tuple[float, float]:
    """(spawn -> initialize, spawn -> first recall_lessons) in seconds, on a fresh database."""
    server = RawServer(lore_command(), server_env(workdir / f"cold-{run}.db"), errlog)
    try:
        init_s = server.initialize()
        response, recall_s = server.request(
            "tools/call",
            {"name": "recall_lessons", "arguments": {"query": "stripe webhook rejects valid signatures"}},
        )
        if response["result"].get("isError"):
            raise RuntimeError(f"recall_lessons failed: {response['result']}")
        return init_s, recall_s
    finally:
        server.close()


def cold_bare(errlog: TextIO) -> float:
    server = RawServer(bare_command(), {}, errlog)
    try:
        return server.initialize()
    finally:
        server.close()


def bench_cold_start(cfg: Config, errlog: TextIO) -> dict[str, Any]:
    log(f"cold start: {cfg.cold_runs} runs (+1 untimed warm-up of each)")
    cold_lore(cfg.workdir, -1, errlog)
    cold_bare(errlog)
    lore_init, lore_recall, bare_init = [], [], []
    for run in range(cfg.cold_runs):
        init_s, recall_s = cold_lore(cfg.workdir, run, errlog)
        lore_init.append(init_s)
        lore_recall.append(recall_s)
        bare_init.append(cold_bare(errlog))
        log(
            f"  run {run + 1}: lore init {init_s:.3f}s, first recall {recall_s:.2f}s, bare init {bare_init[-1]:.3f}s"
        )
    lore_med, bare_med = statistics.median(lore_init), statistics.median(bare_init)
    return {
        "runs": cfg.cold_runs,
        "lore_initialize_s": {"median": round(lore_med, 4), "samples": [round(x, 4) for x in lore_init]},
        "bare_initialize_s": {"median": round(bare_med, 4), "samples": [round(x, 4) for x in bare_init]},
        "initialize_ratio": round(lore_med / bare_med, 3),
        "lore_first_recall_s": {
            "median": round(statistics.median(lore_recall), 3),
            "samples": [round(x, 3) for x in lore_recall],
        },
    }


# -- 3. bulk load, in-process ----------------------------------------------------------------


@dataclass
class LoadStats:
    lessons: int = 0
    merged: int = 0
    draft_s: float = 0.0
    embed_s: float = 0.0
    save_s: float = 0.0
    total_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        rate = self.lessons / self.total_s if self.total_s else 0.0
        return {**{k: round(v, 3) for k, v in asdict(self).items()}, "lessons_per_s": round(rate, 1)}


def batched(items: Iterator[Lesson], size: int) -> Iterator[list[Lesson]]:
    batch: list[Lesson] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def bulk_load(db_path: Path, lessons: Iterator[Lesson], embedder: Embedder, batch: int) -> LoadStats:
    """Validate+redact, embed in batches and save_many per batch; every phase timed."""
    stats = LoadStats()
    store = open_bench_store(db_path)
    try:
        service = LessonService(store, embedder, default_project=PROJECT)
        scope = service.scope(None)
        started = last_report = time.perf_counter()
        for chunk in batched(lessons, batch):
            t0 = time.perf_counter()
            drafts = [service.make_draft(**lesson.arguments())[0] for lesson in chunk]
            t1 = time.perf_counter()
            vectors = embedder.encode_documents([embedding_text(d.problem, d.resolution) for d in drafts])
            t2 = time.perf_counter()
            results = store.save_many(scope, list(zip(drafts, vectors, strict=True)))
            t3 = time.perf_counter()
            stats.draft_s += t1 - t0
            stats.embed_s += t2 - t1
            stats.save_s += t3 - t2
            stats.lessons += len(chunk)
            stats.merged += sum(r.merged for r in results)
            if t3 - last_report > 30:
                last_report = t3
                log(
                    f"  loaded {stats.lessons} ({stats.lessons / (t3 - started):.0f}/s, {stats.merged} merged)"
                )
        stats.total_s = time.perf_counter() - started
    finally:
        store.close()
    return stats


def stored_count(db_path: Path) -> int:
    store = open_bench_store(db_path)
    try:
        scope = LessonService(store, Embedder(), default_project=PROJECT).scope(None)
        return store.count(scope.org, scope.project)
    finally:
        store.close()


# -- 2 and 4. save and recall over stdio through the SDK client --------------------------------


class RssMonitor:
    """Polls a process's resident memory on a thread; ``peak_mb`` is the largest value seen."""

    def __init__(self, pid: int, interval_s: float = 0.02) -> None:
        self.process = psutil.Process(pid)
        self.interval_s = interval_s
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, name="rss-monitor", daemon=True)

    def __enter__(self) -> RssMonitor:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_mb(self) -> float:
        return round(self.peak / 2**20, 1)

    def _poll(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(psutil.Error):
                self.peak = max(self.peak, self.process.memory_info().rss)
            self._stop.wait(self.interval_s)


def _server_pid() -> int:
    """The newest child of this process running lore-memory (there is one at a time)."""
    children = [p for p in psutil.Process().children() if any("lore-memory" in part for part in p.cmdline())]
    if not children:
        raise RuntimeError("cannot find the lore-memory child process")
    return max(children, key=lambda p: p.create_time()).pid


@contextlib.asynccontextmanager
async def lore_client(db_path: Path, errlog: TextIO) -> AsyncIterator[tuple[Client, int]]:
    """A ``Client`` on a freshly spawned ``lore-memory mcp`` (legacy handshake) and the server's pid."""
    command, *args = lore_command()
    params = StdioServerParameters(command=command, args=args, env=server_env(db_path))
    async with Client(
        stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=CALL_TIMEOUT_S
    ) as client:
        yield client, _server_pid()


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error or result.structured_content is None:
        text = getattr(result.content[0], "text", result.content) if result.content else result
        raise RuntimeError(f"{tool} failed: {text}")
    return result.structured_content


async def bench_saves(db_path: Path, lessons: list[Lesson], warmup: int, errlog: TextIO) -> dict[str, Any]:
    async with lore_client(db_path, errlog) as (client, _):
        await call(client, "recall_lessons", {"query": "warm up the model and the index"})
        for lesson in lessons[:warmup]:
            await call(client, "save_lesson", lesson.arguments())
        latencies, merged = [], 0
        for lesson in lessons[warmup:]:
            t0 = time.perf_counter()
            result = await call(client, "save_lesson", lesson.arguments())
            latencies.append((time.perf_counter() - t0) * 1000)
            merged += bool(result["merged"])
    return {"latency_ms": percentiles(latencies, (50, 95, 99)), "merged": merged}


async def bench_recall(
    db_path: Path, warmup_queries: list[str], queries: list[str], errlog: TextIO
) -> dict[str, Any]:
    spawned = time.perf_counter()
    async with lore_client(db_path, errlog) as (client, pid):
        with RssMonitor(pid) as rss:
            t0 = time.perf_counter()
            await call(client, "recall_lessons", {"query": warmup_queries[0]})
            first_ms = (time.perf_counter() - t0) * 1000
            first_since_spawn_s = time.perf_counter() - spawned
            # The server moves queries to ONNX Runtime about 2 s after the model loads
            # (lore_mcp/embedding/embedder.py); time the steady state.
            await anyio.sleep(4)
            for query in warmup_queries[1:]:
                await call(client, "recall_lessons", {"query": query})
            latencies, hits = [], []
            for query in queries:
                t0 = time.perf_counter()
                result = await call(client, "recall_lessons", {"query": query})
                latencies.append((time.perf_counter() - t0) * 1000)
                hits.append(len(result["lessons"]))
        hwm = peak_rss_mb(pid)
    return {
        "latency_ms": percentiles(latencies),
        "first_recall_ms": round(first_ms, 1),
        "first_recall_since_spawn_s": round(first_since_spawn_s, 2),
        "mean_hits": round(statistics.fmean(hits), 2),
        "peak_rss_mb": hwm if hwm is not None else rss.peak_mb,
        "peak_rss_polled_mb": rss.peak_mb,
    }


def copy_database(src: Path, dst: Path) -> None:
    for suffix in ("", "-wal"):
        source = Path(f"{src}{suffix}")
        if source.exists():
            shutil.copyfile(source, f"{dst}{suffix}")


def transfer_corpus(sqlite_path: Path, db_path: Path) -> None:
    """Copy a kept SQLite corpus (texts and vectors) into the store under test, without embedding."""
    from stores.engine.lessons import LessonDraft
    from stores.sqlite.db import connect
    from stores.sqlite.migrations import migrate

    source = connect(sqlite_path)
    migrate(source)  # a corpus kept from before moves its vectors out of sqlite-vec's table
    rows = source.execute(
        "SELECT l.problem, l.resolution, l.context, l.tags, l.confidence, l.source, v.embedding "
        "FROM lessons AS l JOIN lesson_embeddings AS v ON v.pk = l.pk ORDER BY l.pk"
    )
    store = open_bench_store(db_path)
    try:
        scope = LessonService(store, Embedder(), default_project=PROJECT).scope(None)
        for chunk in batched(iter(rows), 1000):
            items = [
                (
                    LessonDraft(p, r, context=c, tags=tuple(json.loads(t)), confidence=conf, source=src),
                    np.frombuffer(blob, dtype=np.float32),
                )
                for p, r, c, t, conf, src, blob in chunk
            ]
            store.save_many(scope, items)
    finally:
        store.close()
        source.close()


def remove_database(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


# -- the run -----------------------------------------------------------------------------


def reused_corpus(cfg: Config, db_path: Path, corpus: Generator) -> int:
    """How many lessons of an earlier run's corpus ``db_path`` holds (0: none reused), with
    ``corpus`` moved past them so that the sizes after it are the lessons that follow."""
    if cfg.loaded:
        # --database-url already holds a corpus an earlier run loaded (same generator).
        source = f"the corpus in {DATABASE_URL}"
    elif cfg.corpus is not None:
        # Start from a corpus an earlier run built (same generator), so a large size can be
        # measured again without re-embedding it; its lessons are not re-timed.
        if DATABASE_URL is None:
            copy_database(cfg.corpus, db_path)
        else:
            transfer_corpus(cfg.corpus, db_path)
        source = str(cfg.corpus)
    else:
        return 0
    loaded = stored_count(db_path)
    for _ in corpus.lessons(loaded):
        pass
    log(f"reusing {source}: {loaded} lessons")
    return loaded


def bench_sizes(cfg: Config, errlog: TextIO) -> list[dict[str, Any]]:
    corpus, save_gen, query_gen = Generator(cfg.seed), Generator(cfg.seed + 1), Generator(cfg.seed + 2)
    embedder = Embedder()
    embedder.start()
    embedder.wait()
    db_path = cfg.workdir / "corpus.db"
    loaded, results = reused_corpus(cfg, db_path, corpus), []
    for size in cfg.sizes:
        load = None
        if size > loaded:
            log(f"size {size}: loading {size - loaded} lessons")
            load = bulk_load(db_path, corpus.lessons(size - loaded), embedder, cfg.batch)
            loaded = size
        stored = stored_count(db_path)
        if load is not None:
            log(
                f"  {load.lessons} in {load.total_s:.1f}s = {load.as_dict()['lessons_per_s']}/s; stored {stored}"
            )

        # On Postgres the saves go into the corpus itself (a few hundred lessons more).
        save_db = cfg.workdir / f"saves-{size}.db" if DATABASE_URL is None else db_path
        if DATABASE_URL is None:
            copy_database(db_path, save_db)
        save_lessons = list(save_gen.lessons(cfg.saves + 3))
        log(f"size {size}: {cfg.saves} saves over stdio")
        saves = anyio.run(bench_saves, save_db, save_lessons, 3, errlog)
        if DATABASE_URL is None:
            remove_database(save_db)

        if DATABASE_URL is not None:
            analyze(DATABASE_URL)
        log(f"size {size}: {cfg.queries} recalls over stdio")
        warmup, timed = query_gen.queries(cfg.warmup_queries), query_gen.queries(cfg.queries)
        recall = anyio.run(bench_recall, db_path, warmup, timed, errlog)
        log(f"  recall p50 {recall['latency_ms']['p50']} ms, p95 {recall['latency_ms']['p95']} ms")
        results.append(
            {
                "size": size,
                "stored": stored,
                "load": {"added": load.lessons, **load.as_dict()} if load is not None else None,
                "save": saves,
                "recall": recall,
                "load_average": load_average(),
            }
        )
    return results


def verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("yes" if ok else "**no**")


def render_markdown(report: dict[str, Any]) -> str:
    cold, sizes, machine = report["cold_start"], report["sizes"], report["machine"]
    lines = [
        f"Lore benchmark, {report['timestamp']}: {machine['cpu_count']} CPUs ({machine['cpu_model']}), "
        f"Python {machine['python']}, load average before/after {report['load_average_before']} / "
        f"{report['load_average_after']}",
        "",
    ]
    if report.get("postgres"):
        pg = report["postgres"]
        lines += [f"Postgres {pg['server_version']}, shared_buffers {pg['shared_buffers']}", ""]
    code = report["code_fingerprint"]
    if code["before"] != code["after"]:
        lines += ["**Warning: Lore's sources changed during the run; the numbers mix two versions.**", ""]
    lines += [
        f"Cold start, median of {cold['runs']} runs on a fresh database each",
        "",
        "| Metric | Value | Target | Met |",
        "|---|---:|---|---|",
    ]
    init_s, ratio = cold["lore_initialize_s"]["median"], cold["initialize_ratio"]
    lines += [
        f"| spawn -> initialize, lore-memory mcp | {init_s * 1000:.0f} ms | < 1000 ms | "
        f"{verdict(init_s < TARGETS['initialize_s'])} |",
        f"| spawn -> initialize, bare MCPServer | {cold['bare_initialize_s']['median'] * 1000:.0f} ms | | |",
        f"| ratio lore / bare | {ratio:.2f}x | <= {TARGETS['initialize_ratio']}x | "
        f"{verdict(ratio <= TARGETS['initialize_ratio'])} |",
        f"| spawn -> first recall_lessons (model load) | {cold['lore_first_recall_s']['median']:.2f} s | | |",
        "",
        "Per corpus size (one database grown incrementally; latencies client-side over stdio)",
        "",
        "| Lessons | Stored (merged) | Bulk load, lessons/s (added) | save p50 / p95 ms | "
        "recall p50 / p95 / p99 ms | first recall after spawn | server peak RSS MB |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in sizes:
        load, save, recall = row["load"], row["save"]["latency_ms"], row["recall"]
        lat = recall["latency_ms"]
        loaded = f"{load['lessons_per_s']:.0f} (+{load['added']:,})" if load else "reused corpus"
        merged = load["merged"] if load else "-"
        lines.append(
            f"| {row['size']:,} | {row['stored']:,} ({merged}) | {loaded} | {save['p50']:.1f} / {save['p95']:.1f} | "
            f"{lat['p50']:.1f} / {lat['p95']:.1f} / {lat['p99']:.1f} | {recall['first_recall_since_spawn_s']:.1f} s | "
            f"{recall['peak_rss_mb']:.0f} |"
        )
    lines += ["", "Targets", "", "| Target | Measured | Met |", "|---|---:|---|"]
    for name, measured, ok in report["targets"]:
        lines.append(f"| {name} | {measured} | {verdict(ok)} |")
    return "\n".join(lines)


def target_rows(
    cold: dict[str, Any], sizes: list[dict[str, Any]], store: str = "local"
) -> list[tuple[str, str, bool | None]]:
    init_s, ratio = cold["lore_initialize_s"]["median"], cold["initialize_ratio"]
    rows: list[tuple[str, str, bool | None]] = [
        ("initialize < 1 s after spawn", f"{init_s * 1000:.0f} ms", init_s < TARGETS["initialize_s"]),
        ("initialize within 1.3x of bare MCPServer", f"{ratio:.2f}x", ratio <= TARGETS["initialize_ratio"]),
    ]
    recall_target = TARGETS["recall_p50_ms_at_100k"][store]
    at_100k = next((r for r in sizes if r["size"] == 100_000), None)
    if at_100k is None:
        rows.append((f"recall p50 < {recall_target:.0f} ms at 100k", "not run", None))
    else:
        p50 = at_100k["recall"]["latency_ms"]["p50"]
        rows.append((f"recall p50 < {recall_target:.0f} ms at 100k", f"{p50:.1f} ms", p50 < recall_target))
    # The 10k stage is the reference load; else the largest load done.
    measured = [r for r in sizes if r["load"] is not None]
    if not measured:
        rows.append(("bulk load >= 200 lessons/s", "not run", None))
        return rows
    ref = next((r for r in measured if r["size"] == 10_000), None) or max(
        measured, key=lambda r: r["load"]["added"]
    )
    rate = ref["load"]["lessons_per_s"]
    rows.append(
        (
            f"bulk load >= 200 lessons/s (load to {ref['size']:,}, +{ref['load']['added']:,})",
            f"{rate:.0f}/s",
            rate >= TARGETS["bulk_load_per_s"],
        )
    )
    return rows


def parse_args(argv: Sequence[str] | None = None) -> Config:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--sizes", default="1000,10000,100000", help="corpus sizes, ascending")
    parser.add_argument("--queries", type=int, default=200, help="timed recall queries per size")
    parser.add_argument("--saves", type=int, default=200, help="timed save_lesson calls per size")
    parser.add_argument("--cold-runs", type=int, default=5, help="cold-start runs (median reported)")
    parser.add_argument("--batch", type=int, default=256, help="texts per encode_documents call in bulk load")
    parser.add_argument("--warmup-queries", type=int, default=5, help="untimed recalls before timing")
    parser.add_argument("--seed", type=int, default=20240601)
    parser.add_argument("--store", choices=["local", "postgres"], default="local", help="backend under test")
    parser.add_argument(
        "--database-url",
        default=None,
        help="Postgres for --store postgres (default: pgserver in the work dir)",
    )
    parser.add_argument("--out", type=Path, default=HERE / "results.json", help="JSON results file")
    parser.add_argument("--workdir", type=Path, default=None, help="where databases go (default: a temp dir)")
    parser.add_argument(
        "--corpus", type=Path, default=None, help="start from this corpus database (e.g. a kept corpus.db)"
    )
    parser.add_argument(
        "--loaded",
        action="store_true",
        help="with --store postgres --database-url: that database already holds the corpus; measure it as is",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory and its databases")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 1k only, 50 queries and saves, 3 cold runs"
    )
    args = parser.parse_args(argv)
    if args.loaded and not (args.store == "postgres" and args.database_url):
        parser.error("--loaded needs --store postgres and --database-url")
    sizes = sorted(int(s) for s in args.sizes.split(",") if s.strip())
    if args.quick:
        sizes, args.queries, args.saves, args.cold_runs = [1000], 50, 50, 3
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="lore-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    return Config(
        sizes=sizes,
        queries=args.queries,
        saves=args.saves,
        cold_runs=args.cold_runs,
        batch=args.batch,
        warmup_queries=max(1, args.warmup_queries),
        seed=args.seed,
        store=args.store,
        out=args.out,
        workdir=workdir,
        keep=args.keep or args.workdir is not None,
        quick=args.quick,
        corpus=args.corpus,
        database_url=args.database_url,
        loaded=args.loaded,
    )


def analyze(url: str) -> None:
    """The planner statistics autovacuum gathers within a minute of a load: recall chooses
    its full-text terms by their estimated postings, so it is timed as it runs from then on."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("ANALYZE lessons")


def start_postgres(cfg: Config) -> str:
    """The run's Postgres: --database-url, or a fresh pgserver (PostgreSQL 16 + pgvector) in the work dir."""
    if cfg.database_url:
        return cfg.database_url
    import pgserver
    import psycopg

    pgdata = cfg.workdir / "pgdata"
    pgdata.mkdir(exist_ok=True)
    server = pgserver.get_server(pgdata, cleanup_mode="stop")
    # Size the buffer pool for the corpus, as a deployment would (docker-compose.yml): with
    # pgserver's 128 MB, 100k lessons (about 470 MB of index, rows and vectors) are read
    # from the OS on every recall.
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET shared_buffers = '{PG_SHARED_BUFFERS}'")
    server.cleanup()  # restart, so the setting takes effect
    return pgserver.get_server(pgdata, cleanup_mode="stop").get_uri()


def postgres_settings(url: str) -> dict[str, str]:
    """The server settings that decide the Postgres numbers, for the report."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return {
            name: conn.execute(f"SHOW {name}").fetchone()[0]  # names from the tuple below
            for name in ("server_version", "shared_buffers", "work_mem")
        }


def main(argv: Sequence[str] | None = None) -> int:
    global DATABASE_URL
    cfg = parse_args(argv)
    if cfg.store == "postgres":
        DATABASE_URL = start_postgres(cfg)
    log(f"work directory {cfg.workdir}; server stderr in {cfg.workdir / 'servers.log'}")
    load_before, code_before = load_average(), code_fingerprint()
    started = time.perf_counter()
    with open(cfg.workdir / "servers.log", "a") as errlog:
        cold = bench_cold_start(cfg, errlog)
        sizes = bench_sizes(cfg, errlog)
    # Read while the run's own pgserver still has its data directory (removed just below).
    pg_settings = postgres_settings(DATABASE_URL) if DATABASE_URL else None
    if not cfg.keep:  # on failure the directory stays, with the servers' stderr in it
        shutil.rmtree(cfg.workdir, ignore_errors=True)
    config = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(cfg).items()}
    report: dict[str, Any] = {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "duration_s": round(time.perf_counter() - started, 1),
        "machine": machine_info(),
        "postgres": pg_settings,
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "code_fingerprint": {"before": code_before, "after": code_fingerprint()},
        "config": config,
        "cold_start": cold,
        "sizes": sizes,
    }
    report["targets"] = target_rows(cold, sizes, cfg.store)
    cfg.out.parent.mkdir(parents=True, exist_ok=True)
    json_report = {
        **report,
        "targets": [{"target": n, "measured": m, "met": ok} for n, m, ok in report["targets"]],
        "target_values": TARGETS,
    }
    cfg.out.write_text(json.dumps(json_report, indent=2) + "\n")
    print(render_markdown(report))
    log(f"wrote {cfg.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
