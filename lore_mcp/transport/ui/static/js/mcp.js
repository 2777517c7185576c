// A small MCP client over fetch, for protocol revision 2026-07-28 (stateless streamable HTTP).
//
// Why this revision: each request is one self-contained POST (no initialize handshake, no
// Mcp-Session-Id to keep alive or lose when a tab sleeps), which suits a page that a person
// leaves open. Each POST carries the revision in the MCP-Protocol-Version header and in
// params._meta (with the client's capabilities and name), the method in Mcp-Method and, for
// tools/call and resources/read, the tool name or URI in Mcp-Name, as the SDK's server checks.
// The answer is JSON, or an event stream when the server sends progress first.

export const PROTOCOL_VERSION = "2026-07-28";

const META = {
  "io.modelcontextprotocol/protocolVersion": PROTOCOL_VERSION,
  "io.modelcontextprotocol/clientCapabilities": {},
  "io.modelcontextprotocol/clientInfo": { name: "lore-ui", version: "1" },
};
const NAME_PARAM = { "tools/call": "name", "resources/read": "uri", "prompts/get": "name" };

// An error with the server's own sentence ("CODE: sentence") and its code.
export class McpError extends Error {
  constructor(message) {
    super(message);
    const match = /^([A-Z_]+):/.exec(message);
    this.code = match ? match[1] : "ERROR";
  }
}

// A header value as the SDK expects: printable ASCII as is, anything else base64 in a sentinel.
export function headerValue(value) {
  if (/^[\x20-\x7E]*$/.test(value) && value === value.trim() && !/^=\?base64\?.*\?=$/.test(value)) {
    return value;
  }
  let binary = "";
  for (const byte of new TextEncoder().encode(value)) binary += String.fromCharCode(byte);
  return `=?base64?${btoa(binary)}?=`;
}

// The JSON-RPC message answering `id` in a reply, JSON or event stream; null if there is none.
async function replyTo(response, id) {
  const type = response.headers.get("content-type") || "";
  const text = await response.text();
  if (type.startsWith("text/event-stream")) {
    for (const event of text.split(/\r?\n\r?\n/)) {
      const data = event
        .split(/\r?\n/)
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trim())
        .join("\n");
      if (!data) continue;
      const message = JSON.parse(data);
      if (message.id === id && ("result" in message || "error" in message)) return message;
    }
    return null;
  }
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

export class McpClient {
  // `key` is an API key; with an OAuth `session` its access token is sent instead, and a refused
  // one is renewed once (session.renew) before the request is retried.
  constructor(endpoint, key, session = null) {
    this.endpoint = endpoint;
    this.key = key;
    this.session = session;
    this.nextId = 1;
  }

  async request(method, params = {}) {
    const id = this.nextId++;
    const headers = {
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "MCP-Protocol-Version": PROTOCOL_VERSION,
      "Mcp-Method": method,
    };
    const named = NAME_PARAM[method];
    if (named && typeof params[named] === "string") headers["Mcp-Name"] = headerValue(params[named]);
    const body = JSON.stringify({ jsonrpc: "2.0", id, method, params: { ...params, _meta: META } });
    const bearer = this.session ? this.session.token : this.key;
    let response = await this.post(headers, body, bearer);
    if (response.status === 401 && this.session) {
      const fresh = await this.session.renew(bearer);
      if (!fresh) throw this.session.ended();
      response = await this.post(headers, body, fresh);
    }
    const message = await replyTo(response, id);
    if (message && message.error) throw new McpError(message.error.message || `HTTP ${response.status}`);
    if (!message || !("result" in message)) {
      throw new McpError(`UNAVAILABLE: Lore answered HTTP ${response.status} without an MCP reply.`);
    }
    return message.result;
  }

  async post(headers, body, bearer) {
    const init = { method: "POST", headers: { ...headers, Authorization: `Bearer ${bearer}` }, body };
    try {
      return await fetch(this.endpoint, { ...init, credentials: "omit", cache: "no-store" });
    } catch {
      throw new McpError("UNAVAILABLE: Lore did not answer; check that the server is still running, then try again.");
    }
  }

  // A tool's structured result; a tool error is thrown with the tool's own sentence.
  async tool(name, args = {}) {
    const result = await this.request("tools/call", { name, arguments: args });
    if (result.isError) {
      throw new McpError((result.content || []).map((part) => part.text || "").join(" "));
    }
    if (result.structuredContent !== undefined) return result.structuredContent;
    return JSON.parse(result.content[0].text);
  }

  // A JSON resource, parsed.
  async resource(uri) {
    const result = await this.request("resources/read", { uri });
    return JSON.parse(result.contents[0].text);
  }

  // The names of every tool this key is offered.
  async toolNames() {
    const names = new Set();
    let cursor;
    do {
      const page = await this.request("tools/list", cursor ? { cursor } : {});
      for (const tool of page.tools) names.add(tool.name);
      cursor = page.nextCursor;
    } while (cursor);
    return names;
  }
}
