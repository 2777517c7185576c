"""Where each millisecond of one ``save_lesson`` and one ``recall_lessons`` goes, at 10k lessons.

``benchmarks/run.py`` gives a save's and a recall's p50 over stdio, not what it is made of. Here
Lore serves a 10k corpus in this process, built as the tests build it (``build_server`` over a
``LessonService``), and the SDK's in-memory ``Client`` calls it over the real protocol. Lore is not
edited: its functions are wrapped from outside, in this process only, by timers that note each
call's inclusive time and the stage it ran inside (a context variable, which follows the call onto
worker threads). Each stage's own time is its inclusive time less that of the stages inside it, so
per call the stages add up to the whole ``tools/call`` round trip, whose remainder is the SDK's
framing and dispatch (JSON-RPC messages over memory streams, both sessions, result validation).

Timed from outside (class attributes, module globals): the tool call (``LoreServer.call_tool``),
the service (``LessonService.save``/``recall``), validation and redaction (``make_draft``), the
embedding (``Embedder.encode_documents``/``encode_query``), the store (``SqlStore.save_many``/
``recall``), dedup's neighbours, the insert and the history commit (``SqlLessonTx.nearest``/
``insert_many``/``record``), the activity log (``ActivityLog.append``, held recall entries written
with a save, ``ActivityRecords.append``), the full-text and vector halves of recall (the leaf's
``word_keys``/``candidates``, SQLite's ``LocalVectors.search``), the wait for the query vector
(``RecallQuery.needs_vector``), ranking (``scored_lessons``), ``BEGIN IMMEDIATE``/``COMMIT``
(SQLite's ``_retry_locked``; Postgres: ``psycopg.Connection.commit``) and change notices
(``NoticeBus.publish``). On SQLite the commit row and the activity rows are separate statements
and are told apart; on Postgres they are one statement, reported together.

A recall embeds its query while it searches words: the embedding's own time is reported beside
the table, and the table counts only what the recall waited for it (``wait for query vector``).

The same calls (same texts, distinct from each other, so neither the query cache nor dedup
answers) also go to ``lore-memory mcp`` spawned over stdio on a copy of the same corpus, in turns
with the in-process server, so the stdio p50 is taken under the same load.

The corpus: a kept 10k one, ``benchmarks/run.py --sizes 10000 --keep`` (its ``corpus.db`` in the
work directory it prints). It is copied, never written.

    .venv/bin/python benchmarks/breakdown.py --corpus /tmp/bench/corpus.db --calls 100
    .venv/bin/python benchmarks/breakdown.py --corpus /tmp/bench/corpus.db --store both
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import functools
import inspect
import json
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
from corpus_copy import copy_corpus
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from synthetic import Generator

import lore_mcp
from lore_mcp.app import build_server
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from stores import Store, open_local_store, open_postgres_store

HERE = Path(__file__).resolve().parent
CODE_ROOT = Path(lore_mcp.__file__).resolve().parent.parent
WARMUP = 5
# Stages whose work runs beside their parent's (the query embedding, beside full-text): never
# subtracted from the parent, reported on their own.
BESIDE = {"embed_query"}
# Stages started where the client's context does not reach (the SDK's server task): their parent.
ROOTED = {"call_tool": "round_trip", "notices": "round_trip"}
BACKGROUND = "background:"  # the prefix of a stage begun outside any tool call

_current: contextvars.ContextVar[str | None] = contextvars.ContextVar("breakdown_stage", default=None)


class Recorder:
    """Every timed call: (stage, parent, ms); drained after each measured tool call."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str | None, float]] = []
        self.background: list[tuple[str, float]] = []
        self._lock = threading.Lock()
        self.undo: list[Callable[[], None]] = []

    def note(self, stage: str, parent: str | None, ms: float) -> None:
        with self._lock:
            if parent is None or parent.startswith(BACKGROUND):
                self.background.append((stage, ms))
            else:
                self.events.append((stage, parent, ms))

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        """Time ``name`` inside the current stage; begun outside any (the activity writer's thread,
        say), it and everything inside it are background, off the calls."""
        parent = _current.get() or ROOTED.get(name)
        background = parent is None or parent.startswith(BACKGROUND)
        token = _current.set(BACKGROUND + name if background else name)
        start = time.perf_counter()
        try:
            yield
        finally:
            _current.reset(token)
            self.note(name, parent, (time.perf_counter() - start) * 1000)

    def wrap(self, owner: Any, attribute: str, name: str | Callable[[tuple[Any, ...]], str]) -> None:
        """Replace ``owner.attribute`` with a timed version (async or not); undone by ``restore``."""
        original = inspect.getattr_static(owner, attribute)
        fn = getattr(owner, attribute)
        staged = name if callable(name) else (lambda _args, n=name: n)
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def timed_async(*args: Any, **kwargs: Any) -> Any:
                with self.stage(staged(args)):
                    return await fn(*args, **kwargs)

            timed: Any = timed_async
        else:

            @functools.wraps(fn)
            def timed_sync(*args: Any, **kwargs: Any) -> Any:
                with self.stage(staged(args)):
                    return fn(*args, **kwargs)

            timed = timed_sync
        if isinstance(original, staticmethod):
            timed = staticmethod(timed)
        setattr(owner, attribute, timed)
        self.undo.append(lambda: setattr(owner, attribute, original))

    def drain(self) -> list[tuple[str, str | None, float]]:
        with self._lock:
            events, self.events = self.events, []
        return events

    def restore(self) -> None:
        while self.undo:
            self.undo.pop()()


