"""``lore-memory hooks install|uninstall CLIENT``: merges only Lore's entries (idempotent); uninstall
restores an unchanged file byte for byte (``<file>.lore-backup``), else removes just Lore's part."""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path
from typing import Any

# Each client's events, and the ``lore-memory hook`` event each runs.
EVENTS = {
    client: dict(zip(names.split(), ("session-start", "prompt", "stop", "pre-compact"), strict=True))
    for client, names in (
        ("claude-code", "SessionStart UserPromptSubmit Stop PreCompact"),
        ("cursor", "sessionStart beforeSubmitPrompt stop preCompact"),
    )
}
TIMEOUT_S = 10  # seconds a client waits for a hook (Claude Code's `timeout`); Lore's answer well within it
_OURS = re.compile(r"lore-memory(\.exe)?['\"]? hook (session-start|prompt|stop|pre-compact)\b")


def settings_file(client: str, *, project: bool, home: Path | None = None, cwd: Path | None = None) -> Path:
    """The file ``client`` reads its hooks from, for the user or (``project``) this project."""
    folder = ".claude" if client == "claude-code" else ".cursor"
    name = "settings.json" if client == "claude-code" else "hooks.json"
    return ((cwd or Path.cwd()) if project else (home or Path.home())) / folder / name


def hook_command(event: str, client: str, program: str | None = None) -> str:
    """The command for ``event``: ``lore-memory`` if on PATH, else the published package through uv."""
    found = program or shutil.which("lore-memory")
    base = shlex.quote(found) if found else "uvx --from lore-memory-mcp lore-memory"
    return f"{base} hook {event}" + (" --client cursor" if client == "cursor" else "")


def is_ours(entry: object) -> bool:
    command = entry.get("command") if isinstance(entry, dict) else None
    return isinstance(command, str) and bool(_OURS.search(command))


def install(path: Path, client: str, program: str | None = None) -> bool:
    """Merge Lore's hooks into ``path``; whether the file changed."""
    before = path.read_bytes() if path.exists() else None
    data = _load(before)
    wanted = _without_ours(data)
    hooks = wanted.setdefault("hooks", {})
    if client == "cursor":
        wanted.setdefault("version", 1)
    for client_event, event in EVENTS[client].items():
        command = hook_command(event, client, program)
        handler = {"type": "command", "command": command, "timeout": TIMEOUT_S}
        entry: dict[str, Any] = {"command": command} if client == "cursor" else {"hooks": [handler]}
        hooks.setdefault(client_event, []).append(entry)
    if data == wanted:
        return False
    backup = _backup(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if not backup.exists():  # the file as it was before Lore's first install
        backup.write_bytes(before if before is not None else b"")
    _write(path, wanted, before)
    return True


def uninstall(path: Path, client: str) -> bool:
    """Remove Lore's hooks from ``path``; whether the file changed."""
    if not path.exists():
        return False
    current = path.read_bytes()
    data = _load(current)
    cleaned = _without_ours(data)
    backup = _backup(path)
    if cleaned == data:
        backup.unlink(missing_ok=True)
        return False
    original = backup.read_bytes() if backup.exists() else None
    # Cursor's file needs "version", which an install into no file added too.
    made_by_us = original is not None and not original.strip() and set(cleaned) <= {"version"}
    if original is not None and (_load(original) == cleaned or made_by_us):
        if original:
            path.write_bytes(original)
        else:
            path.unlink()  # the install made the file: uninstalling removes it
    else:
        _write(path, cleaned, current)
    backup.unlink(missing_ok=True)
    return True


def _without_ours(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` without Lore's handlers, and without the groups and events they alone filled."""
    copy: dict[str, Any] = json.loads(json.dumps(data))
    hooks = copy.get("hooks")
    if not isinstance(hooks, dict):
        return copy
    for event in list(hooks):
        entries = hooks[event]
        if not isinstance(entries, list):
            continue
        kept = []
        for entry in (e for e in entries if not _lore_only(e)):
            inner = entry.get("hooks") if isinstance(entry, dict) else None
            if isinstance(inner, list):
                entry = {**entry, "hooks": [h for h in inner if not is_ours(h)]}
            kept.append(entry)
        if kept or len(kept) == len(entries):
            hooks[event] = kept
        else:
            del hooks[event]
    if not hooks and "hooks" in copy and not _had_hooks(data):
        del copy["hooks"]
    return copy


def _lore_only(entry: object) -> bool:
    """Whether ``entry`` is Lore's handler, or a group of Lore's handlers alone."""
    inner = entry.get("hooks") if isinstance(entry, dict) else None
    return is_ours(entry) or (isinstance(inner, list) and bool(inner) and all(is_ours(h) for h in inner))


def _had_hooks(data: dict[str, Any]) -> bool:
    """Whether ``data`` holds hooks of anyone but Lore."""
    hooks = data.get("hooks")
    if not isinstance(hooks, dict):
        return False
    lists = (entries for entries in hooks.values() if isinstance(entries, list))
    return any(not _lore_only(entry) for entries in lists for entry in entries)


def _load(raw: bytes | None) -> dict[str, Any]:
    if not raw or not raw.strip():
        return {}
    data = json.loads(raw.decode("utf-8"))
    if not isinstance(data, dict):
        raise ValueError("the settings file does not hold a JSON object")
    return data


def _write(path: Path, data: dict[str, Any], like: bytes | None) -> None:
    """Write ``data`` indented as the file was (two spaces when new), atomically."""
    match = re.search(rb"\n([ \t]+)\S", like) if like else None
    indent = len(match.group(1).expandtabs(4)) if match else 2
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(path.name + ".lore-tmp")
    temporary.write_text(json.dumps(data, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
    temporary.replace(path)


def _backup(path: Path) -> Path:
    return path.with_name(path.name + ".lore-backup")
