"""Where a recall goes on a large Postgres database, at the store level: full text and candidates.

``scale_stages.py`` does this for SQLite. Here ``PostgresLessons.word_keys`` (full text: the
postings estimate and ``lore_lexical_candidates``) and ``PostgresLessons.candidates`` (HNSW or the
exact scan, the candidate rows, centring) are wrapped from outside (nothing in Lore is edited)
around ``SqlStore.recall`` in one project; query vectors are made first, so the model's time is not
in the figures. Two rounds; the second is printed (p50 and p95 in ms). ``--saves N`` then saves N
lessons into the first project, split the same way: the near-duplicate search
(``PostgresLessonRows.nearest``), the row's insert (``SqlLessonTx.insert``: the heap and every index)
and the commit row (``SqlLessonTx.record``); the rest of ``SqlStore.save_many`` is the transaction's
start (the project's lock), its rules and ``COMMIT``. Saves write: use a copy, or a kept server you
may change.

    .venv/bin/python benchmarks/scale.py --backend postgres --sizes 1000000 --load-only --shared-buffers 3GB --keep /tmp/scale
    .venv/bin/python benchmarks/scale_stages_postgres.py /tmp/scale/pg-1000000 p-000 p-1pct p-tiny
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from scale import pct, pg_server
from scale_stages import TIMES, wrap
from synthetic import Generator

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import embedding_text
from stores import open_postgres_store
from stores.engine.lesson_rows import SqlLessonTx
from stores.engine.lesson_rules import SqlStore
from stores.engine.lessons import LessonDraft, RecallQuery, Scope
from stores.postgres.lessons import PostgresLessonRows, PostgresLessons


def ms(samples: list[float]) -> str:
    found = pct(samples)
    return f"{found['p50']} / {found['p95']}"


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("pgdata", type=Path, help="a server folder ``scale.py --keep`` left (pg-N)")
    parser.add_argument("projects", nargs="+")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--saves", type=int, default=0, help="then time this many saves in the first project")
    args = parser.parse_args()
    for name in ("word_keys", "candidates"):
        wrap(PostgresLessons, name, name)  # as ``scale_stages.py`` wraps SQLite's
    server = pg_server(args.pgdata, None)
    store, embedder = open_postgres_store(server.get_uri()), Embedder()
    asked = Generator(args.seed).queries(args.queries)
    vectors = [embedder.encode_query(text) for text in asked]
    for project in args.projects:
        scope, whole = Scope("local", project), []
        for _ in range(2):
            TIMES.clear()
            whole = []
            for text, vector in zip(asked, vectors, strict=True):
                started = time.perf_counter()
                store.recall(scope, RecallQuery(text=text, limit=5).with_vector(vector))
                whole.append(time.perf_counter() - started)
        print(
            f"{project}: recall {ms(whole)} | full text {ms(TIMES['word_keys'])}"
            f" | candidates {ms(TIMES['candidates'])} ms (p50 / p95)"
        )
    if args.saves:
        save_stages(store, embedder, Generator(args.seed + 1), args.projects[0], args.saves)
    store.close()
    server.cleanup()
    return 0


def save_stages(store: Any, embedder: Embedder, generator: Generator, project: str, n: int) -> None:
    """Saves into ``project``, five untimed first, split into the stages the module docstring names."""
    for owner, name in (
        (SqlStore, "save_many"),
        (PostgresLessonRows, "nearest"),
        (SqlLessonTx, "insert"),
        (SqlLessonTx, "record"),
    ):
        wrap(owner, name, name)
    drafts = [generator.lesson() for _ in range(n + 5)]
    vectors = embedder.encode_documents([embedding_text(d.problem, d.resolution) for d in drafts])
    inner = ("nearest", "insert", "record")
    rest: list[float] = []  # per save, from its own stages: a merge has no insert
    for i, (draft, vector) in enumerate(zip(drafts, vectors, strict=True)):
        if i == 5:
            TIMES.clear()
        before = sum(sum(TIMES.get(k, ())) for k in inner)
        store.save(
            Scope("local", project), LessonDraft(problem=draft.problem, resolution=draft.resolution), vector
        )
        if i >= 5:
            rest.append(TIMES["save_many"][-1] - (sum(sum(TIMES.get(k, ())) for k in inner) - before))
    inserts = TIMES.get("insert", [])
    print(
        f"{project}: save {ms(TIMES['save_many'])} | near duplicates {ms(TIMES['nearest'])}"
        f" | insert {ms(inserts) if inserts else '-'} ({len(inserts)} of {n} saves inserted)"
        f" | commit row {ms(TIMES['record'])} | start, rules and COMMIT {ms(rest)} ms (p50 / p95)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
