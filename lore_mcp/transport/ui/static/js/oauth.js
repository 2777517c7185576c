// Sign-in through the team server's own OAuth flow, where it has one.
//
// The page is a public client the server knows without registering: its id is
// {issuer}/ui/oauth-client.json and its one redirect URI is this page, {issuer}/ui/. It sends the
// person to /authorize with PKCE S256, a random state and resource = the /mcp URL; the consent
// page sends them back here with ?code=…&state=…&iss=…, which leaves the address bar at once.
// State and iss are checked, the code is exchanged at /token, and the tokens stay in this tab's
// sessionStorage (never localStorage). A refused access token is refreshed once (the refresh
// token rotates), however many requests were refused together; signing out revokes both.

import { McpError } from "./mcp.js";

const PENDING = "lore.oauth.pending";
const TOKENS = "lore.oauth.tokens";
const PAGE = new URL("./", window.location.href).href;
const METADATA = new URL("../.well-known/oauth-authorization-server", PAGE).href;
const RESOURCE = new URL("../mcp", PAGE).href;

// What the authorization server's error codes mean to a person; others get the last sentence.
const ERRORS = {
  access_denied: "Sign-in was denied on Lore's consent page; nothing was signed in.",
  temporarily_unavailable: "Lore could not sign you in just now; try again in a minute.",
  server_error: "Lore could not sign you in just now; try again in a minute.",
};
const FAILED = "Signing in with OAuth did not complete; try again, or sign in with an API key.";
const ENDED = "Your sign-in has ended (it expired or was revoked); sign in again.";

function refused(sentence) {
  return new McpError(`UNAUTHORIZED: ${sentence}`);
}

function base64url(bytes) {
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function randomText(size) {
  return base64url(crypto.getRandomValues(new Uint8Array(size)));
}

async function challengeOf(verifier) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(verifier));
  return base64url(new Uint8Array(digest));
}

function sameOrigin(url) {
  try {
    return new URL(url).origin === window.location.origin;
  } catch {
    return false;
  }
}

function issuerOf(metadata) {
  return String(metadata.issuer || "").replace(/\/$/, "");
}

// The server's metadata when it signs people in with OAuth and can send them back to this very
// page (its issuer's /ui/, its endpoints on this origin, S256 and iss); null otherwise.
export async function discover() {
  if (!window.isSecureContext || !window.crypto || !crypto.subtle) return null;
  let metadata;
  try {
    const response = await fetch(METADATA, { credentials: "omit", cache: "no-store" });
    if (!response.ok) return null;
    metadata = await response.json();
  } catch {
    return null;
  }
  const usable =
    `${issuerOf(metadata)}/ui/` === PAGE &&
    (metadata.code_challenge_methods_supported || []).includes("S256") &&
    metadata.authorization_response_iss_parameter_supported === true &&
    sameOrigin(metadata.authorization_endpoint) &&
    sameOrigin(metadata.token_endpoint);
  return usable ? metadata : null;
}

// Send the person to the server's authorization endpoint; they come back to `finish`.
export async function begin(metadata) {
  const pending = {
    state: randomText(16),
    verifier: randomText(32),
    issuer: metadata.issuer,
    client: `${issuerOf(metadata)}/ui/oauth-client.json`,
    token: metadata.token_endpoint,
    revoke: sameOrigin(metadata.revocation_endpoint) ? metadata.revocation_endpoint : null,
  };
  const url = new URL(metadata.authorization_endpoint);
  url.search = new URLSearchParams({
    response_type: "code",
    client_id: pending.client,
    redirect_uri: PAGE,
    code_challenge: await challengeOf(pending.verifier),
    code_challenge_method: "S256",
    state: pending.state,
    resource: RESOURCE,
  }).toString();
  sessionStorage.setItem(PENDING, JSON.stringify(pending));
  window.location.assign(url.href);
}

