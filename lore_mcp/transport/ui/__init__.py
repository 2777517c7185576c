"""The page for people: static files served at ``/ui`` that call Lore's own tools over MCP.

The page is an MCP client like any agent (``static/js/mcp.js``), so this package only serves
files; it holds no second API. On a team server with OAuth the page can also sign a person in
through the server's own flow (``static/js/oauth.js``), as the public client that
``lore_mcp.transport.oauth.page_client`` describes. ``routes`` serves the files with a
Content-Security-Policy that allows no inline script, no eval and no other origin.
"""
