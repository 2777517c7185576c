"""The load rate alone, on a corpus file made once: ``Transfer.import_file`` (what ``lore-memory
import`` and ``scale.py``'s load run) of an export file into a fresh store, so that the code
before and after a change loads the very same file (run each with its own ``PYTHONPATH``).
Prints lessons/s (rows written and indexes ready), the rows' own rate and the time after them
(Postgres building the indexes it dropped for the load), the process's peak RSS, what the import
reported and the load average before and after; ``--profile FILE`` writes cProfile's statistics
of the import and prints the top of them. The file is read as ``lore-memory import`` reads it.

    .venv/bin/python benchmarks/scale_corpus.py 100000 /tmp/corpus-100k.jsonl
    .venv/bin/python benchmarks/import_rate.py local /tmp/corpus-100k.jsonl
    .venv/bin/python benchmarks/import_rate.py postgres /tmp/corpus-100k.jsonl
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import os
import pstats
import resource
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.transfer import Transfer, file_lines
from stores import open_local_store, open_postgres_store


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("backend", choices=("local", "postgres"))
    parser.add_argument("corpus", type=Path, help="an export file (scale_corpus.py writes one)")
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        if args.backend == "postgres":
            import pgserver

            server = pgserver.get_server(Path(tmp) / "pg")
            stack.callback(server.cleanup)  # stopped before its folder goes (rmtree raced its WAL writer)
            store = open_postgres_store(server.get_uri())
        else:
            store = open_local_store(Path(tmp) / "lore.db")
        n = sum(1 for line in args.corpus.open() if '"type": "lesson"' in line)
        transfer = Transfer(LessonService(store, Embedder(), default_project="p-000"))
        bulk, rows_done = store.bulk, []

        @contextlib.contextmanager
        def timed(org: str, coming: int) -> Iterator[int]:
            with bulk(org, coming) as writers:
                yield writers
                rows_done.append(time.perf_counter())  # the rows are in; the indexes may follow

        store.bulk = timed
        before, profile = os.getloadavg(), cProfile.Profile() if args.profile else None
        started = time.perf_counter()
        if profile:
            profile.enable()
        report = transfer.import_file(file_lines(str(args.corpus)), org="local", project=None, strict=False)
        if profile:
            profile.disable()
        seconds = time.perf_counter() - started
        after = os.getloadavg()
        store.close()
    rows_s, peak = rows_done[0] - started, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"{args.backend}: {n} lessons in {seconds:.1f} s, {n / seconds:.1f}/s (rows {rows_s:.1f} s, "
        f"{n / rows_s:.1f}/s; after them {seconds - rows_s:.1f} s); peak RSS {peak:.0f} MB; added "
        f"{report.added}, merged {report.merged}, kept vectors {report.kept_vectors}, errors "
        f"{len(report.errors)}; load average {before[0]:.2f} before, {after[0]:.2f} after"
    )
    if profile:
        profile.dump_stats(args.profile)
        pstats.Stats(str(args.profile)).sort_stats("cumulative").print_stats(40)
    return 0


if __name__ == "__main__":
    sys.exit(main())
