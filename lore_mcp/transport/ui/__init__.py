"""The page for people: static files served at ``/ui`` that call Lore's own tools over MCP.

The page is an MCP client like any agent (``static/js/mcp.js``), so this package only serves
files; it holds no second API. ``routes`` serves them with a Content-Security-Policy that
allows no inline script, no eval and no other origin.
"""