def own_times(events: list[tuple[str, str | None, float]]) -> dict[str, float]:
    """Each stage's time less its children's (those beside it excepted), summed over the call."""
    own: dict[str, float] = {}
    for stage, parent, ms in events:
        own[stage] = own.get(stage, 0.0) + ms
        if parent is not None and stage not in BESIDE:
            own[parent] = own.get(parent, 0.0) - ms
    return own


def sql_kind(args: tuple[Any, ...]) -> str:
    """A SQLite ``together`` statement (wrapped one statement at a time): activity or history."""
    if "INTO activity" not in args[1][0][0]:
        return "sql_history"
    return (
        "sql_activity_held"
        if (_current.get() or "").removeprefix(BACKGROUND) == "activity_held_entry"
        else "sql_activity"
    )


def activity_kind(_args: tuple[Any, ...]) -> str:
    """``ActivityLog.append``: the call's own entry, or one held from an earlier recall."""
    return (
        "activity_held_entry"
        if (_current.get() or "").removeprefix(BACKGROUND) == "activity_held"
        else "activity_entry"
    )


def begin_or_commit(args: tuple[Any, ...]) -> str:
    """``_retry_locked(conn, fn)`` runs ``BEGIN IMMEDIATE`` or ``COMMIT``: its lambda names which."""
    return "commit" if "COMMIT" in args[1].__code__.co_consts else "begin"


def instrument(recorder: Recorder) -> None:
    """Time Lore's stages from outside: attributes of its classes and modules, nothing edited."""
    import lore_mcp.services.lessons as lessons_module
    import stores.engine.lesson_rules as rules
    from lore_mcp.transport.notices import NoticeBus
    from lore_mcp.transport.server import LoreServer
    from stores.engine.activity_rows import ActivityLog, ActivityRecords
    from stores.engine.lesson_rows import SqlLessonTx
    from stores.engine.lessons import RecallQuery

    wrap = recorder.wrap
    wrap(LoreServer, "call_tool", "call_tool")
    wrap(NoticeBus, "publish", "notices")
    wrap(LessonService, "save", "service")
    wrap(LessonService, "recall", "service")
    wrap(lessons_module, "make_draft", "validate_redact")
    wrap(LessonService, "store_drafts", "store_drafts")
    wrap(LessonService, "_recall_while_embedding", "recall_overlap")
    wrap(Embedder, "encode_documents", "embed")
    wrap(Embedder, "encode_query", "embed_query")
    wrap(rules.SqlStore, "save_many", "store_write")
    wrap(rules.SqlStore, "recall", "store_recall")
    wrap(rules, "scored_lessons", "ranking")
    wrap(RecallQuery, "needs_vector", "wait_vector")
    wrap(SqlLessonTx, "nearest", "dedup_neighbours")
    wrap(SqlLessonTx, "insert_many", "insert")
    wrap(SqlLessonTx, "record", "history")
    wrap(ActivityLog, "append", activity_kind)
    wrap(ActivityRecords, "_write_in", "activity_held")
    wrap(ActivityRecords, "append", "activity_hold")
    _instrument_local(recorder)
    _instrument_postgres(recorder)


