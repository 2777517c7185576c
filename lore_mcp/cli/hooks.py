"""``lore-memory hook EVENT``: client command hooks (and ``hooks``, which installs them). A hook never
fails the turn: on error it prints nothing, exits 0, logs one stderr line. The stop hook reads the
transcript from its saved offset and asks once after an unsaved struggle; only a few redacted words leave."""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

from lore_mcp.redaction import redact
from lore_mcp.services.workdir import Workdir, workdir_of
from lore_mcp.settings import Settings, mcp_url

logger = logging.getLogger("lore_mcp.hooks")

STATE_DAYS = 7  # session states older than this are removed as new ones are written
PROTOCOL_VERSION = "2026-07-28"  # of remote mode's calls
# The clients' hook limits are seconds; a remote call that cannot answer within this answers nothing.
TIMEOUT_S = 5.0


@dataclass(frozen=True)
class HookInput:
    """What every client's hook input says, under one set of names."""

    session: str
    cwd: str | None = None
    prompt: str = ""
    transcript: str | None = None
    stop_active: bool = False
    source: str | None = None

    @classmethod
    def of(cls, data: dict[str, Any]) -> HookInput:
        roots = data.get("workspace_roots")
        cwd = data.get("cwd") or (roots[0] if isinstance(roots, list) and roots else None)
        return cls(
            session=str(data.get("session_id") or data.get("conversation_id") or ""),
            cwd=str(cwd) if cwd else None,
            prompt=str(data.get("prompt") or ""),
            transcript=data.get("transcript_path") or None,
            # Claude Code says a stop hook already blocked this stop; Cursor counts its follow-ups.
            stop_active=bool(data.get("stop_hook_active")) or int(data.get("loop_count") or 0) > 0,
            source=data.get("source"),
        )


@dataclass
class SessionState:
    """What the stop hook keeps between checks of one session."""

    offset: int = 0  # transcript lines already examined
    pending: str | None = None  # a signal found before compaction, asked about at the next stop
    skip: bool = False  # the person wrote #skip (Cursor's prompt hook sees prompts the stop hook cannot)
    remember: bool = False


def state_dir() -> Path:
    """Where session states are kept: ``$XDG_STATE_HOME/lore-memory/hooks`` or the platform's own."""
    import platformdirs

    return Path(platformdirs.user_state_dir("lore-memory", appauthor=False)) / "hooks"


def _state_path(session: str) -> Path:
    return state_dir() / (hashlib.sha256(session.encode()).hexdigest()[:32] + ".json")


def load_state(session: str) -> SessionState:
    try:
        data = json.loads(_state_path(session).read_text(encoding="utf-8"))
        return SessionState(**{k: v for k, v in data.items() if k in SessionState.__dataclass_fields__})
    except (OSError, ValueError, TypeError):
        return SessionState()


def save_state(session: str, state: SessionState) -> None:
    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    path = _state_path(session)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(asdict(state)), encoding="utf-8")
    temporary.replace(path)
    cutoff = time.time() - STATE_DAYS * 86_400
    for old in folder.glob("*.json"):
        with contextlib.suppress(OSError):
            if old.stat().st_mtime < cutoff:
                old.unlink()


def ask_text(signal: str, project: str | None) -> str:
    """The one ask the agent gets: save what it learned, or say nothing is worth keeping."""
    where = f', project "{project}"' if project else ""
    return (
        f"Lore: this session showed {signal}, and no lesson was saved for it. If you learned "
        "something another agent should know next time, save it now with save_lesson (problem: "
        f"the symptom as first seen; resolution: what fixed it and why{where}), one call per "
        "lesson. If nothing is worth keeping, say so in one line and stop."
    )


Call = Callable[[str, dict[str, Any]], dict[str, Any]]


