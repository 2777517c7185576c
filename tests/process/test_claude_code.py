"""Lore in the real Claude Code's loop: the CLI, headless, with this repository's plugin, against a
scripted stand-in for the model API (``tests/support/model_standin.py``) that records what the
model was shown.

Each run is ``claude -p PROMPT --plugin-dir plugins/lore`` in a fresh ``HOME`` (a failed MCP
connection is remembered there), in a new git repository (whose name is the project, as the
plugin's launcher sets ``LORE_PROJECT_FROM_REPO``), on a SQLite store seeded beforehand. The
hooks and the MCP server are this checkout's ``lore-memory``, first on PATH. What the tests look
for is what the model received: Claude Code labels each hook's context with its event
("SessionStart hook additional context: ...") and gives a stop hook's reason back as
"Stop hook feedback".
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from lore_mcp.cli.hooks import ask_text
from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from stores import open_local_store
from tests.support.model_standin import Block, Standin, model_standin, text, tool_use
from tests.support.npm_tools import ROOT, claude_code, lore_bin

PLUGIN = ROOT / "plugins" / "lore"
REPOSITORY = "shop-api"  # the temporary repository's name, so the project's
SAVE = "mcp__plugin_lore_lore__save_lesson"  # a plugin server's tool: mcp__plugin_<plugin>_<server>__
RUN_TIMEOUT_S = 120
# Where Claude Code puts what a hook added, and a stop hook's reason, in the model's request.
SESSION_CONTEXT = "SessionStart hook additional context: "
PROMPT_CONTEXT = "UserPromptSubmit hook additional context: "
# The start of Lore's ask to save, whatever the signal it names.
ASK = ask_text("\0", None).split("\0")[0]

# The lesson a prompt brings in: saved with the default confidence, so the confident ones below
# fill the session start's budget before it.
WEBHOOK = (
    "Stripe webhook signature verification fails behind nginx",
    "nginx rewrote the request body; pass it through unchanged (proxy_request_buffering off) and "
    "verify against the raw bytes",
)
CONFIDENT = [
    (
        "pytest fails with ModuleNotFoundError for the package under src/",
        "install the package in editable mode (pip install -e .) or set pythonpath = src in pytest's "
        "section of pyproject.toml",
    ),
    (
        "docker compose up fails: port 5432 is already allocated",
        "a local PostgreSQL service holds the port; stop it or map the container to 5433:5432",
    ),
    (
        "alembic upgrade head says the target database is not up to date after a rebase",
        "the merge left two migration heads; run alembic merge heads and commit the merge revision",
    ),
    (
        "TypeScript build fails with Cannot find module '@/lib/db' only in CI",
        "the paths alias is in tsconfig.json but not in the bundler; add it to vite.config.ts resolve.alias",
    ),
    (
        "git push rejected: refusing to allow an OAuth App to create or update a workflow",
        "the token lacks the workflow scope; use a token with it or commit the workflow change on the web",
    ),
    (
        "Celery workers never pick up tasks after the Redis upgrade",
        "the broker URL needs the database index: CELERY_BROKER_URL=redis://host:6379/0, then restart",
    ),
    (
        "npm ci fails with EINTEGRITY checksum failed on a private package",
        "the lockfile recorded another registry's tarball; reinstall it from the private registry and "
        "commit the lockfile",
    ),
    (
        "The React dev server reloads in a loop inside Docker on macOS",
        "file watching over the bind mount misfires; set CHOKIDAR_USEPOLLING=true in the container",
    ),
    (
        "Go tests hang forever in CI but pass locally",
        "a test dials a port that CI closes; run go test -timeout 2m and serve it from httptest.NewServer",
    ),
]

# A struggle and its fix: check.py fails on its first run (no marker file yet) and passes on the
# next, the same command both times, as a person would see an agent fix something.
CHECK = """import pathlib, sys
marker = pathlib.Path("marker")
if not marker.exists():
    marker.touch()
    sys.exit("Error: the marker file is missing")
print("ok")
"""
LEARNED = {
    "problem": "python3 check.py fails with 'the marker file is missing' in a fresh checkout",
    "resolution": "check.py creates the marker on its first run; run it a second time",
}
STRUGGLE: list[list[Block]] = [
    [text("Running the check."), tool_use("Bash", {"command": "python3 check.py", "description": "Run"})],
    [tool_use("Bash", {"command": "python3 check.py", "description": "Run again"})],
    [text("The check passes now.")],
    [tool_use(SAVE, LEARNED)],  # only reached when the stop hook asks
    [text("Saved the lesson.")],
]


@dataclass
class Run:
    """One finished ``claude -p``: its JSON result and the stand-in's record."""

    result: dict[str, Any]
    model: Standin

    def context(self, label: str, request: int = 0) -> str:
        """What Claude Code gave the model under ``label`` in one request ('' for nothing)."""
        found = [
            s.split(label, 1)[1].split("\n\n")[0]
            for s in _strings(self.model.messages()[request])
            if label in s
        ]
        return "\n".join(found)