def _instrument_local(recorder: Recorder) -> None:
    import stores.sqlite.db as sqlite_db
    from stores.sqlite.lessons import LocalLessons
    from stores.sqlite.sql import LocalSqlTx
    from stores.sqlite.vectors import LocalVectors

    recorder.wrap(LocalLessons, "word_keys", "full_text")
    recorder.wrap(LocalLessons, "candidates", "candidates")
    recorder.wrap(LocalVectors, "search", "vector_search")
    recorder.wrap(sqlite_db, "_retry_locked", begin_or_commit)
    together = LocalSqlTx.together  # one statement at a time, each timed by what it writes
    recorder.wrap(LocalSqlTx, "together", sql_kind)
    timed_one = LocalSqlTx.together

    def one_by_one(self: LocalSqlTx, writes: Any) -> None:
        for write in writes:
            timed_one(self, [write])

    LocalSqlTx.together = one_by_one  # type: ignore[method-assign]
    recorder.undo.append(lambda: setattr(LocalSqlTx, "together", together))


def _instrument_postgres(recorder: Recorder) -> None:
    import psycopg

    from stores.postgres.lessons import PostgresLessons

    recorder.wrap(PostgresLessons, "word_keys", "full_text")
    recorder.wrap(PostgresLessons, "candidates", "candidates")
    recorder.wrap(psycopg.Connection, "commit", "commit")


# The table's rows: a label and the stages whose own time it sums (absent stages count 0).
SAVE_ROWS: list[tuple[str, list[str]]] = [
    ("MCP framing and dispatch (SDK client and server, in memory)", ["round_trip"]),
    ("Lore's tools/call (argument checks, deadline, SDK validation, result)", ["call_tool"]),
    ("service (scope, worker-thread hop, result model)", ["service", "store_drafts"]),
    ("validation and redaction", ["validate_redact"]),
    ("embedding the lesson", ["embed"]),
    ("BEGIN (write lock)", ["begin"]),
    (
        "earlier recalls' held activity entries, written with the save",
        ["activity_held", "activity_held_entry", "sql_activity_held"],
    ),
    ("near-duplicate neighbours (vectors and their rows)", ["dedup_neighbours"]),
    ("insert (row, tags, full-text, vector)", ["insert"]),
    ("history commit (schema hash, commit row, targets)", ["history", "sql_history"]),
    ("the save's activity entry", ["activity_entry", "sql_activity"]),
    ("COMMIT", ["commit"]),
    ("transaction start (Postgres: lock and settings) and the rules between", ["store_write"]),
    ("change notices", ["notices"]),
]
RECALL_ROWS: list[tuple[str, list[str]]] = [
    ("MCP framing and dispatch (SDK client and server, in memory)", ["round_trip"]),
    ("Lore's tools/call (argument checks, deadline, SDK validation, result)", ["call_tool"]),
    ("service (checks, redaction, result model)", ["service"]),
    ("worker thread and task group around the store", ["recall_overlap"]),
    ("full-text (terms' postings, ranked matches)", ["full_text"]),
    ("wait for the query vector (embedding not hidden by full-text)", ["wait_vector"]),
    ("nearest vectors", ["vector_search"]),
    ("candidate rows and similarities (Postgres: with the nearest vectors)", ["candidates"]),
    ("ranking (scores, coverage, order)", ["ranking"]),
    ("store's rules between (terms, query)", ["store_recall"]),
    ("COMMIT", ["commit"]),
    ("activity entry (held in memory)", ["activity_hold"]),
    ("change notices", ["notices"]),
]


