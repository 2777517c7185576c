"""Structured memory across server processes: two stdio servers on one SQLite file never both
apply a plan on the same base, and their inserts get distinct ids and sequence numbers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from tests.support.clients import connected
from tests.support.helpers import call
from tests.support.plans import (
    NOTES_COLUMNS,
    apply_ops,
    column,
    create_table,
    ids_of,
    insert,
    make_plan,
)
from tests.support.processes import stdio_params


async def test_two_server_processes_on_one_file_never_both_apply_on_the_same_base(tmp_path: Path) -> None:
    db = tmp_path / "shared.db"
    async with connected(stdio_params(db)) as one, connected(stdio_params(db)) as two:
        made = await apply_ops(one, create_table("notes", *NOTES_COLUMNS))
        base = made["schema_hash"]
        for _ in range(3):
            plans = [
                make_plan(
                    base, {"op": "add_column", "table": "notes", "column": column(f"c{n}_{base[:6]}", "text")}
                )
                for n in range(2)
            ]
            results = await asyncio.gather(
                one.call_tool("apply", {"plan": plans[0]}), two.call_tool("apply", {"plan": plans[1]})
            )
            won = [r for r in results if not r.is_error]
            assert len(won) == 1, [r.content[0].text[:200] for r in results]
            assert all(r.content[0].text.startswith("STALE_PLAN: ") for r in results if r.is_error)
            base = won[0].structured_content["schema_hash"]
        inserts = await asyncio.gather(
            *(
                call(client, "apply", plan=make_plan(base, insert("notes", {"title": f"{n}-{i}"})))
                for n, client in enumerate((one, two))
                for i in range(5)
            )
        )
        assert sorted(r["seq"] for r in inserts) == list(range(5, 15))
        assert await ids_of(one, "notes") == list(range(1, 11))
        history = (await call(two, "history", limit=100))["commits"]
        assert [c["seq"] for c in history] == list(range(14, 0, -1))