@dataclass
class Workspace:
    """A git repository to work in, a seeded store, and the Claude Code to run there."""

    claude: Path
    root: Path
    repo: Path
    db: Path
    service: LessonService

    def seed(self, lessons: Sequence[tuple[str, str]], confidence: float = 0.5) -> list[str]:
        async def save_all() -> list[str]:
            saved = [
                await self.service.save(problem=p, resolution=r, confidence=confidence) for p, r in lessons
            ]
            return [s.id for s in saved]

        return anyio.run(save_all)

    def problems(self) -> list[str]:
        async def listed() -> list[str]:
            return [x.problem for x in (await self.service.list(limit=100)).lessons]

        return anyio.run(listed)

    def env(self, home: Path, **extra: str) -> dict[str, str]:
        """A fresh client: no login, no updater or telemetry, nothing of the caller's Lore or Claude."""
        kept = {k: v for k, v in os.environ.items() if not k.startswith(("LORE_", "CLAUDE", "ANTHROPIC"))}
        return {
            **kept,
            "HOME": str(home),
            "CLAUDE_CONFIG_DIR": str(home / ".claude"),
            "PATH": f"{lore_bin()}{os.pathsep}{kept.get('PATH', '')}",
            "IS_SANDBOX": "1",  # --dangerously-skip-permissions as root (CI's containers)
            "DISABLE_AUTOUPDATER": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "LORE_DB_PATH": str(self.db),
            "XDG_STATE_HOME": str(home / "state"),
            "HF_HUB_OFFLINE": "1",
            **extra,
        }

    def cli(self, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """``claude ARGS`` (no model involved) in a fresh client ``home``."""
        return subprocess.run(
            [str(self.claude), *args],
            cwd=self.repo,
            env=self.env(home),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT_S,
        )

    def run(
        self,
        prompt: str,
        turns: Sequence[Sequence[Block]] = (),
        *,
        plugin_dir: bool = True,
        home: Path | None = None,
        **extra: str,
    ) -> Run:
        """``claude -p PROMPT`` with the plugin against a stand-in that plays ``turns``; ``extra``
        is added to the client's environment."""
        home = home or _fresh(self.root / "home")
        plugin = ["--plugin-dir", str(PLUGIN)] if plugin_dir else []
        with model_standin(turns) as (url, model):
            done = subprocess.run(
                [
                    str(self.claude),
                    "-p",
                    prompt,
                    *plugin,
                    "--output-format",
                    "json",
                    "--dangerously-skip-permissions",
                ],
                cwd=self.repo,
                env=self.env(home, ANTHROPIC_BASE_URL=url, ANTHROPIC_API_KEY="sk-ant-stand-in", **extra),
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=RUN_TIMEOUT_S,
            )
        assert done.returncode == 0, (
            f"claude exited {done.returncode}: {done.stdout[-2000:]} {done.stderr[-2000:]}"
        )
        result = json.loads(done.stdout)
        assert result["is_error"] is False, result
        assert model.messages(), "Claude Code sent the stand-in no request"
        return Run(result, model)


@pytest.fixture
def workspace(tmp_path: Path, embedder: Embedder) -> Iterator[Workspace]:
    claude = claude_code()
    repo = tmp_path / REPOSITORY
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    store = open_local_store(tmp_path / "lore.db")
    try:
        yield Workspace(
            claude,
            tmp_path,
            repo,
            tmp_path / "lore.db",
            LessonService(store, embedder, default_project=REPOSITORY),
        )
    finally:
        store.close()


def _fresh(base: Path) -> Path:
    """A new, empty folder beside ``base`` (each run is a client that never ran before)."""
    n = 0
    while base.with_name(f"{base.name}-{n}").exists():
        n += 1
    folder = base.with_name(f"{base.name}-{n}")
    folder.mkdir()
    return folder


def _strings(value: Any) -> Iterator[str]:
    """Every string inside a decoded JSON value."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def test_session_start_lessons_reach_the_model(workspace: Workspace) -> None:
    ids = workspace.seed(CONFIDENT, confidence=0.9)
    run = workspace.run("Say hello.")
    given = run.context(SESSION_CONTEXT)
    assert f"repository {REPOSITORY}" in given, given
    shown = [i for i in ids if f"[{i}]" in given]
    assert shown, f"no seeded lesson in the session's context: {given!r}"
    for lesson_id, (problem, _) in zip(ids, CONFIDENT, strict=True):
        assert (f"[{lesson_id}] {problem}" in given) == (lesson_id in shown)
    assert len(given) <= 1500  # LORE_LOOP_SESSION_CHARS' default, whole lessons only


def test_prompt_that_matches_a_lesson_brings_it_in(workspace: Workspace) -> None:
    workspace.seed(CONFIDENT, confidence=0.9)
    [webhook] = workspace.seed([WEBHOOK])
    run = workspace.run("The Stripe webhook signature verification fails behind our nginx. Why?")
    assert f"[{webhook}]" not in run.context(SESSION_CONTEXT), "the confident lessons should fill the start"
    assert f"[{webhook}] {WEBHOOK[0]}" in run.context(PROMPT_CONTEXT)


def test_prompt_that_matches_nothing_brings_nothing(workspace: Workspace) -> None:
    workspace.seed(CONFIDENT, confidence=0.9)
    workspace.seed([WEBHOOK])
    run = workspace.run("Write a haiku about autumn leaves.")
    assert run.context(SESSION_CONTEXT), "the session start gives lessons; only the prompt's are absent"
    assert run.context(PROMPT_CONTEXT) == ""
    assert not any(PROMPT_CONTEXT in s for s in run.model.seen())


def test_struggle_then_fix_asks_once_and_the_agent_saves(workspace: Workspace) -> None:
    (workspace.repo / "check.py").write_text(CHECK)
    run = workspace.run("Make `python3 check.py` pass.", STRUGGLE)
    requests = run.model.messages()
    # The model saw the failure and the fix, then Lore's ask as the stop hook's feedback, once.
    assert len(requests) == 5, [len(r["messages"]) for r in requests]
    asked = json.dumps(requests[3]["messages"][-1])
    assert "Stop hook feedback" in asked and ASK in asked and "python3 check.py" in asked, asked
    assert sum(ASK in s for s in _strings(requests[-1]["messages"])) == 1, "asked twice"
    assert run.result["result"] == "Saved the lesson."
    assert LEARNED["problem"] in workspace.problems()


def test_skip_in_the_prompt_suppresses_the_ask(workspace: Workspace) -> None:
    (workspace.repo / "check.py").write_text(CHECK)
    run = workspace.run("Make `python3 check.py` pass. #skip", STRUGGLE)
    assert not any(ASK in s for s in run.model.seen())
    assert len(run.model.messages()) == 3 and run.result["result"] == "The check passes now."
    assert workspace.problems() == []


def test_plugin_and_marketplace_validate(workspace: Workspace) -> None:
    for target in (PLUGIN, ROOT):  # the plugin's manifest and hooks; the repository's marketplace
        done = workspace.cli(_fresh(workspace.root / "home"), "plugin", "validate", str(target))
        assert done.returncode == 0 and "Validation passed" in done.stdout, done.stdout + done.stderr


def test_plugin_installs_from_the_marketplace_and_runs(workspace: Workspace) -> None:
    home = _fresh(workspace.root / "home")
    for args in (("marketplace", "add", str(ROOT)), ("install", "lore@lore")):
        done = workspace.cli(home, "plugin", *args)
        assert done.returncode == 0, done.stdout + done.stderr
    listed = json.loads(workspace.cli(home, "plugin", "list", "--json").stdout)
    assert [(p["id"], p["enabled"]) for p in listed] == [("lore@lore", True)]
    # Installed (no --plugin-dir), its hooks and server work: the session start reaches the model.
    [lesson_id] = workspace.seed(CONFIDENT[:1])
    run = workspace.run("Say hello.", plugin_dir=False, home=home)
    assert f"[{lesson_id}] {CONFIDENT[0][0]}" in run.context(SESSION_CONTEXT)


def test_a_hook_that_cannot_run_never_keeps_the_agent_going(workspace: Workspace) -> None:
    # A setting Lore refuses (or an older lore-memory without `hook`) makes the command fail.
    # Claude Code reads a Stop hook's exit status 2 as "block" and gives its stderr to the agent
    # as feedback, turn after turn; a hook must fail quietly instead.
    (workspace.repo / "check.py").write_text(CHECK)
    run = workspace.run("Make `python3 check.py` pass.", STRUGGLE, LORE_LOOP_ASKS_PER_HOUR="many")
    assert not any("Stop hook feedback" in s for s in run.model.seen())
    assert len(run.model.messages()) == 3 and run.result["result"] == "The check passes now."


def test_hooks_installed_by_the_cli_reach_the_model(workspace: Workspace) -> None:
    # `lore-memory hooks install claude-code --project` in a repository with no .claude yet: its
    # command hooks (no plugin) give the session's lessons and the prompt's.
    workspace.seed(CONFIDENT, confidence=0.9)
    [webhook] = workspace.seed([WEBHOOK])
    lore = lore_bin() / "lore-memory"
    env = workspace.env(workspace.root)
    done = subprocess.run(
        [str(lore), "hooks", "install", "claude-code", "--project"],
        cwd=workspace.repo,
        env=env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    project = {"LORE_PROJECT_FROM_REPO": "true"}  # what the plugin's launcher sets
    run = workspace.run(
        "The Stripe webhook signature verification fails behind our nginx. Why?", plugin_dir=False, **project
    )
    assert f"repository {REPOSITORY}" in run.context(SESSION_CONTEXT)
    assert f"[{webhook}] {WEBHOOK[0]}" in run.context(PROMPT_CONTEXT)
    # A setting Lore refuses: the installed stop hook fails quietly, never blocking the stop.
    (workspace.repo / "check.py").write_text(CHECK)
    run = workspace.run(
        "Make `python3 check.py` pass.", STRUGGLE, plugin_dir=False, LORE_LOOP_ASKS_PER_HOUR="many"
    )
    assert not any("Stop hook feedback" in s for s in run.model.seen())
    assert len(run.model.messages()) == 3
