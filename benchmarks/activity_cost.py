"""What the activity log adds to a save and a recall, measured at the store on a 10k corpus.

``benchmarks/run.py`` measures save and recall end to end over stdio, where the embedding model
and the machine's load move p50 by more than the millisecond this log may cost. This times only
what the log adds, interleaved so load hits both sides alike:

- a save: ``save_many`` of one new lesson with its entry (``activity=``), just after a recall's
  entry was held (on SQLite that entry is written with the save: a save after a recall pays
  for both), against a save without an entry and with nothing held, as if there were no log;
  in turns (the difference of the two p50s, and the median difference of each pair of turns);
- a recall: its entry's own short transaction (``append_activity`` with a query and 5 ranked
  ids), which is all a recall does more.

The log is first filled to its bound (``ActivityBounds.max_entries``), so trimming runs as it
does in a busy project. Local: a copy of a kept corpus. Postgres: a pgserver in the work
directory, the corpus copied in without embedding.

    .venv/bin/python benchmarks/activity_cost.py --corpus /tmp/bench/base-build/corpus.db
    .venv/bin/python benchmarks/activity_cost.py --corpus /tmp/bench/base-build/corpus.db --store postgres
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from corpus_copy import SCOPE, copy_corpus

from stores import ActivityBounds, Store, open_local_store, open_postgres_store
from stores.engine.activity import ActivityNote, ActivityQuery, Recalled
from stores.engine.lessons import LessonDraft


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - start) * 1000


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": round(statistics.median(ordered), 3),
        "p95": round(ordered[int(0.95 * (len(ordered) - 1))], 3),
        "n": len(ordered),
    }


def open_store(args: argparse.Namespace, work: Path) -> Store:
    if args.store == "local":
        db = work / "corpus.db"
        shutil.copyfile(args.corpus, db)
        return open_local_store(db)
    import pgserver

    url = pgserver.get_server(work / "pg", cleanup_mode="stop").get_uri()
    store = open_postgres_store(url)
    shutil.copyfile(args.corpus, work / "source.db")
    copy_corpus(work / "source.db", store)
    return store


def measure(store: Store, n: int) -> dict[str, Any]:
    rng = np.random.default_rng(7)
    bounds = ActivityBounds()
    recall = ActivityNote(
        "recall",
        key_id="01J0000000000000000000KEY0",
        client="benchmark",
        query="why does the billing webhook time out behind the proxy after the upgrade",
        results=tuple(Recalled(f"01J00000000000000000000{i:03d}", i + 1, 0.5) for i in range(5)),
    )
    for _ in range(bounds.max_entries):  # the log at its bound: trimming runs as in a busy project
        store.append_activity(SCOPE, recall)
    with_log: list[float] = []
    without: list[float] = []
    appends: list[float] = []
    for i in range(n):
        vec = rng.standard_normal(384).astype(np.float32)
        draft = LessonDraft(f"benchmark problem {i} {rng.integers(10**9)}", f"benchmark resolution {i}")
        note = ActivityNote("save", key_id="01J0000000000000000000KEY0", client="benchmark")
        if i % 2:
            # As after a recall: its held entry rides along with this save on SQLite.
            appends.append(timed(store.append_activity, SCOPE, recall))
            with_log.append(timed(store.save_many, SCOPE, [(draft, vec)], activity=note))
        else:
            store.activity(SCOPE, ActivityQuery(limit=1))  # a read writes what is held: none rides along
            without.append(timed(store.save_many, SCOPE, [(draft, vec)]))
    saves: dict[str, Any] = {"with_entry": summary(with_log), "without": summary(without)}
    saves["added_p50_ms"] = round(saves["with_entry"]["p50"] - saves["without"]["p50"], 3)
    # Each save with an entry against the save without one just before it: the load they met
    # was nearly the same, so this median moves less from run to run than the difference above.
    pairs = [w - wo for w, wo in zip(with_log, without, strict=False)]
    saves["paired_median_diff_ms"] = round(statistics.median(pairs), 3)
    return {"save": saves, "recall_entry": summary(appends)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--corpus", type=Path, required=True, help="a kept 10k corpus.db (benchmarks/run.py --keep)"
    )
    parser.add_argument("--store", choices=["local", "postgres"], default="local")
    parser.add_argument(
        "--n", type=int, default=400, help="timed saves (half with an entry) and recall entries"
    )
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lore-activity-cost-"))
    try:
        store = open_store(args, work)
        try:
            result = {
                "store": args.store,
                "lessons": store.count(SCOPE.org, SCOPE.project),
                "load_average_before": list(os.getloadavg()),
                **measure(store, args.n),
                "load_average_after": list(os.getloadavg()),
            }
        finally:
            store.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
