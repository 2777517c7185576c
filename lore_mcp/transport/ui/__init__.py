"""The page at ``/ui``: static files that are an MCP client of ``/mcp`` like any agent, so there is no
second API; with OAuth they sign a person in as ``oauth.clients.PageClient``."""
