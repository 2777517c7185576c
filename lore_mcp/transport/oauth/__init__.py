"""OAuth 2.1 on the team server, for clients that cannot send a static API key (claude.ai and
Claude Desktop connectors, ``mcp-remote``, the SDK clients).

The MCP SDK's authorization-server pieces (``mcp.server.auth``: handlers, PKCE S256, metadata)
do the protocol; what they leave to a server is here: ``tokens`` (the bearer verifier of
``/mcp``, token formats and lifetimes), ``clients`` (registered clients, client ID metadata
documents, redirect URI rules), ``provider`` (the SDK's provider over the store's OAuth rows,
each grant bound to the Lore key a person entered), ``page_client`` (``/ui`` as a public client
known without registering), ``registration`` (``/register`` with limits), ``revocation``
(``/revoke`` as public clients can use it), ``consent`` (where a person approves a client) and
``routes`` (the metadata documents, the routes, and the one 401 every refused credential gets).
"""
