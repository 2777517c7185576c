"""``lore-memory hooks install|uninstall`` (issue 33): merges without touching anyone else's hooks,
installs once however often it runs, and uninstall gives back the file byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lore_mcp.cli.hooks_install import install, is_ours, uninstall

CLAUDE_SETTINGS = """{
    "model": "opus",
    "hooks": {
        "PreToolUse": [
            {"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}
        ],
        "Stop": [
            {"hooks": [{"type": "command", "command": "say done"}]}
        ]
    },
    "permissions": {"allow": ["Bash(npm test)"]}
}
"""
CURSOR_HOOKS = """{
  "version": 1,
  "hooks": {
    "afterFileEdit": [{ "command": "./format.sh" }],
    "stop": [{ "command": "./notify.sh" }]
  }
}
"""


@pytest.mark.parametrize(("client", "original"), [("claude-code", CLAUDE_SETTINGS), ("cursor", CURSOR_HOOKS)])
def test_install_keeps_other_hooks_and_uninstall_restores_the_bytes(
    tmp_path: Path, client: str, original: str
) -> None:
    path = tmp_path / "settings.json"
    path.write_text(original)
    assert install(path, client, program="/usr/bin/lore-memory")
    data = json.loads(path.read_text())
    flat = json.dumps(data)
    for theirs in ("./guard.sh", "say done", "./format.sh", "./notify.sh"):
        assert theirs in flat or theirs not in original
    events = {e for e, entries in data["hooks"].items() if "lore-memory hook" in json.dumps(entries)}
    expected = {"SessionStart", "UserPromptSubmit", "Stop", "PreCompact"}
    assert events == (
        expected if client == "claude-code" else {"sessionStart", "beforeSubmitPrompt", "stop", "preCompact"}
    )
    assert not install(path, client, program="/usr/bin/lore-memory"), "a second install changes nothing"
    assert uninstall(path, client)
    assert path.read_text() == original
    assert not (tmp_path / "settings.json.lore-backup").exists()
    assert not uninstall(path, client), "nothing of Lore's is left to remove"


def test_uninstall_after_the_person_edited_the_file_keeps_their_edit(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text(CLAUDE_SETTINGS)
    install(path, "claude-code", program="lore-memory")
    data = json.loads(path.read_text())
    data["model"] = "sonnet"
    data["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "notify-send stop"})
    path.write_text(json.dumps(data, indent=4))
    uninstall(path, "claude-code")
    after = json.loads(path.read_text())
    before = json.loads(CLAUDE_SETTINGS)
    before["model"] = "sonnet"
    before["hooks"]["Stop"][0]["hooks"].append({"type": "command", "command": "notify-send stop"})
    assert after == before


def test_a_missing_file_is_made_and_removed_again(tmp_path: Path) -> None:
    path = tmp_path / ".cursor" / "hooks.json"
    assert install(path, "cursor", program="lore-memory")
    data = json.loads(path.read_text())
    assert data["version"] == 1
    assert data["hooks"]["stop"] == [{"command": "lore-memory hook stop --client cursor"}]
    assert uninstall(path, "cursor")
    assert not path.exists()


def test_only_lores_commands_count_as_lores() -> None:
    assert is_ours({"command": "/home/me/.local/bin/lore-memory hook stop"})
    assert is_ours({"command": "uvx --from lore-memory-mcp lore-memory hook session-start --client cursor"})
    assert not is_ours({"command": "lore-memory mcp"})
    assert not is_ours({"command": "my-lore-memory-hook stop"})
    assert not is_ours({"type": "mcp_tool", "server": "lore", "tool": "prompt_context"})


def test_a_file_that_is_not_a_json_object_is_refused_untouched(tmp_path: Path) -> None:
    path = tmp_path / "settings.json"
    path.write_text("[1, 2]")
    with pytest.raises(ValueError):
        install(path, "claude-code")
    assert path.read_text() == "[1, 2]"
