"""OAuth 2.1 on the team server, for clients that cannot send a static API key (claude.ai and
Claude Desktop connectors, ``mcp-remote``, the SDK clients).

Built on the MCP SDK's authorization-server pieces (``mcp.server.auth``: the authorize,
token, registration and revocation handlers, PKCE S256, the metadata documents); what
they leave to a server is here:

- ``tokens``: the bearer verifier of ``/mcp`` (API keys as before, and access tokens this
  server issued), token formats and lifetimes;
- ``clients``: registered clients (RFC 7591) and client ID metadata documents, with the
  redirect URI rules (exact, loopback ports free);
- ``provider``: the SDK's provider interface over the store's OAuth rows, each grant bound
  to the Lore key a person entered;
- ``page_client``: the page for people (``/ui``) as a public client known without registering,
  returning only to the page's own address;
- ``registration``: ``/register`` with limits on size, rate and unused clients per address;
- ``revocation``: ``/revoke`` as public clients can use it (the SDK's asks them for a secret);
- ``consent``: the page where that person approves or denies a client;
- ``routes``: the metadata documents (RFC 9728, RFC 8414) and the routes, and the one 401
  every refused credential gets.
"""
