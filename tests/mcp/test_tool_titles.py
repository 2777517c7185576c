"""What clients and directories read of each tool in tools/list (its title, top level and in the
annotations, and its four hints) and of the server itself (serverInfo: title, website, version)."""

from __future__ import annotations

from mcp import Client

from lore_mcp import __version__
from lore_mcp.tools.registry import SPECS


async def test_tools_list_carries_each_tools_title_and_hints(client: Client) -> None:
    listed = (await client.list_tools()).tools
    assert listed
    for tool in listed:
        assert tool.title == SPECS[tool.name].title, tool.name
        assert tool.annotations is not None, tool.name
        assert tool.annotations.title == SPECS[tool.name].title, tool.name
        assert tool.annotations == SPECS[tool.name].annotations, tool.name


async def test_server_info_names_title_website_and_version(client: Client) -> None:
    info = client.server_info
    assert info is not None
    assert (info.name, info.title, info.version) == ("lore", "Lore", __version__)
    assert info.website_url is not None and info.website_url.startswith("https://")
    assert info.description
