"""The load rate alone, on a corpus file made once: ``Transfer.import_file`` (what ``lore-memory
import`` and ``scale.py``'s load run) of an export file into a fresh store, so that the code
before and after a change loads the very same file (run each with its own ``PYTHONPATH``).
Prints lessons/s, what the import reported and the load average before and after; ``--profile
FILE`` writes cProfile's statistics of the import and prints the top of them.

    .venv/bin/python benchmarks/scale_corpus.py 100000 /tmp/corpus-100k.jsonl
    .venv/bin/python benchmarks/import_rate.py local /tmp/corpus-100k.jsonl
    .venv/bin/python benchmarks/import_rate.py postgres /tmp/corpus-100k.jsonl
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from pathlib import Path

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from lore_mcp.services.transfer import Transfer
from stores import open_local_store, open_postgres_store


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("backend", choices=("local", "postgres"))
    parser.add_argument("corpus", type=Path, help="an export file (scale_corpus.py writes one)")
    parser.add_argument("--profile", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        if args.backend == "postgres":
            import pgserver

            store = open_postgres_store(pgserver.get_server(Path(tmp) / "pg").get_uri())
        else:
            store = open_local_store(Path(tmp) / "lore.db")
        n = sum(1 for line in args.corpus.open() if '"type": "lesson"' in line)
        transfer = Transfer(LessonService(store, Embedder(), default_project="p-000"))
        before, profile = os.getloadavg(), cProfile.Profile() if args.profile else None
        started = time.perf_counter()
        with args.corpus.open() as f:
            if profile:
                profile.enable()
            report = transfer.import_file(f, org="local", project=None, strict=False)
            if profile:
                profile.disable()
        seconds = time.perf_counter() - started
        after = os.getloadavg()
        store.close()
    print(
        f"{args.backend}: {n} lessons in {seconds:.1f} s, {n / seconds:.1f}/s; added {report.added}, "
        f"merged {report.merged}, kept vectors {report.kept_vectors}, errors {len(report.errors)}; "
        f"load average {before[0]:.2f} before, {after[0]:.2f} after"
    )
    if profile:
        profile.dump_stats(args.profile)
        pstats.Stats(str(args.profile)).sort_stats("cumulative").print_stats(40)
    return 0


if __name__ == "__main__":
    sys.exit(main())
