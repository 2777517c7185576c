"""Running Node tools (the MCP conformance suite, the Inspector) through ``npx``."""

from __future__ import annotations

import os
import shutil

import pytest


def npx(*packages: str) -> list[str]:
    """``npx`` running a command from ``packages`` on Node 22; fails (never skips) without npx."""
    found = shutil.which("npx")
    if found is None:
        pytest.fail("npx is not on PATH: install Node.js 20 or later (npx fetches Node 22 itself)")
    command = [found, "--yes", "--prefer-offline", "-p", "node@22"]
    for package in packages:
        command += ["-p", package]
    return [*command, "--"]


def node_env() -> dict[str, str]:
    """Environment for npx: no LORE_* settings of the caller (a stdio server inherits them)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LORE_")}
    return {**env, "npm_config_update_notifier": "false", "npm_config_fund": "false"}
