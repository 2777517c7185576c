"""Lore in the agent's loop, measured (issue 33): asks, session-start lessons, the prompt bar, speed.

    .venv/bin/python benchmarks/agent_loop.py --half dev      # tune here: prints the bar's sweep
    .venv/bin/python benchmarks/agent_loop.py --half test     # report: never tune on it
    .venv/bin/python benchmarks/agent_loop.py --half test --speed --out benchmarks/results-agent-loop.json

What it measures, on the sessions and lessons of ``benchmarks/sets/agent_sessions.py``:

1. Capture: for every session, whether the stop hook's reading of its transcript asks
   (``transcript.examine``), by kind: sessions that learned something (fix, correction,
   struggle), sessions that learned nothing, and the person's #skip / #remember.
2. Session start: each scenario's repository holds its lessons among ``--distractors``
   synthetic ones per repository (votes vary); for each scenario, a session on its topic
   branch and one on ``main``: whether the lessons injected at the start include the one the
   session needed, and the bytes injected (median, max, the budget).
3. The prompt bar: for each scenario, its task prompt (which needs its lesson) and a prompt of
   the same repository that no lesson answers; on the dev half a sweep of the bar over recall's
   score (the share of task prompts given their lesson, of other prompts given anything), the
   bar chosen as the highest F0.5 (precision counts twice: an unwanted lesson costs context on
   every prompt); on the test half the figures at the configured bar.
4. With ``--speed``: per-prompt injection through the MCP tool path (``prompt_context`` over
   stdio, SDK client, model warm) at ``--lessons`` (10,000) lessons, p50/p95; and each command
   hook from a cold start (a new process per run, as the clients start them), median of 5.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.sets.agent_sessions import (  # noqa: E402
    KINDS_LEARNED,
    KINDS_NOTHING,
    SCENARIOS,
    half_of,
    lessons,
    prompts,
    sessions,
)
from benchmarks.synthetic import Generator  # noqa: E402
from lore_mcp.services.loop import LoopService, LoopSettings  # noqa: E402
from lore_mcp.services.transcript import examine  # noqa: E402
from lore_mcp.services.workdir import Workdir  # noqa: E402

BARS = [round(0.30 + 0.02 * i, 2) for i in range(21)]


def capture(half: str) -> dict[str, Any]:
    asked: Counter[str] = Counter()
    total: Counter[str] = Counter()
    for session in sessions(half):
        total[session.kind] += 1
        asked[session.kind] += examine(session.lines).should_ask
    learned = sum(asked[k] for k in KINDS_LEARNED) / sum(total[k] for k in KINDS_LEARNED)
    nothing = sum(asked[k] for k in KINDS_NOTHING) / sum(total[k] for k in KINDS_NOTHING)
    return {
        "asked_when_learned": round(learned, 3),
        "asked_when_nothing_learned": round(nothing, 3),
        "by_kind": {k: f"{asked[k]}/{total[k]}" for k in total},
    }


async def _seed(app: Any, distractors: int) -> dict[int, str]:
    """Each scenario's lesson in its repository's project, among synthetic ones; votes vary."""
    ids: dict[int, str] = {}
    generator = Generator(seed=33)
    service = app.lessons
    for repo in sorted({s.repo for s in SCENARIOS}):
        scope = service.scope(repo)
        drafts = [service.make_draft(**lesson.arguments())[0] for lesson in generator.lessons(distractors)]
        service.store_drafts(scope, drafts)
    for lesson in lessons():
        saved = await service.save(
            problem=lesson["problem"], resolution=lesson["resolution"], project=lesson["project"]
        )
        ids[lesson["scenario"]] = saved.id
        for _ in range(lesson["upvotes"]):
            await service.vote(saved.id, up=True, project=lesson["project"])
    # Some distractors get votes too, so the needed lesson is not the only voted one.
    for repo in sorted({s.repo for s in SCENARIOS}):
        page = service.store.list(service.scope(repo), (), 10, None)
        for n, lesson in enumerate(page.lessons):
            for _ in range(n % 4):
                await service.vote(lesson.id, up=True, project=repo)
    return ids


async def session_start(app: Any, ids: dict[int, str], half: str, settings: LoopSettings) -> dict[str, Any]:
    loop = LoopService(app.lessons, settings)
    hits, sizes, runs, by_first, sizes_first = 0, [], 0, 0, []
    by_branch: Counter[str] = Counter()
    for index, scenario in enumerate(SCENARIOS):
        if half_of(index) != half:
            continue
        for branch in (scenario.branch, "main"):
            runs += 1
            where = Workdir(repository=scenario.repo, branch=branch)
            found = await loop.session_context(
                session_id=f"bench-{index}-{branch}", where=where, project=scenario.repo
            )
            hit = ids[index] in found.lesson_ids
            first = await loop.prompt_context(
                prompt=scenario.prompt, session_id=f"bench-{index}-{branch}", project=scenario.repo
            )
            by_first += hit or ids[index] in first.lesson_ids
            sizes_first.append(found.size + first.size)
            hits += hit
            by_branch["topic" if branch != "main" else "main"] += hit
            sizes.append(found.size)
    return {
        "needed_lesson_injected": round(hits / runs, 3),
        "on_topic_branch": f"{by_branch['topic']}/{runs // 2}",
        "on_main": f"{by_branch['main']}/{runs // 2}",
        "needed_lesson_by_first_prompt": round(by_first / runs, 3),
        "bytes_median": statistics.median(sizes),
        "bytes_with_first_prompt_median": statistics.median(sizes_first),
        "bytes_with_first_prompt_max": max(sizes_first),
        "bytes_max": max(sizes),
        "budget_chars": settings.session_chars,
    }


async def prompt_bar(app: Any, ids: dict[int, str], half: str, bar: float | None) -> dict[str, Any]:
    """Per prompt: the scores of its needed lesson and of the best other lesson."""
    rows = []
    for text, needed, _ in prompts(half):
        repo = SCENARIOS[needed].repo if needed is not None else _repo_of(text)
        _, hits = await app.lessons.search(app.lessons.scope(repo), text, limit=5)
        own = max((h.score for h in hits if needed is not None and h.lesson.id == ids[needed]), default=0.0)
        other = max((h.score for h in hits if needed is None or h.lesson.id != ids[needed]), default=0.0)
        rows.append((needed is not None, own, other))
    sweep = {b: _rates(rows, b) for b in BARS}
    chosen = bar if bar is not None else max(BARS, key=lambda b: (sweep[b]["f05"], b))
    out: dict[str, Any] = {"bar": chosen, **_rates(rows, chosen)}
    if bar is None:
        out["sweep"] = sweep
    return out


def _repo_of(prompt: str) -> str:
    return next(s.repo for s in SCENARIOS if s.other_prompt == prompt)


def _rates(rows: list[tuple[bool, float, float]], bar: float) -> dict[str, float]:
    tasks = [r for r in rows if r[0]]
    others = [r for r in rows if not r[0]]
    given = sum(own >= bar for _, own, _ in tasks) / len(tasks)
    noise_tasks = sum(other >= bar for _, _, other in tasks) / len(tasks)
    noise_others = sum(other >= bar for _, _, other in others) / len(others)
    precision_den = sum(own >= bar for _, own, _ in tasks) + sum(o >= bar for _, _, o in rows)
    precision = sum(own >= bar for _, own, _ in tasks) / precision_den if precision_den else 1.0
    f1 = 2 * precision * given / (precision + given) if precision + given else 0.0
    # F0.5 weighs precision twice: a lesson given with a prompt it does not answer costs the
    # agent context on every such prompt, while a missed one is still a recall away.
    f05 = 1.25 * precision * given / (0.25 * precision + given) if precision + given else 0.0
    return {
        "task_prompts_given_their_lesson": round(given, 3),
        "task_prompts_given_another_lesson": round(noise_tasks, 3),
        "unanswerable_prompts_given_anything": round(noise_others, 3),
        "precision": round(precision, 3),
        "f1": round(f1, 3),
        "f05": round(f05, 3),
    }


def speed(lessons_n: int, bar: float) -> dict[str, Any]:
    """The MCP tool path at ``lessons_n`` lessons, and the command hooks from a cold start."""
    from benchmarks.run import bulk_load, percentiles
    from lore_mcp.embedding.embedder import Embedder

    work = Path(tempfile.mkdtemp(prefix="lore-loop-bench-"))
    db = work / "lore.db"
    embedder = Embedder()
    os.environ["LORE_DB_PATH"] = str(db)
    stats = bulk_load(db, Generator(seed=7).lessons(lessons_n), embedder, 256)
    queries = Generator(seed=8).queries(120)
    tool = asyncio.run(_tool_latency(db, queries, bar))
    env = {
        **os.environ,
        "LORE_DB_PATH": str(db),
        "LORE_PROJECT": "bench",
        "XDG_STATE_HOME": str(work / "state"),
    }
    hooks = {}
    repo = work / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".git" / "HEAD").write_text("ref: refs/heads/fix/webhook-retries\n")
    for event, payload in (
        ("session-start", {"session_id": "cold", "cwd": str(repo), "source": "startup"}),
        ("prompt", {"session_id": "cold", "cwd": str(repo), "prompt": queries[0]}),
        ("stop", {"session_id": "cold", "cwd": str(repo), "stop_hook_active": False}),
    ):
        times = []
        for _ in range(5):
            t0 = time.perf_counter()
            subprocess.run(
                [str(Path(sys.executable).with_name("lore-memory")), "hook", event],
                input=json.dumps(payload),
                capture_output=True,
                text=True,
                env=env,
                check=True,
            )
            times.append(time.perf_counter() - t0)
        hooks[event] = {"median_s": round(statistics.median(times), 3), "max_s": round(max(times), 3)}
    return {
        "lessons": lessons_n,
        "load_rate": round(stats.lessons / stats.total_s, 1),
        "prompt_context_ms": percentiles(tool, (50, 95)),
        "command_hook_cold": hooks,
    }


async def _tool_latency(db: Path, queries: list[str], bar: float) -> list[float]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {
        "LORE_DB_PATH": str(db),
        "LORE_PROJECT": "bench",
        "LORE_TOOLS": "lessons,loop",
        "LORE_LOOP_PROMPT_MIN_SCORE": str(bar),
    }
    if "PYTHONPATH" in os.environ:
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    params = StdioServerParameters(
        command=str(Path(sys.executable).with_name("lore-memory")), args=["mcp"], env=env
    )
    latencies = []
    async with Client(stdio_client(params), mode="legacy") as client:
        for query in queries[:20]:  # warm: the model, the index, the page cache
            await client.call_tool("prompt_context", {"prompt": query, "session_id": "warm"})
        for n, query in enumerate(queries[20:]):
            t0 = time.perf_counter()
            result = await client.call_tool("prompt_context", {"prompt": query, "session_id": f"s{n // 5}"})
            latencies.append((time.perf_counter() - t0) * 1000)
            if result.is_error:
                raise RuntimeError(str(result.content))
    return latencies


async def quality(half: str, distractors: int, bar: float | None) -> dict[str, Any]:
    from lore_mcp.app import loop_settings, open_app
    from lore_mcp.settings import Settings

    work = Path(tempfile.mkdtemp(prefix="lore-loop-eval-"))
    settings = Settings(db_path=work / "lore.db")
    app = open_app(settings)
    try:
        ids = await _seed(app, distractors)
        bars = await prompt_bar(app, ids, half, bar)
        chosen = loop_settings(settings)
        chosen = LoopSettings(**{**chosen.__dict__, "prompt_min_score": bars["bar"]})
        start = await session_start(app, ids, half, chosen)
    finally:
        app.close()
    return {"session_start": start, "prompt_bar": bars}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--half", choices=["dev", "test"], required=True)
    parser.add_argument("--distractors", type=int, default=40, help="synthetic lessons per repository")
    parser.add_argument(
        "--bar",
        type=float,
        default=None,
        help="the prompt bar to report (default: dev sweep's best on dev, the setting's default on test)",
    )
    parser.add_argument("--speed", action="store_true", help="also time the tool path and the command hooks")
    parser.add_argument("--lessons", type=int, default=10_000)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    bar = args.bar
    if bar is None and args.half == "test":
        bar = LoopSettings().prompt_min_score
    report: dict[str, Any] = {
        "half": args.half,
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": {"cpus": os.cpu_count(), "load": os.getloadavg()},
        "capture": capture(args.half),
        **asyncio.run(quality(args.half, args.distractors, bar)),
    }
    if args.speed:
        report["speed"] = speed(args.lessons, report["prompt_bar"]["bar"])
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
