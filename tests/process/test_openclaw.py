"""The OpenClaw skill, as the real OpenClaw loads it: ``openclaw skills install`` from the plugin's
skill folder, then ``openclaw skills info lore``, offline, in a fresh ``HOME``.

OpenClaw 2026.9.6 needs Node 24 (``.ci/run`` installs both from npm). The skill requires the
``lore-memory`` command: with this checkout's on PATH it is ready, without it the same skill
reports the command missing, so the check can fail.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.npm_tools import ROOT, lore_bin, openclaw

SKILL = ROOT / "plugins" / "lore" / "skills" / "lore"


def _openclaw(home: Path, path: str, *args: str) -> subprocess.CompletedProcess[str]:
    command, node = openclaw()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LORE_", "OPENCLAW"))}
    return subprocess.run(
        [str(command), *args],
        env={**env, "HOME": str(home), "PATH": os.pathsep.join([str(node), path])},
        cwd=home,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=120,
    )


def _installed(home: Path, path: str) -> dict[str, Any]:
    """``skills install`` of the skill, then what ``skills info lore --json`` says of it."""
    installed = _openclaw(home, path, "skills", "install", str(SKILL))
    assert installed.returncode == 0, installed.stdout + installed.stderr
    info = _openclaw(home, path, "skills", "info", "lore", "--json")
    assert info.returncode == 0, info.stdout + info.stderr
    return json.loads(info.stdout)


@pytest.mark.parametrize("on_path", [True, False], ids=["lore-memory", "no-lore-memory"])
def test_skill_installs_and_loads(tmp_path: Path, on_path: bool) -> None:
    system = "/usr/bin:/bin"  # no lore-memory here
    skill = _installed(tmp_path, f"{lore_bin()}{os.pathsep}{system}" if on_path else system)
    assert skill["name"] == "lore" and skill["source"] == "openclaw-workspace"
    assert Path(skill["filePath"]).read_text() == (SKILL / "SKILL.md").read_text()
    assert skill["requirements"]["bins"] == ["lore-memory"]
    assert skill["missing"]["bins"] == ([] if on_path else ["lore-memory"])
    assert skill["eligible"] is on_path and skill["disabled"] is False