// The answer in this page's address, if any: out of the address bar at once, then checked and
// its code exchanged. A session, null when there was no answer, or a thrown sentence.
export async function finish() {
  const answer = new URLSearchParams(window.location.search);
  if (!answer.has("code") && !answer.has("error") && !answer.has("state")) return null;
  window.history.replaceState(null, "", window.location.pathname + window.location.hash);
  const pending = JSON.parse(sessionStorage.getItem(PENDING) || "null");
  sessionStorage.removeItem(PENDING);
  if (!pending || answer.get("state") !== pending.state) {
    throw refused("This sign-in answer is not for a sign-in this tab started; sign in again.");
  }
  if (answer.get("iss") !== pending.issuer) {
    throw refused("This sign-in answer did not come from this page's server; sign in again.");
  }
  if (answer.has("error")) throw refused(ERRORS[answer.get("error")] || FAILED);
  const tokens = await post(pending.token, {
    grant_type: "authorization_code",
    code: answer.get("code") || "",
    redirect_uri: PAGE,
    client_id: pending.client,
    code_verifier: pending.verifier,
    resource: RESOURCE,
  });
  const session = new OAuthSession({ client: pending.client, token: pending.token, revoke: pending.revoke });
  session.keep(tokens);
  return session;
}

// A form POST to an endpoint of the server (no cookies, nothing cached).
function form(url, fields) {
  return fetch(url, { method: "POST", body: new URLSearchParams(fields), credentials: "omit", cache: "no-store" });
}

// A form POST to the token endpoint; its tokens, or its own sentence thrown.
async function post(url, fields) {
  let response;
  let body;
  try {
    response = await form(url, fields);
    body = await response.json();
  } catch {
    throw new McpError("UNAVAILABLE: Lore did not answer the sign-in; check that the server is running, then try again.");
  }
  if (!response.ok || typeof body.access_token !== "string") {
    throw refused(typeof body.error_description === "string" ? body.error_description : FAILED);
  }
  return body;
}

// The tokens of one sign-in, in this tab's sessionStorage.
export class OAuthSession {
  constructor(stored) {
    this.stored = stored;
    this.refreshing = null;
    // Called once when a refresh fails, so the page can go back to its sign-in screen.
    this.onEnded = () => {};
  }

  // The session this tab signed in with before (a reload), or null.
  static load() {
    const stored = JSON.parse(sessionStorage.getItem(TOKENS) || "null");
    return stored && stored.access ? new OAuthSession(stored) : null;
  }

  // Forget a stored session without revoking it (a person signed in with a key instead).
  static discard() {
    sessionStorage.removeItem(TOKENS);
  }

  get token() {
    return this.stored.access;
  }

  keep(tokens) {
    this.stored = { ...this.stored, access: tokens.access_token, refresh: tokens.refresh_token || null };
    sessionStorage.setItem(TOKENS, JSON.stringify(this.stored));
  }

  forget() {
    this.stored = { ...this.stored, access: null, refresh: null };
    sessionStorage.removeItem(TOKENS);
  }

  // A fresh access token after `used` was refused, or null when the sign-in has ended (UNAVAILABLE
  // thrown when the server did not answer). Requests refused together share one refresh: a
  // rotated refresh token used twice would revoke the whole sign-in.
  renew(used) {
    if (used !== this.stored.access) return Promise.resolve(this.stored.access);
    if (!this.refreshing) {
      this.refreshing = this.refresh().finally(() => {
        this.refreshing = null;
      });
    }
    return this.refreshing;
  }

  async refresh() {
    const refresh = this.stored.refresh;
    const fields = { grant_type: "refresh_token", refresh_token: refresh, client_id: this.stored.client, resource: RESOURCE };
    try {
      if (!refresh) throw refused(ENDED);
      this.keep(await post(this.stored.token, fields));
      return this.stored.access;
    } catch (error) {
      if (error.code === "UNAVAILABLE") throw error; // the server did not answer: the tokens are kept
      this.forget();
      this.onEnded(this.ended());
      return null;
    }
  }

  // The error a request refused for good carries: one sentence, never the server's parameters.
  ended() {
    return refused(ENDED);
  }

  // Revoke both tokens at the server (each ends the whole sign-in there), then forget them.
  async signOut() {
    const { revoke, client, access, refresh } = this.stored;
    this.forget();
    if (!revoke) return;
    for (const token of [refresh, access]) {
      if (!token) continue;
      try {
        await form(revoke, { token, client_id: client });
      } catch {
        // The server is gone: the tokens are forgotten here and lapse there.
      }
    }
  }
}
