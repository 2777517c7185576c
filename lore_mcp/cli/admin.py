"""``lore-memory migrate``, ``init`` and ``keys``: administering the database and its API keys."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from lore_mcp.cli.common import open_or_report, report_failure, say
from lore_mcp.settings import Settings

if TYPE_CHECKING:
    from lore_mcp.services.keys import CreatedKey, KeyOut


def migrate(_args: argparse.Namespace, settings: Settings) -> int:
    """Bring the configured database to the current schema; running it again is harmless."""
    app = open_or_report(settings)
    if app is None:
        return 1
    app.close()
    where = settings.db_path if settings.store == "local" else "Postgres"
    return say(f"{where} is at the current schema.")


def administer_keys(args: argparse.Namespace, settings: Settings) -> int:
    """`init` and `keys create|list|revoke`, on the configured database."""
    from lore_mcp.errors import LoreError
    from stores import StoreError

    listing = args.command == "keys" and args.keys_command == "list"
    app = open_or_report(settings, read_only="allow" if listing else "refuse")
    if app is None:
        return 1
    service = app.keys
    try:
        if args.command == "init":
            created = service.init_org(settings.org, name=args.org_name)
            return _print_created(created, args.json, first=True)
        if args.keys_command == "create":
            created = service.create_key(
                settings.org, name=args.name, project=args.key_project, root=args.root
            )
            return _print_created(created, args.json, first=False)
        if args.keys_command == "list":
            listed = service.list_keys(settings.org)
            if args.json:
                print(json.dumps({"keys": [k.model_dump(mode="json") for k in listed]}, indent=2))
            else:
                _print_key_table(listed)
            return 0
        revoked = service.revoke_key(settings.org, args.key_id)
        if args.json:
            print(revoked.model_dump_json(indent=2))
        else:
            print(f"Revoked {revoked.name} ({revoked.id}); it stops working on its next request.")
        return 0
    except (LoreError, StoreError) as exc:
        return report_failure(exc)
    finally:
        app.close()


def _print_created(created: CreatedKey, as_json: bool, *, first: bool) -> int:
    if as_json:
        print(created.model_dump_json(indent=2))
        return 0
    what = f"org {created.org!r} and its root key" if first else f"key {created.name!r}"
    print(f"Created {what}.\n")
    print(f"  id:      {created.id}")
    print(f"  key:     {created.key}")
    print(f"  project: {created.project or '(all projects)'}{'  root' if created.root else ''}\n")
    print("The key is shown this once; Lore keeps only its SHA-256. Store it in a secret manager.")
    return 0


def _print_key_table(keys: Sequence[KeyOut]) -> None:
    if not keys:
        print("No keys yet: run `lore-memory init`.")
        return
    print(f"{'ID':26}  {'NAME':20}  {'PREFIX':17}  {'PROJECT':16}  {'ROOT':4}  {'LAST USED':20}  REVOKED")
    for k in keys:
        last = k.last_used_at.strftime("%Y-%m-%d %H:%M:%S") if k.last_used_at else "never"
        revoked = k.revoked_at.strftime("%Y-%m-%d %H:%M:%S") if k.revoked_at else ""
        print(
            f"{k.id:26}  {k.name[:20]:20}  {k.prefix:17}  {(k.project or '*')[:16]:16}  "
            f"{'yes' if k.root else 'no':4}  {last:20}  {revoked}"
        )
