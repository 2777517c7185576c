"""Where a recall and a save go on a large SQLite file, stage by stage, at the store level.

``scale.py`` gives whole calls; this times the store's stages on a file it kept (``scale.py
--keep DIR``): full text (``LocalLessons.word_keys``, its postings count within), the vector
candidates (``candidates``: the int8 scan, rescoring, candidate rows, centring) and ranking
(``scored_lessons``), per project kind and with tag and confidence filters; for a save, the
near-duplicate search, the row writes and the commit row. Each stage is wrapped from outside
(inclusive times; nothing in Lore is edited), query vectors are made first, so the model's time is
not in the figures. Saves write to the file: use a copy.

    .venv/bin/python benchmarks/scale.py --backend local --sizes 250000 --keep /tmp/scale
    cp /tmp/scale/lore-250000.db /tmp/stages.db
    .venv/bin/python benchmarks/scale_stages.py /tmp/stages.db --calls 40
"""

from __future__ import annotations

import argparse
import functools
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from scale_corpus import ONE_PERCENT, TINY
from synthetic import TOPICS, Generator

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import embedding_text
from stores import open_local_store
from stores.engine import lesson_rows, lesson_rules, vector_index
from stores.engine.lessons import LessonDraft, RecallQuery, Scope
from stores.sqlite import db, lessons, vectors

TIMES: dict[str, list[float]] = {}
STAGES = [
    (lesson_rules.SqlStore, "recall", "recall"),
    (lessons.LocalLessons, "word_keys", "  full text"),
    (lessons.LocalLessons, "_postings", "    postings count"),
    (lessons.LocalLessons, "candidates", "  vector candidates"),
    (lessons.LocalLessons, "_tagged_pks", "    tagged lessons"),
    (vector_index.VectorIndex, "search", "    int8 scan"),
    (vectors.LocalVectors, "similarities", "    rescoring"),
    (lessons, "_candidate_rows", "    candidate rows"),
    (lessons.LocalLessons, "_centred_similarities", "    centring"),
    (lesson_rules, "scored_lessons", "  ranking"),
    (lesson_rules.SqlStore, "save_many", "save"),
    (db, "_retry_locked", "  BEGIN / COMMIT"),
    (lesson_rows.SqlLessonTx, "nearest", "  near duplicates"),
    (lesson_rows.SqlLessonTx, "insert_many", "  row, FTS, tag and vector writes"),
    (lesson_rows.SqlLessonTx, "record", "  commit row"),
]


def wrap(owner: Any, name: str, label: str) -> None:
    fn = getattr(owner, name)

    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            TIMES.setdefault(label, []).append(time.perf_counter() - started)

    setattr(owner, name, timed)


def report(title: str) -> None:
    print(f"{title} (load average {os.getloadavg()[0]:.2f})")
    for label in (label for _, _, label in STAGES if label in TIMES):  # outer stages first
        samples = TIMES[label]
        print(f"  {label:36s} p50 {statistics.median(samples) * 1000:7.2f} ms  ({len(samples)} calls)")
    TIMES.clear()


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("db", type=Path)
    parser.add_argument("--calls", type=int, default=40)
    args = parser.parse_args()
    for owner, name, label in STAGES:
        wrap(owner, name, label)
    store, embedder, generator = open_local_store(args.db), Embedder(), Generator(11)
    with store._backend.conns.reading() as conn:  # type: ignore[attr-defined]
        largest = conn.execute(
            "SELECT project FROM lessons GROUP BY project ORDER BY count(*) DESC"
        ).fetchone()[0]
    asked = generator.queries(args.calls + 5)
    queries = [RecallQuery(text=q, limit=5).with_vector(embedder.encode_query(q)) for q in asked]
    topics = list(TOPICS)
    for query in queries[:5]:  # the index's first load, caches
        store.recall(Scope("local", largest), query)
    for kind in ("largest", ONE_PERCENT, TINY, "tag + confidence"):
        TIMES.clear()
        for i, query in enumerate(queries[5:]):
            if kind == "tag + confidence":
                query = RecallQuery(
                    text=query.text,
                    vector=query.vector,
                    tags=(TOPICS[topics[i % len(topics)]][4][0],),
                    min_confidence=0.6,
                )
            store.recall(Scope("local", largest if kind in ("largest", "tag + confidence") else kind), query)
        report(f"recall, {kind} project" if "tag" not in kind else f"recall, {kind}, largest project")
    drafts = [generator.lesson() for _ in range(args.calls)]
    vecs = embedder.encode_documents([embedding_text(x.problem, x.resolution) for x in drafts])
    TIMES.clear()
    for lesson, vec in zip(drafts, vecs, strict=True):
        store.save(
            Scope("local", largest), LessonDraft(problem=lesson.problem, resolution=lesson.resolution), vec
        )
    report("save, largest project")
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