def run_hook(event: str, client: str, settings: Settings, stdin: IO[str], stdout: IO[str]) -> int:
    """One hook: its answer on ``stdout`` (nothing when there is none), always exit 0."""
    try:
        raw = stdin.read()
        data = json.loads(raw) if raw.strip() else {}
        if not isinstance(data, dict):
            raise ValueError("the hook input is not a JSON object")
        hook = HookInput.of(data)
        if not hook.session:
            raise ValueError("the hook input names no session (session_id or conversation_id)")
        where = workdir_of(hook.cwd)
        # Load the model meanwhile when the hook embeds: a prompt does, a topic branch's start does.
        warm = event == "prompt" or (event == "session-start" and bool(where.topic))
        with _connection(settings, warm=warm) as call:
            answer = _answer(event, client, hook, where, settings, call)
    except Exception as exc:  # a hook never fails the client's turn
        print(f"lore-memory hook {event}: answered nothing: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 0
    if answer:
        stdout.write(json.dumps(answer) + "\n")
    return 0


def _answer(
    event: str, client: str, hook: HookInput, where: Workdir, settings: Settings, call: Call
) -> dict[str, Any]:
    project = hook_project(settings, where.project)
    scoped = {"project": project} if project else {}
    if event == "session-start":
        if not settings.loop_inject:
            return {}
        found = call(
            "session_context",
            {"session_id": hook.session, "repository": where.repository, "branch": where.branch, **scoped},
        )
        return _in_format(client, "SessionStart", found)
    if event == "prompt":
        _note_markers(hook)
        if not settings.loop_inject or client == "cursor":
            # Cursor's beforeSubmitPrompt cannot add context: it only lets the prompt through.
            return {"continue": True} if client == "cursor" else {}
        found = call("prompt_context", {"prompt": hook.prompt[:16_000], "session_id": hook.session, **scoped})
        return _in_format(client, "UserPromptSubmit", found)
    return _capture(event, client, hook, settings, call, scoped)


def _capture(
    event: str, client: str, hook: HookInput, settings: Settings, call: Call, scoped: dict[str, Any]
) -> dict[str, Any]:
    """``stop`` and ``pre-compact``: examine the transcript since the last check; a stop asks."""
    from lore_mcp.services.transcript import examine, read_lines

    state = load_state(hook.session)
    lines, total = read_lines(hook.transcript, state.offset) if hook.transcript else ([], state.offset)
    finding = examine(lines)
    state.offset = total
    if hook.stop_active or not settings.loop_capture:
        save_state(hook.session, _cleared(state))  # never twice in a row
        return {}
    signal = finding.signal or state.pending
    skip, remember = finding.skip or state.skip, finding.remember or state.remember
    if skip or finding.saved or not (signal or remember):
        save_state(hook.session, _cleared(state))
        return {}
    if event == "pre-compact":
        state.pending, state.remember = signal, remember
        save_state(hook.session, state)
        return {}
    words = signal or "the person asked to remember it (#remember)"
    decision = call(
        "ask_to_save", {"session_id": hook.session, "signal": words, "remember": remember, **scoped}
    )
    save_state(hook.session, _cleared(state))
    if not decision.get("ask"):
        return {}
    reason = ask_text(str(decision.get("why") or words), scoped.get("project"))
    return {"followup_message": reason} if client == "cursor" else {"decision": "block", "reason": reason}


def _cleared(state: SessionState) -> SessionState:
    state.pending, state.skip, state.remember = None, False, False
    return state


def _note_markers(hook: HookInput) -> None:
    """Keep ``#skip`` / ``#remember`` for the stop hook (Cursor's may have no transcript)."""
    from lore_mcp.services.transcript import examine_prompt

    skip, remember = examine_prompt(hook.prompt)
    if skip or remember:
        state = load_state(hook.session)
        state.skip |= skip
        state.remember |= remember
        save_state(hook.session, state)


def hook_project(settings: Settings, repository_project: str | None) -> str | None:
    """``LORE_PROJECT``, else (``LORE_PROJECT_FROM_REPO``) the repo's name, else none. Remote
    mode names LORE_PROJECT only: a team's projects are its keys'."""
    if "project" in settings.model_fields_set:
        return settings.project
    return repository_project if settings.project_from_repo and settings.store != "remote" else None


def _in_format(client: str, event: str, found: dict[str, Any]) -> dict[str, Any]:
    """A ``loop`` tool's Claude Code answer in ``client``'s format."""
    text = (found.get("hookSpecificOutput") or {}).get("additionalContext")
    if not text:
        return {}
    if client == "cursor":
        return {"additional_context": text}
    return {"hookSpecificOutput": {"hookEventName": event, "additionalContext": text}}


@contextlib.contextmanager
def _connection(settings: Settings, *, warm: bool = False) -> Iterator[Call]:
    """The ``loop`` calls, local or over HTTP; ``warm`` loads the model meanwhile."""
    if settings.store == "remote":
        yield remote_call(settings)
        return
    import anyio

    from lore_mcp.app import loop_settings, open_app
    from lore_mcp.services.loop import LoopService
    from lore_mcp.services.recording import Who

    with open_app(settings) as app:
        if warm:
            app.embedder.start()
        loop = LoopService(app.lessons, loop_settings(settings))
        who = Who(client="lore-memory hook")  # the client a command hook's activity entries name
        yield lambda name, args: anyio.run(lambda: loop.answer(name, **args, who=who))


def run_loop_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "hook":
        # Without ``--client``, the client the hook runs in: Cursor sets CURSOR_VERSION.
        client = args.client or ("cursor" if os.environ.get("CURSOR_VERSION") else "claude-code")
        return run_hook(args.event, client, settings, sys.stdin, sys.stdout)
    from lore_mcp.cli.common import say
    from lore_mcp.cli.hooks_install import install, settings_file, uninstall

    path = settings_file(args.client, project=args.in_project)
    try:
        changed = (install if args.hooks_command == "install" else uninstall)(path, args.client)
    except (OSError, ValueError) as exc:
        return say(f"VALIDATION_ERROR: {path} could not be updated: {exc}.", 2)
    done = "added to" if args.hooks_command == "install" else "removed from"
    print(f"Lore's hooks {done} {path}." if changed else f"Nothing to change in {path}.")
    return 0


def remote_call(settings: Settings) -> Call:
    """Remote mode's ``loop`` calls: one ``tools/call`` POST each (2026-07-28 needs no handshake), no SDK
    import for a hook that lives a second; arguments redacted before they leave."""
    import httpx2

    if not settings.api_url or not settings.api_key:
        raise ValueError("remote mode needs LORE_API_URL and LORE_API_KEY")
    url, key = mcp_url(settings.api_url), settings.api_key

    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        clean = {k: redact(v).text if isinstance(v, str) else v for k, v in arguments.items()}
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "lore-memory hook", "version": "1"},
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": clean, "_meta": meta},
        }
        headers = {
            "Authorization": f"Bearer {key}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,
        }
        response = httpx2.post(url, content=json.dumps(body), headers=headers, timeout=TIMEOUT_S)
        return _result(response.status_code, response.headers.get("content-type", ""), response.text)

    return call


def _result(status: int, content_type: str, text: str) -> dict[str, Any]:
    """The structured answer from JSON or SSE; raises with the server's sentence on failure."""
    if status != 200:
        raise RuntimeError(f"the team server answered HTTP {status}")
    message: dict[str, Any] | None = None
    if content_type.startswith("text/event-stream"):
        for event in text.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(line[5:].strip() for line in event.split("\n") if line.startswith("data:"))
            if data:
                candidate = json.loads(data)
                if "result" in candidate or "error" in candidate:
                    message = candidate
    else:
        message = json.loads(text)
    if not isinstance(message, dict) or "error" in message:
        error = (message or {}).get("error") or {}
        raise RuntimeError(str(error.get("message") or "the team server sent no answer"))
    result = message.get("result") or {}
    if result.get("isError"):
        texts = [c.get("text", "") for c in result.get("content", []) if isinstance(c, dict)]
        raise RuntimeError(" ".join(texts) or "the tool call failed")
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        return structured
    content = result.get("content") or []
    return json.loads(content[0]["text"]) if content else {}