def call_stages(events: list[tuple[str, str | None, float]], total_ms: float) -> dict[str, float]:
    """One call's own time per stage; the round trip's own time is what no stage accounts for."""
    own = own_times([*events, ("round_trip", None, total_ms)])
    beside = {f"{s}_beside": ms for s, _, ms in events if s in BESIDE}
    return {**own, **beside, "total": total_ms}


def summary(calls: list[dict[str, float]], rows: list[tuple[str, list[str]]]) -> dict[str, Any]:
    """p50 per row, and its share of the whole: the row's sum over calls over the total's."""
    total = sum(c["total"] for c in calls)
    table = []
    for label, stages in rows:
        values = [sum(c.get(s, 0.0) for s in stages) for c in calls]
        table.append(
            {
                "stage": label,
                "p50_ms": round(statistics.median(values), 3),
                "mean_ms": round(statistics.fmean(values), 3),
                "share": round(sum(values) / total, 4),
            }
        )
    totals = [c["total"] for c in calls]
    out: dict[str, Any] = {"stages": table, "total_p50_ms": round(statistics.median(totals), 3)}
    out["shares_sum"] = round(sum(row["share"] for row in table), 3)  # 1: the stages cover the call
    out["total_mean_ms"] = round(statistics.fmean(totals), 3)
    out["total_p95_ms"] = round(sorted(totals)[int(0.95 * (len(totals) - 1))], 3)
    accounted = {s for _, stages in rows for s in stages} | {"total"} | BESIDE
    stray = {k for c in calls for k in c if k not in accounted and not k.endswith("_beside")}
    if stray:
        out["unlisted_stages"] = sorted(stray)
    for key in sorted({k for c in calls for k in c if k.endswith("_beside")}):
        values = [c.get(key, 0.0) for c in calls]
        out[key.removesuffix("_beside") + "_p50_ms"] = round(statistics.median(values), 3)
    return out


@contextlib.asynccontextmanager
async def stdio_server(env: dict[str, str], errlog: Any) -> AsyncIterator[Client]:
    """``lore-memory mcp`` spawned as a client would, with this checkout's code."""
    lore = Path(sys.executable).with_name("lore-memory")
    full = {"LORE_PROJECT": "default", "PYTHONPATH": str(CODE_ROOT), **env}
    params = StdioServerParameters(command=str(lore), args=["mcp"], env=full)
    async with Client(stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=120) as client:
        yield client


async def timed_call(client: Client, tool: str, arguments: dict[str, Any]) -> float:
    start = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    ms = (time.perf_counter() - start) * 1000
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return ms


async def measure(
    service: LessonService,
    stdio_env: dict[str, str],
    args: argparse.Namespace,
    work: Path,
    recorder: Recorder,
) -> dict[str, Any]:
    """``--calls`` saves and recalls to both servers in turns; the first ``WARMUP`` not kept."""
    n = args.calls + WARMUP
    lessons = [lesson.arguments() for lesson in Generator(args.seed + 1).lessons(n)]
    queries = Generator(args.seed + 2).queries(n)
    inproc: dict[str, list[dict[str, float]]] = {"save_lesson": [], "recall_lessons": []}
    stdio: dict[str, list[float]] = {"save_lesson": [], "recall_lessons": []}
    server = build_server(service)
    with open(work / "server.log", "w") as errlog:
        async with Client(server, mode="legacy") as local, stdio_server(stdio_env, errlog) as remote:
            for i in range(n):
                if i == WARMUP:
                    await anyio.sleep(3)  # held activity entries of the warm-up written
                    recorder.drain()
                    recorder.background.clear()
                for tool, arguments in (
                    ("save_lesson", lessons[i]),
                    ("recall_lessons", {"query": queries[i]}),
                ):
                    for side in ("in", "out") if i % 2 else ("out", "in"):
                        if side == "out":
                            ms = await timed_call(remote, tool, arguments)
                            if i >= WARMUP:
                                stdio[tool].append(ms)
                            continue
                        recorder.drain()
                        ms = await timed_call(local, tool, arguments)
                        if i >= WARMUP:
                            inproc[tool].append(call_stages(recorder.drain(), ms))
    return report(inproc, stdio, recorder)


