"""Save and recall latency of two versions of Lore side by side, over stdio, in short turns.

``benchmarks/run.py`` measures one version at a time, so on a shared machine a change in load
between two runs moves p50 by more than a small change costs. Here both versions serve at once
(each ``lore-memory mcp`` on its own copy of one corpus, ``PYTHONPATH`` pointing at each
version's ``lore_mcp`` and ``stores``), and every save and recall goes to both, in turns of
``--block`` calls (25: about a second) whose order alternates, so both see the same load.
Each version is spawned first for half the calls (against itself, the server spawned second
answered saves about 5 % and recalls about 2 % faster). ``--floor`` times ``model_floor.py`` (the
SDK's server and B's model, nothing else) in the same turns. Reported: each version's p50 and p95,
the median of the per-call differences (B - A), B/A, and with ``--floor`` the floor's p50 and its
ratio to A.

Not call for call (``--block 1``): a version whose idle threads spin after a call (OpenBLAS's
do, for a while after each product) took a core from the other's next call. Against the code
before issue 36 that made the new code's recall look 2 ms slower on a quiet machine; served one
at a time it was 0.6-1.9 ms faster, with half the CPU per call.

    mkdir -p /tmp/lore-a && git archive main lore_mcp stores | tar -x -C /tmp/lore-a
    mkdir -p /tmp/lore-b && git archive HEAD lore_mcp stores | tar -x -C /tmp/lore-b
    .venv/bin/python benchmarks/paired.py --a /tmp/lore-a --b /tmp/lore-b \\
        --corpus /tmp/bench/base-build/corpus.db --calls 150

The servers run under Linux's normal scheduler even when this harness runs under ``chrt -f 10``
(which keeps other work from moving the client's timings): they would inherit its FIFO policy,
under which no thread is time-sliced, and a change that spins threads (ONNX Runtime's, within a
run) looked neutral there while it cost a recall 22-35 % under the normal scheduler.

``--store postgres``: each version serves a database of its own in one pgserver (in the work
directory), into which that version itself copied the corpus's lessons and vectors (so each
database has the schema its version migrates to, and nothing is embedded again).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from synthetic import Generator


def postgres_sides(args: argparse.Namespace, work: Path) -> dict[str, dict[str, str]]:
    """A pgserver in ``work`` with one database per version, each holding the corpus as that
    version wrote it; the environment that points each version's server at its database."""
    import subprocess

    import pgserver
    import psycopg

    uri = pgserver.get_server(work / "pg", cleanup_mode="stop").get_uri()
    envs: dict[str, dict[str, str]] = {}
    for side, version in (("a", args.a), ("b", args.b)):
        with psycopg.connect(uri, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE lore_{side}")
        url = uri.replace("/postgres?", f"/lore_{side}?", 1)
        shutil.copyfile(args.corpus, work / f"{side}.db")
        env = {**os.environ, "PYTHONPATH": str(version)}
        copy = [
            sys.executable,
            str(Path(__file__).with_name("corpus_copy.py")),
            url,
            str(work / f"{side}.db"),
        ]
        subprocess.run(copy, env=env, check=True)
        envs[side] = {"LORE_STORE": "postgres", "LORE_DATABASE_URL": url}
    return envs


# Arguments to ``python`` that run a program under the normal scheduler (SCHED_OTHER, on Linux),
# whatever policy this process has: servers are measured as users run them.
NORMAL_SCHEDULER = [
    "-c",
    "import os, sys; hasattr(os, 'SCHED_OTHER') and os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0)); "
    "os.execv(sys.argv[1], sys.argv[1:])",
]


@contextlib.asynccontextmanager
async def server(version: Path, db: Path, errlog: Any, extra: dict[str, str]) -> AsyncIterator[Client]:
    lore = Path(sys.executable).with_name("lore-memory")
    env = {"LORE_DB_PATH": str(db), "LORE_PROJECT": "default", "PYTHONPATH": str(version), **extra}
    params = StdioServerParameters(
        command=sys.executable, args=[*NORMAL_SCHEDULER, str(lore), "mcp"], env=env
    )
    async with Client(stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=120) as client:
        yield client


async def timed(client: Client, tool: str, arguments: dict[str, Any]) -> float:
    start = time.perf_counter()
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(f"{tool} failed: {result.content}")
    return (time.perf_counter() - start) * 1000


async def save_and_recall(
    client: Client,
    lesson: dict[str, Any],
    query: str,
    times: dict[str, dict[str, list[float]]],
    side: str,
    i: int,
) -> None:
    for tool, arguments in (("save_lesson", lesson), ("recall_lessons", {"query": query})):
        ms = await timed(client, tool, arguments)
        if i >= 5:  # the first calls load the model and the index
            times[tool][side].append(ms)


def summary(a: list[float], b: list[float], floor: list[float]) -> dict[str, float]:
    def p(values: list[float], q: float) -> float:
        return round(sorted(values)[int(q * (len(values) - 1))], 2)

    out = {
        "a_p50": round(statistics.median(a), 2),
        "b_p50": round(statistics.median(b), 2),
        "a_p95": p(a, 0.95),
        "b_p95": p(b, 0.95),
        "median_b_minus_a": round(statistics.median(y - x for x, y in zip(a, b, strict=True)), 2),
        "b_over_a": round(statistics.median(b) / statistics.median(a), 3),
    }
    if floor:  # --floor: the model and the SDK alone, in the same turns
        out |= {"floor_p50": round(statistics.median(floor), 2)}
        out |= {"floor_over_a": round(statistics.median(floor) / statistics.median(a), 3)}
    return out


@contextlib.asynccontextmanager
async def floor_server(version: Path, errlog: Any) -> AsyncIterator[Client]:
    """``model_floor.py`` on version ``version``'s model code."""
    script = str(Path(__file__).with_name("model_floor.py"))
    params = StdioServerParameters(
        command=sys.executable,
        args=[*NORMAL_SCHEDULER, sys.executable, script],
        env={"PYTHONPATH": str(version)},
    )
    async with Client(stdio_client(params, errlog=errlog), mode="legacy", read_timeout_seconds=120) as client:
        yield client


async def run(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    saves, queries = Generator(args.seed + 1), Generator(args.seed + 2)
    half = (args.calls + 1) // 2  # timed calls per version in each half
    lessons = [lesson.arguments() for lesson in saves.lessons(2 * (half + 5))]
    asked = queries.queries(2 * (half + 5))
    times: dict[str, dict[str, list[float]]] = {
        t: {"a": [], "b": [], "floor": []} for t in ("save_lesson", "recall_lessons")
    }
    with open(work / "servers.log", "w") as errlog:
        extra: dict[str, dict[str, str]] = {"a": {}, "b": {}}
        if args.store == "postgres":
            extra = postgres_sides(args, work)
        else:
            for side in ("a", "b"):
                shutil.copyfile(args.corpus, work / f"{side}.db")
        version = {"a": args.a, "b": args.b}
        # The server spawned second answered 4-8 % faster saves and 1-4 % faster recalls when both
        # ran the same code, so each version is spawned first for half the calls.
        for n, spawned in enumerate((("a", "b"), ("b", "a"))):
            async with contextlib.AsyncExitStack() as stack:
                clients = {
                    side: await stack.enter_async_context(
                        server(version[side], work / f"{side}.db", errlog, extra[side])
                    )
                    for side in spawned
                }
                if args.floor:
                    clients["floor"] = await stack.enter_async_context(floor_server(args.b, errlog))
                sides = ["a", "b", "floor"] if args.floor else ["a", "b"]
                # Turns of ``--block`` calls each, the first turn's order alternating.
                for first in range(0, half + 5, args.block):
                    for side in sides[::-1] if (first // args.block) % 2 == 0 else sides:
                        for i in range(first, min(first + args.block, half + 5)):
                            j = n * (half + 5) + i
                            await save_and_recall(clients[side], lessons[j], asked[j], times, side, i)
    return {tool: summary(sides["a"], sides["b"], sides["floor"]) for tool, sides in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--a", type=Path, required=True, help="folder holding version A's lore_mcp and stores"
    )
    parser.add_argument(
        "--b", type=Path, required=True, help="folder holding version B's lore_mcp and stores"
    )
    parser.add_argument(
        "--corpus", type=Path, required=True, help="a kept corpus.db (benchmarks/run.py --keep)"
    )
    parser.add_argument("--store", choices=["local", "postgres"], default="local")
    parser.add_argument("--calls", type=int, default=150, help="timed saves and recalls per version")
    parser.add_argument(
        "--block",
        type=int,
        default=25,
        help="calls to one version before the other takes its turn (1: call for call, in which a "
        "version whose idle threads spin after each call, as OpenBLAS's do, takes a core from the other)",
    )
    parser.add_argument(
        "--floor",
        action="store_true",
        help="also time benchmarks/model_floor.py (B's model and the SDK alone) in the same turns",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="lore-paired-"))
    try:
        before = list(os.getloadavg())
        result = {"store": args.store, "load_average_before": before, **anyio.run(run, args, work)}
        result["load_average_after"] = list(os.getloadavg())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
