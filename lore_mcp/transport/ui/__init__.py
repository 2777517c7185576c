"""The page for people at ``/ui``: static files that are an MCP client of ``/mcp`` like any agent
(``static/js/mcp.js``), so there is no second API; on a team server with OAuth they sign a person
in as the public client of ``oauth.page_client`` (``static/js/oauth.js``)."""
