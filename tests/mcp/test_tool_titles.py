"""What clients and directories read of each tool in tools/list: its title and its four hints."""

from __future__ import annotations

from mcp import Client

from lore_mcp.tools.registry import SPECS


async def test_tools_list_carries_each_tools_title_and_hints(client: Client) -> None:
    listed = (await client.list_tools()).tools
    assert listed
    for tool in listed:
        assert tool.annotations is not None, tool.name
        assert tool.annotations.title == SPECS[tool.name].title, tool.name
        assert tool.annotations == SPECS[tool.name].annotations, tool.name
