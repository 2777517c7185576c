"""The one migration runner of both backends: each dialect lists its steps, this applies them.

A migration is a version, a name and a step (the dialect's SQL script, or a function for a
step SQL alone cannot say). Inside one transaction the caller holds (and has locked
against other processes migrating at once), every step not yet recorded in
``schema_migrations`` runs in order and is recorded, so re-running is harmless and the
database says where it stands; a database from a newer Lore is refused untouched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from stores.engine.sql import SqlTx
from stores.errors import refuse_newer_schema

Migration = tuple[int, str, Any]


def apply_pending(
    tx: SqlTx,
    migrations: Sequence[Migration],
    schema_version: int,
    run: Callable[[Any], object],
    *,
    before_pending: Callable[[], None] | None = None,
) -> list[Migration]:
    """Run and record every migration not yet applied; the ones it ran.

    ``run`` runs one step in the caller's transaction; ``before_pending`` runs once first,
    when there is anything to apply (the local file's renames of old column names).
    """
    applied = {row["version"] for row in tx.rows("SELECT version FROM schema_migrations", {})}
    refuse_newer_schema(applied, schema_version)
    pending = [m for m in migrations if m[0] not in applied]
    if pending and before_pending is not None:
        before_pending()
    for version, name, step in pending:
        run(step)
        tx.rows(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (:v, :n, :at)",
            {"v": version, "n": name, "at": tx.stamp(datetime.now(UTC))},
        )
    return pending
