"""The hooks' calls in remote mode: one ``tools/call`` POST (2026-07-28 needs no handshake), no
SDK import for a hook that lives a second. Arguments are redacted before they leave."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from lore_mcp.redaction import redact
from lore_mcp.settings import Settings, mcp_url

PROTOCOL_VERSION = "2026-07-28"
# The clients' hook limits are seconds; a hook that cannot answer within this answers nothing.
TIMEOUT_S = 5.0


def remote_call(settings: Settings) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """A function that calls a ``loop`` tool on the team server and returns its structured answer."""
    import httpx2

    if not settings.api_url or not settings.api_key:
        raise ValueError("remote mode needs LORE_API_URL and LORE_API_KEY")
    url, key = mcp_url(settings.api_url), settings.api_key

    def call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        clean = {k: redact(v).text if isinstance(v, str) else v for k, v in arguments.items()}
        meta = {
            "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
            "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "lore-memory hook", "version": "1"},
        }
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": name, "arguments": clean, "_meta": meta},
        }
        headers = {
            "Authorization": f"Bearer {key}",
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": PROTOCOL_VERSION,
            "Mcp-Method": "tools/call",
            "Mcp-Name": name,
        }
        response = httpx2.post(url, content=json.dumps(body), headers=headers, timeout=TIMEOUT_S)
        return _result(response.status_code, response.headers.get("content-type", ""), response.text)

    return call


def _result(status: int, content_type: str, text: str) -> dict[str, Any]:
    """The structured answer from JSON or SSE; raises with the server's sentence on failure."""
    if status != 200:
        raise RuntimeError(f"the team server answered HTTP {status}")
    message: dict[str, Any] | None = None
    if content_type.startswith("text/event-stream"):
        for event in text.replace("\r\n", "\n").split("\n\n"):
            data = "\n".join(line[5:].strip() for line in event.split("\n") if line.startswith("data:"))
            if data:
                candidate = json.loads(data)
                if "result" in candidate or "error" in candidate:
                    message = candidate
    else:
        message = json.loads(text)
    if not isinstance(message, dict) or "error" in message:
        error = (message or {}).get("error") or {}
        raise RuntimeError(str(error.get("message") or "the team server sent no answer"))
    result = message.get("result") or {}
    if result.get("isError"):
        texts = [c.get("text", "") for c in result.get("content", []) if isinstance(c, dict)]
        raise RuntimeError(" ".join(texts) or "the tool call failed")
    structured = result.get("structuredContent")
    if isinstance(structured, dict):
        return structured
    content = result.get("content") or []
    return json.loads(content[0]["text"]) if content else {}
