"""Copy a kept corpus's lessons and their vectors into a store, without embedding them again.

``activity_cost.py`` calls ``copy_corpus`` in process. ``paired.py`` runs this file as a script
once per version, with that version's ``PYTHONPATH``, so that each version's database has the
schema that version migrates to: it imports only what every version since the 10k corpus has.

    python benchmarks/corpus_copy.py POSTGRES_URL CORPUS_DB
"""

from __future__ import annotations

import sqlite3
import sys
from pathlib import Path

import numpy as np

from stores import Scope, Store, open_local_store, open_postgres_store
from stores.engine.lessons import LessonDraft

SCOPE = Scope("local", "default")
BATCH = 1000


def copy_corpus(path: Path, store: Store, batch: int = BATCH) -> None:
    """The lessons and vectors of the corpus at ``path`` into ``store``'s default project, ``batch``
    lessons a transaction (fewer on a busy machine, where a big one can pass a statement timeout)."""
    open_local_store(path).close()  # an older corpus moves its vectors to today's table
    conn = sqlite3.connect(path)
    rows = conn.execute(
        "SELECT l.problem, l.resolution, v.embedding FROM lessons AS l JOIN lesson_embeddings AS v ON v.pk = l.pk"
    ).fetchall()
    conn.close()
    for start in range(0, len(rows), batch):
        chunk = rows[start : start + batch]
        store.save_many(
            SCOPE, [(LessonDraft(p, r), np.frombuffer(blob, dtype=np.float32)) for p, r, blob in chunk]
        )


def main() -> int:
    url, path = sys.argv[1], Path(sys.argv[2])
    store = open_postgres_store(url)
    try:
        copy_corpus(path, store)
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
