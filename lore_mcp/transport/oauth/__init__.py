"""OAuth 2.1 on the team server, for clients that cannot send a static API key (claude.ai and Claude
Desktop connectors, ``mcp-remote``, the SDK clients).

The SDK's ``mcp.server.auth`` does the protocol (handlers, PKCE S256, metadata); what it leaves to a
server is here: token formats and the verifier, clients and redirect rules, the provider binding each
grant to the key a person entered, ``/ui`` as an unregistered public client, ``/register`` with limits,
``/revoke`` for public clients, consent, and the routes with the one 401.
"""
