"""A project's overview in one query: the page read lessons 100 at a time (twenty calls at 2,000
lessons, each from the caller's budget) to plot these.
"""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime
from typing import Any

from lore_mcp.services.recording import Who
from lore_mcp.services.structured import StructuredService, in_transaction

TOP_TAGS = 10
TOP_VOTED = 5


async def overview(tables: StructuredService, project: str | None, who: Who) -> dict[str, Any]:
    """Stats counts, saves per day, top tags, and the most and least voted lessons."""
    stats = await tables.stats(project, who=who)
    scope = tables.lessons.scope(project, who.caller)
    rows = await in_transaction(tables.store, scope, lambda tx: tx.lesson_digest(datetime.now(UTC)))
    days = Counter(r["created_at"].astimezone(UTC).date().isoformat() for r in rows)
    tags = Counter(tag for r in rows for tag in r["tags"])
    voted = sorted(rows, key=lambda r: (r["downvotes"] - r["upvotes"], r["id"]))

    def titled(picked: list[dict[str, Any]]) -> list[dict[str, Any]]:
        return [
            {"id": r["id"], "problem": r["problem"], "net_votes": r["upvotes"] - r["downvotes"]}
            for r in picked
        ]

    return {
        **stats,
        "lessons": len(rows),
        "per_day": [{"day": day, "lessons": n} for day, n in sorted(days.items())],
        "tags": [
            {"tag": t, "lessons": n} for t, n in sorted(tags.items(), key=lambda x: (-x[1], x[0]))[:TOP_TAGS]
        ],
        "most_voted": titled(voted[:TOP_VOTED]),
        "least_voted": titled(voted[::-1][:TOP_VOTED]),
    }
