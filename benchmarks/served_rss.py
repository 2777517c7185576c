"""Peak memory of one ``lore-memory mcp`` as a client sees it serve: saves and recalls over stdio
through the SDK client, then the server's ``VmHWM`` from ``/proc`` (Linux).

Why: ``scale.py``'s serving figure is the service in a lighter process (no MCP server, 20 recalls
and a save), and a copy of Lore with another runtime or held data (``combined_tree.py``) is only
worth its speed if the server's memory still fits issue 37's targets (docs/performance.md,
twenty-seventh session). The file is copied first, so the saves leave it as it was.

    python benchmarks/served_rss.py --db corpus.db
    python benchmarks/served_rss.py --db lore-250000.db --project p-000 --tree /tmp/lore-combined
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from synthetic import Generator

LORE = Path(sys.executable).with_name("lore-memory")  # this environment's entry point


async def served_peak_mb(db: Path, project: str, calls: int, tree: Path | None, work: Path) -> float:
    """Serve a copy of ``db`` (Lore from ``tree`` when given), make ``calls`` saves and recalls."""
    copy, pid_file = work / "lore.db", work / "pid"
    shutil.copyfile(db, copy)
    env = {"LORE_DB_PATH": str(copy), "LORE_PROJECT": project, "PATH": os.environ["PATH"]}
    if tree is not None:
        env["PYTHONPATH"] = str(tree)
    command = f'echo $$ > "{pid_file}"; exec "{LORE}" mcp'  # the server's own pid, not a wrapper's
    lessons, questions = Generator(1).lessons(calls), Generator(2).queries(calls)
    server = StdioServerParameters(command="bash", args=["-c", command], env=env)
    async with Client(stdio_client(server), mode="legacy", read_timeout_seconds=120) as client:
        for lesson, question in zip(lessons, questions, strict=True):
            for tool, arguments in (
                ("save_lesson", lesson.arguments()),
                ("recall_lessons", {"query": question}),
            ):
                if (await client.call_tool(tool, arguments)).is_error:
                    raise SystemExit(f"{tool} failed")
        status = Path(f"/proc/{pid_file.read_text().strip()}/status").read_text()
    peak_kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM:"))
    return peak_kb / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", type=Path, required=True, help="the SQLite file to serve (copied first)")
    parser.add_argument("--project", default="default", help="the project the calls go to")
    parser.add_argument("--calls", type=int, default=150, help="saves, and as many recalls")
    parser.add_argument("--tree", type=Path, default=None, help="serve this copy of Lore (PYTHONPATH)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as work:
        peak = anyio.run(served_peak_mb, args.db, args.project, args.calls, args.tree, Path(work))
    print(f"{args.tree or 'this checkout'}: peak RSS {peak:.0f} MB after {args.calls} saves and recalls")


if __name__ == "__main__":
    main()
