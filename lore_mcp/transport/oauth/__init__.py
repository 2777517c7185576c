"""OAuth 2.1 on the team server, for clients that cannot send a static API key (claude.ai and Claude Desktop
connectors, ``mcp-remote``). The SDK's ``mcp.server.auth`` does the protocol; what it leaves to a server is
here: tokens and the verifier, clients and redirect rules, the provider, consent, and the routes."""
