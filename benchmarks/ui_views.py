"""Time to content of the page's views at 2,000 lessons, in headless Chromium (issue 35).

Loads ``--lessons`` synthetic lessons into a SQLite store, serves it as a team server (the
tests' in-process one, with the activity group), signs the page in with a root key, then for
each view sets its hash and times, inside the page, until the view says it is shown (its
``data-shown`` attribute, set once the view's content replaced "Loading…"). Each timing is a
fresh hash (a new query, or a ``run`` parameter the view ignores), so nothing is reused from
the previous render; the first run of each view is a warm-up and left out. Target: every view
at most 300 ms.

    python benchmarks/ui_views.py --lessons 2000 --runs 5 --out benchmarks/results-ui-views.json
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.synthetic import Generator  # noqa: E402
from lore_mcp.embedding.embedder import Embedder  # noqa: E402
from lore_mcp.services.lessons import LessonService, embedding_text  # noqa: E402
from stores import open_local_store  # noqa: E402
from tests.support.team import team_server  # noqa: E402

VIEWS = ("search", "lessons", "overview", "duplicates")
TIMED = """
    const [hash, done] = [arguments[0], arguments[arguments.length - 1]];
    const view = document.getElementById("view");
    const started = performance.now();
    const check = () => (view.dataset.shown === hash ? done(performance.now() - started) : requestAnimationFrame(check));
    window.location.hash = hash;
    requestAnimationFrame(check);
"""


def load(store: Any, embedder: Embedder, n: int) -> None:
    service = LessonService(store, embedder, default_project="default")
    scope = service.scope(None)
    lessons = list(Generator(seed=35).lessons(n))
    for start in range(0, n, 256):
        drafts = [service.make_draft(**lesson.arguments())[0] for lesson in lessons[start : start + 256]]
        vectors = embedder.encode_documents([embedding_text(d.problem, d.resolution) for d in drafts])
        store.save_many(scope, list(zip(drafts, vectors, strict=True)))


def browser() -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "chromium"
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(argument)
    driver = webdriver.Chrome(options=options, service=Service(executable_path=shutil.which("chromedriver")))
    driver.set_script_timeout(120)
    driver.set_window_size(1280, 800)
    return driver


def hashes(view: str, runs: int) -> list[str]:
    if view == "search":
        return [f"#/search?q={query.replace(' ', '%20')}" for query in Generator(seed=36).queries(runs + 1)]
    return [f"#/{view}?run={i}" for i in range(runs + 1)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lessons", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    embedder = Embedder()
    embedder.start()
    embedder.wait()
    work = Path(tempfile.mkdtemp(prefix="lore-ui-bench-"))
    store = open_local_store(work / "ui.db")
    started = time.perf_counter()
    load(store, embedder, args.lessons)
    print(f"loaded {args.lessons} lessons in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    results: dict[str, Any] = {"lessons": args.lessons, "runs": args.runs, "views": {}}
    driver = browser()
    try:
        with team_server(
            store, embedder, tools=("lessons", "structured", "history", "activity", "curation")
        ) as server:
            key = server.keys.init_org("local").key
            driver.get(f"{server.base}/ui/#key={key}")
            while not driver.execute_script("return document.getElementById('view').dataset.shown"):
                time.sleep(0.05)
            for view in VIEWS:
                times = [driver.execute_async_script(TIMED, h) for h in hashes(view, args.runs)][1:]
                results["views"][view] = {
                    "median_ms": round(statistics.median(times), 1),
                    "max_ms": round(max(times), 1),
                    "all_ms": [round(t, 1) for t in times],
                }
                print(
                    f"{view:>10}: median {statistics.median(times):7.1f} ms, max {max(times):7.1f} ms",
                    file=sys.stderr,
                )
    finally:
        driver.quit()
        store.close()
        shutil.rmtree(work, ignore_errors=True)
    text = json.dumps(results, indent=2)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