def report(
    inproc: dict[str, list[dict[str, float]]], stdio: dict[str, list[float]], recorder: Recorder
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tool, rows in (("save_lesson", SAVE_ROWS), ("recall_lessons", RECALL_ROWS)):
        table = summary(inproc[tool], rows)
        times = sorted(stdio[tool])
        table["stdio_p50_ms"] = round(statistics.median(times), 3)
        table["stdio_p95_ms"] = round(times[int(0.95 * (len(times) - 1))], 3)
        table["stdio_minus_in_process_p50_ms"] = round(table["stdio_p50_ms"] - table["total_p50_ms"], 3)
        table["calls"] = len(times)
        out[tool] = table
    background: dict[str, float] = {}
    for stage, ms in recorder.background:
        background[stage] = round(background.get(stage, 0.0) + ms, 3)
    out["background_ms_total"] = background  # off the calls (the activity writer thread)
    return out


def open_local(args: argparse.Namespace, work: Path) -> tuple[Store, dict[str, str]]:
    for name in ("inproc.db", "stdio.db"):
        shutil.copyfile(args.corpus, work / name)
    return open_local_store(work / "inproc.db"), {"LORE_DB_PATH": str(work / "stdio.db")}


def open_postgres(args: argparse.Namespace, work: Path) -> tuple[Store, dict[str, str]]:
    """A pgserver in ``work`` with two databases, each holding the corpus (copied, not embedded)."""
    import pgserver
    import psycopg

    uri = pgserver.get_server(work / "pg", cleanup_mode="stop").get_uri()
    shutil.copyfile(args.corpus, work / "source.db")
    urls = {}
    for side in ("inproc", "stdio"):
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE lore_{side}")  # a name made here
        urls[side] = uri.replace("/postgres?", f"/lore_{side}?", 1)
        store = open_postgres_store(urls[side])
        # Small transactions: under load a batch of 1,000 passed Postgres's statement timeout.
        copy_corpus(work / "source.db", store, batch=250)
        store.close()
        with psycopg.connect(urls[side], autocommit=True) as conn:
            conn.execute("ANALYZE lessons")
    env = {"LORE_STORE": "postgres", "LORE_DATABASE_URL": urls["stdio"]}
    return open_postgres_store(urls["inproc"]), env


def run_store(args: argparse.Namespace, backend: str) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix=f"lore-breakdown-{backend}-"))
    recorder = Recorder()
    # Before the store opens: it binds some methods (``append_activity``) when it is made.
    instrument(recorder)
    try:
        store, env = (open_local if backend == "local" else open_postgres)(args, work)
        embedder = Embedder()
        embedder.start()
        embedder.wait()
        service = LessonService(store, embedder, default_project="default")
        try:
            return anyio.run(measure, service, env, args, work, recorder)
        finally:
            store.close()
    finally:
        recorder.restore()
        shutil.rmtree(work, ignore_errors=True)


def load_average() -> list[float]:
    return [float(x) for x in Path("/proc/loadavg").read_text().split()[:3]]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=Path("/tmp/bench/corpus.db"))
    parser.add_argument("--store", choices=["local", "postgres", "both"], default="local")
    parser.add_argument("--calls", type=int, default=100, help="timed saves and recalls per server")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=HERE / "results-breakdown.json")
    args = parser.parse_args()
    if not args.corpus.exists():
        raise SystemExit(
            f"{args.corpus} is missing: make one with `python benchmarks/run.py --sizes 10000 --keep "
            "--workdir /tmp/bench` (its corpus.db), then pass --corpus."
        )
    result: dict[str, Any] = {
        "timestamp": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(["python", *sys.argv]),
        "calls": args.calls,
        "cpus": os.cpu_count(),
        "load_average_before": load_average(),
    }
    for backend in ("local", "postgres") if args.store == "both" else (args.store,):
        result[backend] = run_store(args, backend)
        result["load_average_after"] = load_average()
        text = json.dumps(result, indent=2)
        args.out.write_text(text + "\n")  # after each store: a later failure keeps what was measured
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
