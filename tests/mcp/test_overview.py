"""``lore://overview/{project}`` (issue 35): the page's overview in one read, on both backends and
eras: every lesson counted (not only the newest 2,000), per day, by tag, by net votes; a key
for one project cannot read another's."""

from __future__ import annotations

import json
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from lore_mcp.embedding.embedder import Embedder
from tests.support.helpers import call
from tests.support.team import http_client, team_server


async def overview(client: Client, project: str) -> dict[str, Any]:
    read = await client.read_resource(f"lore://overview/{project}")
    return json.loads(read.contents[0].text)  # type: ignore[union-attr]


async def test_the_overview_sums_every_live_lesson(client: Client) -> None:
    ids = []
    for n, tags in enumerate([["dns"], ["dns", "k8s"], ["ci"]]):
        saved = await call(
            client,
            "save_lesson",
            problem=f"Problem {n} about {tags[0]} number {n}",
            resolution=f"Fix {n}",
            tags=tags,
        )
        ids.append(saved["id"])
    await call(client, "upvote_lesson", id=ids[2])
    await call(client, "upvote_lesson", id=ids[2])
    await call(client, "downvote_lesson", id=ids[0])
    await call(client, "save_lesson", problem="Elsewhere", resolution="Another project", project="other")
    got = await overview(client, "default")
    assert got["project"] == "default" and got["lessons"] == 3
    assert [d["lessons"] for d in got["per_day"]] == [3]
    assert got["tags"][0] == {"tag": "dns", "lessons": 2} and {"tag": "ci", "lessons": 1} in got["tags"]
    assert got["most_voted"][0]["id"] == ids[2] and got["most_voted"][0]["net_votes"] == 2
    assert got["least_voted"][0] == {"id": ids[0], "problem": "Problem 0 about dns number 0", "net_votes": -1}
    assert (await overview(client, "other"))["lessons"] == 1, "each project counts its own"


async def test_a_project_key_reads_only_its_own_overview(store: Any, embedder: Embedder) -> None:
    with team_server(store, embedder) as team:
        team.keys.init_org("acme")
        key = team.keys.create_key("acme", name="alice", project="alpha", root=False).key
        async with http_client(team.url, key) as client:
            await call(client, "save_lesson", problem="Alpha problem", resolution="Alpha fix")
            assert (await overview(client, "alpha"))["lessons"] == 1
            with pytest.raises(MCPError, match="limited to project 'alpha'"):
                await client.read_resource("lore://overview/beta")
