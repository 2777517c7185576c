"""The property tests (``tests/stores/properties``) run longer, with fresh random examples.

Why: CI runs a bounded number of examples per tool with a fixed seed, so it is quick and
repeatable but only ever sees the same few hundred calls. This runs the same properties
with as many examples as asked, a new seed each run, and Hypothesis's failure database
under ``.hypothesis/`` (so a failure found here replays first next time, until fixed).

    .venv/bin/python benchmarks/fuzz.py --examples 2000             # every test, stop each at its first failure
    .venv/bin/python benchmarks/fuzz.py --examples 500 --collect    # go on past failures; list every distinct one
    .venv/bin/python benchmarks/fuzz.py --examples 300 -k "apply or query_rows"

Without ``--collect`` each test stops at its first failing example and Hypothesis shrinks it
to a minimal one (printed by pytest; each shrink step runs on both backends, so this can take
minutes per failure; ``--no-shrink`` reports it as found, as CI does). With ``--collect`` a failing example is recorded and
the run goes on; the summary then groups failures by kind (tool, backend, code, cause) and
shows the smallest example of each. Exits 1 when anything failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
TESTS = "tests/stores/properties"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lore-fuzz-") as work:
        junit = Path(work) / "junit.xml"
        collected = Path(work) / "failures.jsonl"
        env = {
            **os.environ,
            "LORE_FUZZ_EXAMPLES": str(args.examples),
            "LORE_FUZZ_RANDOM": "1",
        }
        stats = Path(work) / "outcomes.jsonl"
        if args.collect:
            env["LORE_FUZZ_COLLECT"] = str(collected)
        elif not args.no_shrink:
            env["LORE_FUZZ_SHRINK"] = "1"
        if args.stats:
            env["LORE_FUZZ_STATS"] = str(stats)
        command = [
            sys.executable,
            "-m",
            "pytest",
            TESTS,
            "-q",
            "-p",
            "no:cacheprovider",
            f"--junitxml={junit}",
        ]
        command += ["-o", f"timeout={args.timeout}"]
        if args.k:
            command += ["-k", args.k]
        print(f"$ {' '.join(command)}  (LORE_FUZZ_EXAMPLES={args.examples})", file=sys.stderr)
        start = time.monotonic()
        status = subprocess.run(command, cwd=ROOT, env=env, check=False).returncode
        elapsed = time.monotonic() - start
        tests = read_junit(junit)
        failures = read_failures(collected)
        outcomes = read_failures(stats)
    print_summary(tests, failures, elapsed, args.examples)
    if outcomes:
        print_outcomes(outcomes)
    return 0 if status == 0 and not failures else 1


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--examples", type=int, default=500, help="examples per test (CI runs 25)")
    parser.add_argument("--collect", action="store_true", help="record failures and go on; list them all")
    parser.add_argument(
        "--no-shrink", action="store_true", help="report failures as found (shrinking can take minutes)"
    )
    parser.add_argument("--stats", action="store_true", help="count how calls end, per tool and error")
    parser.add_argument("-k", help="pytest -k expression: which tools or tests")
    parser.add_argument(
        "--timeout", type=int, default=3600, help="seconds per test before pytest-timeout stops it"
    )
    return parser.parse_args(argv)


def read_junit(path: Path) -> list[dict[str, Any]]:
    """Each test's name, outcome and seconds from pytest's JUnit XML."""
    if not path.exists():
        return []
    found = []
    for case in ET.parse(path).getroot().iter("testcase"):
        outcome = "passed"
        for tag in ("failure", "error", "skipped"):
            if case.find(tag) is not None:
                outcome = {"failure": "failed", "error": "error", "skipped": "skipped"}[tag]
        found.append(
            {"name": case.get("name", "?"), "outcome": outcome, "seconds": float(case.get("time", 0))}
        )
    return found


def read_failures(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def print_summary(
    tests: list[dict[str, Any]], failures: list[dict[str, Any]], elapsed: float, examples: int
) -> None:
    print(f"\n## Property tests, {examples} examples per test, {elapsed:.0f} s\n")
    print("| test | outcome | seconds |")
    print("|---|---|---|")
    for test in tests:
        print(f"| {test['name']} | {test['outcome']} | {test['seconds']:.1f} |")
    if not failures:
        return
    kinds: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for failure in failures:
        for signature in failure["signatures"]:
            kinds[signature].append(failure)
    print(f"\n## {len(kinds)} distinct failures ({len(failures)} failing examples)\n")
    for signature, seen in sorted(kinds.items(), key=lambda item: -len(item[1])):
        smallest = min(seen, key=lambda f: f["size"])
        print(f"### {signature}  (x{len(seen)})\n")
        print("```")
        print(smallest["report"][:3000])
        print("```\n")


def print_outcomes(outcomes: list[dict[str, Any]]) -> None:
    """How calls ended per tool: a generator whose calls all fail argument validation
    ("Invalid arguments") never reaches the stores, so this is how to judge it."""
    by_tool: dict[str, Counter[str]] = defaultdict(Counter)
    for outcome in outcomes:
        kind = outcome["kind"]
        if kind != "ok":
            schema = outcome["message"].startswith("Invalid arguments")
            kind = f"{kind} ({'schema' if schema else outcome['message'][:40]})"
        by_tool[outcome["tool"]][kind] += 1
    print("\n## How calls ended (first backend)\n")
    for tool, kinds in sorted(by_tool.items()):
        total = sum(kinds.values())
        ok = kinds.get("ok", 0)
        print(f"### {tool}: {total} calls, {ok} ok ({100 * ok / total:.0f}%)\n")
        for kind, count in kinds.most_common(12):
            print(f"- {count:5d}  {kind}")
        print()


if __name__ == "__main__":
    raise SystemExit(main())
