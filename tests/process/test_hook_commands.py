"""``lore-memory hook EVENT`` as the clients run it (issue 33): a new process per event, the
client's hook input on stdin, its answer on stdout, on both backends and over a team server.

A hook never fails the client's turn: bad input or an unreachable server answers nothing,
exits 0 and says one line on stderr. The stop hook asks once after a struggle, never when
Claude Code says a stop hook already blocked, never when the person wrote #skip, and reads
only what came after its last check.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import anyio
import pytest

from lore_mcp.embedding.embedder import Embedder
from lore_mcp.services.lessons import LessonService
from tests.support.helpers import call
from tests.support.processes import lore_command, lore_env
from tests.support.team import http_client, team_server

STRIPE = {
    "problem": "Stripe webhook signature verification fails behind nginx",
    "resolution": "nginx re-encoded the body; verify against the raw request body bytes",
}
GROUPS = ("lessons", "activity", "loop")


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A git checkout on a topic branch (what the hooks read of it: ``.git/HEAD``)."""
    folder = tmp_path / "payments-api"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "HEAD").write_text("ref: refs/heads/fix/stripe-webhook-signature\n")
    return folder


@pytest.fixture
def env(backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, str]:
    """The hook's environment: the ``store`` fixture's database, and a state folder of its own."""
    environment = lore_env(tmp_path / "lore.db")
    if backend == "postgres":
        environment.update(LORE_STORE="postgres", LORE_DATABASE_URL=request.getfixturevalue("postgres_url"))
    environment["XDG_STATE_HOME"] = str(tmp_path / "state")
    return environment


@pytest.fixture
def stripe_id(store: Any, embedder: Embedder) -> str:
    service = LessonService(store, embedder, default_project="default")
    return anyio.run(lambda: service.save(**STRIPE)).id


def hook(
    env: dict[str, str], event: str, payload: dict[str, Any] | str, *flags: str
) -> subprocess.CompletedProcess[str]:
    text = payload if isinstance(payload, str) else json.dumps(payload)
    return subprocess.run(
        lore_command("hook", event, *flags), input=text, env=env, capture_output=True, text=True, timeout=120
    )


def answer(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout) if done.stdout.strip() else {}


def transcript(path: Path, *steps: tuple[str, Any]) -> str:
    """A Claude Code transcript: ("prompt", text) and ("run", (command, failed)) steps."""
    lines = []
    for n, (kind, value) in enumerate(steps):
        if kind == "prompt":
            lines.append({"type": "user", "message": {"role": "user", "content": value}})
        else:
            command, failed = value
            use = {"type": "tool_use", "id": f"t{n}", "name": "Bash", "input": {"command": command}}
            lines.append({"type": "assistant", "message": {"role": "assistant", "content": [use]}})
            result = {
                "type": "tool_result",
                "tool_use_id": f"t{n}",
                "content": "Exit code 1" if failed else "ok",
                "is_error": failed,
            }
            lines.append({"type": "user", "message": {"role": "user", "content": [result]}})
    with path.open("a") as out:
        out.writelines(json.dumps(line) + "\n" for line in lines)
    return str(path)


