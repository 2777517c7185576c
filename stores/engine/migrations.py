"""Both backends' migration runner: in the caller's transaction (locked against other migrators)
each unrecorded step runs in order and is recorded, so re-running is harmless; a newer Lore's
database is refused untouched."""

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
    """Run and record pending migrations, returning them; ``before_pending`` runs first if any."""
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
