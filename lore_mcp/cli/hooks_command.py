"""``lore-memory hook`` and ``lore-memory hooks``: what the CLI runs for them."""

from __future__ import annotations

import argparse
import sys

from lore_mcp.settings import Settings


def run_loop_command(args: argparse.Namespace, settings: Settings) -> int:
    if args.command == "hook":
        from lore_mcp.cli.hooks import hook_env_client, run_hook

        return run_hook(args.event, args.client or hook_env_client(), settings, sys.stdin, sys.stdout)
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