def test_session_start_answers_in_each_clients_format(
    env: dict[str, str], repo: Path, stripe_id: str
) -> None:
    claude = answer(hook(env, "session-start", {"session_id": "s1", "cwd": str(repo), "source": "startup"}))
    text = claude["hookSpecificOutput"]["additionalContext"]
    assert claude["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    assert stripe_id in text and "branch fix/stripe-webhook-signature" in text
    cursor_input = {
        "conversation_id": "c1",
        "workspace_roots": [str(repo)],
        "hook_event_name": "sessionStart",
    }
    cursor = answer(hook(env, "session-start", cursor_input, "--client", "cursor"))
    assert set(cursor) == {"additional_context"} and stripe_id in cursor["additional_context"]


def test_a_prompt_brings_a_matching_lesson_once(env: dict[str, str], repo: Path, stripe_id: str) -> None:
    prompt = {
        "session_id": "s2",
        "cwd": str(repo),
        "prompt": "Stripe webhooks fail the signature check behind nginx",
    }
    first = answer(hook(env, "prompt", prompt))
    assert stripe_id in first["hookSpecificOutput"]["additionalContext"]
    assert answer(hook(env, "prompt", prompt)) == {}
    assert answer(hook(env, "prompt", {**prompt, "prompt": "write a haiku about the sea"})) == {}
    # Cursor's beforeSubmitPrompt can only let the prompt through.
    assert answer(
        hook(env, "prompt", {"conversation_id": "c", "prompt": "hi #skip"}, "--client", "cursor")
    ) == {"continue": True}


def test_the_stop_hook_asks_once_after_a_struggle(
    env: dict[str, str], repo: Path, tmp_path: Path, store: Any
) -> None:
    path = transcript(
        tmp_path / "t.jsonl",
        ("prompt", "fix the webhook tests"),
        ("run", ("pytest tests", True)),
        ("run", ("pytest tests", False)),
    )
    stop = {"session_id": "s3", "cwd": str(repo), "transcript_path": path, "stop_hook_active": False}
    asked = answer(hook(env, "stop", stop))
    assert (
        asked["decision"] == "block"
        and "save_lesson" in asked["reason"]
        and "`pytest` failed" in asked["reason"]
    )
    # The agent's answer to the ask ends in another stop, which the client marks: never twice in a row.
    assert answer(hook(env, "stop", {**stop, "stop_hook_active": True})) == {}
    # Nothing new since the last check: nothing to ask.
    assert answer(hook(env, "stop", stop)) == {}
    cursor = answer(
        hook(
            env,
            "stop",
            {
                "conversation_id": "c3",
                "transcript_path": transcript(
                    tmp_path / "c.jsonl", ("run", ("npm test", True)), ("run", ("npm test", False))
                ),
                "loop_count": 0,
            },
            "--client",
            "cursor",
        )
    )
    assert "save_lesson" in cursor["followup_message"]


def test_skip_silences_and_pre_compact_keeps_the_struggle_for_the_next_stop(
    env: dict[str, str], repo: Path, tmp_path: Path
) -> None:
    skipped = transcript(
        tmp_path / "skip.jsonl",
        ("prompt", "just fix it #skip"),
        ("run", ("make", True)),
        ("run", ("make", False)),
    )
    assert answer(hook(env, "stop", {"session_id": "s4", "transcript_path": skipped})) == {}
    path = tmp_path / "long.jsonl"
    transcript(path, ("run", ("cargo test", True)), ("run", ("cargo test", False)))
    assert (
        answer(
            hook(env, "pre-compact", {"session_id": "s5", "transcript_path": str(path), "trigger": "auto"})
        )
        == {}
    )
    transcript(path, ("prompt", "thanks, now bump the version"), ("run", ("cargo build", False)))
    asked = answer(hook(env, "stop", {"session_id": "s5", "transcript_path": str(path)}))
    assert "`cargo test` failed" in asked["reason"]


def test_bad_input_answers_nothing_and_says_one_line(env: dict[str, str]) -> None:
    for payload in ("not json", "[1, 2]", json.dumps({"prompt": "no session"})):
        done = hook(env, "prompt", payload)
        assert done.returncode == 0 and done.stdout == ""
        assert len(done.stderr.strip().splitlines()) == 1 and "Traceback" not in done.stderr


@pytest.mark.parametrize("backend", ["local"], indirect=True)
def test_remote_mode_answers_the_same_through_the_team_server(
    store: Any, embedder: Embedder, repo: Path, tmp_path: Path
) -> None:
    with team_server(store, embedder, tools=GROUPS) as team:
        team.keys.init_org("acme")
        key = team.keys.create_key("acme", name="dev", project="payments", root=False).key

        async def save() -> str:
            async with http_client(team.url, key) as client:
                return str((await call(client, "save_lesson", **STRIPE))["id"])

        saved_id = anyio.run(save)
        environment = lore_env(tmp_path / "unused.db")
        environment.update(
            LORE_STORE="remote", LORE_API_URL=team.base, LORE_API_KEY=key, XDG_STATE_HOME=str(tmp_path / "st")
        )
        start = answer(hook(environment, "session-start", {"session_id": "r1", "cwd": str(repo)}))
        assert saved_id in start["hookSpecificOutput"]["additionalContext"]
        prompt = {"session_id": "r2", "prompt": "Stripe webhook signature verification fails behind nginx"}
        assert (
            saved_id in answer(hook(environment, "prompt", prompt))["hookSpecificOutput"]["additionalContext"]
        )
        path = transcript(tmp_path / "r.jsonl", ("run", ("pytest", True)), ("run", ("pytest", False)))
        assert (
            answer(hook(environment, "stop", {"session_id": "r3", "transcript_path": path}))["decision"]
            == "block"
        )
        refused = {**environment, "LORE_API_KEY": "lore_sk_" + "x" * 32}
        done = hook(refused, "session-start", {"session_id": "r4"})
        assert done.returncode == 0 and done.stdout == "" and "401" in done.stderr
