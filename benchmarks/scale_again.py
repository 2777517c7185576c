"""Time a Postgres database that ``scale.py --keep DIR`` loaded, again, once the machine is quiet.

``scale.py`` times saves and recalls right after the load has built the indexes, while Postgres's
autovacuum works through the fresh table (the load average was 5 during the timings on the 2-core
machine). This restarts the kept server and runs the same calls (``scale.timed_calls``), ``--passes`` times (the first warms
the caches), with queries of another seed than the load's. Saves write into the kept database.

    .venv/bin/python benchmarks/scale.py --backend postgres --sizes 1000000 --shared-buffers 3GB --keep /tmp/scale
    .venv/bin/python benchmarks/scale_again.py /tmp/scale/pg-1000000 --passes 2
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from scale import open_pg, pct, pg_server, timed_calls
from synthetic import Generator

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from stores import open_postgres_store


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("pgdata", type=Path, help="a server folder ``scale.py --keep`` left (pg-N)")
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--vacuum", action="store_true", help="VACUUM ANALYZE first, as autovacuum would")
    args = parser.parse_args()
    server = pg_server(args.pgdata, None)
    url = server.get_uri()
    store = open_postgres_store(url)
    if args.vacuum:
        with open_pg(url) as conn:
            conn.autocommit = True
            started = time.perf_counter()
            conn.execute("VACUUM ANALYZE")
            print(f"VACUUM ANALYZE {time.perf_counter() - started:.1f} s", file=sys.stderr)
    with open_pg(url) as conn:  # the largest project, as ``scale.py`` chose it
        found = conn.execute("SELECT project FROM lessons GROUP BY project ORDER BY count(*) DESC LIMIT 1")
        largest = found.fetchone()[0]
    service = LessonService(store, Embedder(), default_project=largest)
    generator = Generator(args.seed)
    asked = generator.queries(args.queries)
    for n in range(args.passes):
        load_average = os.getloadavg()
        runs = timed_calls(service, generator, asked, largest)
        out = {"pass": n + 1, "latency_ms": {name: pct(samples) for name, samples in runs.items()}}
        out["load_average"] = [round(x, 2) for x in (*load_average, *os.getloadavg())]
        print(json.dumps(out), file=sys.stderr)
    store.close()
    server.cleanup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
