"""The consent page: where a person lets a client reach Lore with one of their API keys, or the one this
browser approved before (a signed ``HttpOnly`` ``SameSite=Lax`` cookie naming, never holding, it). The CSRF
token must match a ``SameSite=Strict`` cookie, cross-origin POSTs are refused, wrong keys are limited per
address. Nothing logs a key or token."""

from __future__ import annotations

import hmac
import html
import secrets
from typing import Any, Literal
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from lore_mcp.auth import KEY_PATTERN, secret_digest
from lore_mcp.services.lesson_input import PROJECT_PATTERN
from lore_mcp.transport.guards import (
    FAILED_AUTH_PER_MINUTE,
    SlidingWindowLimiter,
    client_address,
    count_failure,
)
from lore_mcp.transport.oauth.provider import REMEMBER_MAX_AGE_S, LoreOAuthProvider
from stores import ApiKey, CallCounts

FAILED_CONSENT_DOOR = "failed-consent"  # how wrong keys are counted across replicas (``count_failure``)
SameSite = Literal["lax", "strict"]
CSRF_COOKIE = "lore_oauth_csrf"
REMEMBER_COOKIE = "lore_oauth_key"
UNKNOWN_KEY = "This server does not know that API key, or it was revoked; ask your Lore admin for one."
BAD_PROJECT = (
    "A project name is letters, digits, '.', '_' and '-', at most 64, starting with a letter or digit."
)
EXPIRED_LINK = "This sign-in link has expired or was altered; start connecting again from your client."
HEADERS = {
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
    # same-origin: no-referrer sends "Origin: null", which the POST check refuses; clients still get none.
    "Referrer-Policy": "same-origin",
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'",
}
STYLE = (
    "body{font-family:system-ui,sans-serif;max-width:34em;margin:3em auto;padding:0 1em;color:#222}"
    "dl{display:grid;grid-template-columns:auto 1fr;gap:.3em 1em}dt{font-weight:600}"
    "input[type=password],input[type=text]{width:100%;padding:.4em;box-sizing:border-box}"
    ".error{color:#a00;font-weight:600}button{padding:.5em 1.2em;margin-right:.5em}"
)


class ConsentPage:
    """``GET`` shows the page, ``POST`` takes the answer; ``shared`` counts wrong keys for every replica."""

    def __init__(self, provider: LoreOAuthProvider, shared: CallCounts | None = None) -> None:
        self.provider = provider
        self.failures = SlidingWindowLimiter(FAILED_AUTH_PER_MINUTE)
        self.shared = shared
        self.secure = urlsplit(provider.issuer).scheme == "https"

    async def handle(self, request: Request) -> Response:
        fields = dict(request.query_params)
        if request.method == "POST":
            fields = {name: value for name, value in (await request.form()).items() if isinstance(value, str)}
            if not self._same_site(request, fields.get("csrf", "")):
                return _problem(
                    "This form expired or was sent from another site; reload the page and try again.", 403
                )
        signed = fields.get("request", "")
        pending = (await self.provider.signed("request")).check(signed)
        if pending is None:
            return _problem(EXPIRED_LINK)
        if request.method != "POST":
            return await self._page(request, signed, pending, error=None)
        if fields.get("decision") != "approve":
            return RedirectResponse(self.provider.deny(pending), status_code=303, headers=HEADERS)
        return await self._approve(request, fields, signed, pending)

    async def _page(
        self, request: Request, signed: str, pending: dict[str, Any], *, error: str | None, status: int = 200
    ) -> Response:
        client = await self.provider.get_client(pending["client_id"])
        if client is None:
            return _problem(
                "The client asking to connect is no longer known to this server; start again from it."
            )
        csrf = secrets.token_urlsafe(32)
        returns_to = urlsplit(pending["redirect_uri"])
        body = render(
            client_name=client.client_name or "An unnamed client",
            redirect_host=returns_to.hostname or returns_to.scheme,
            remembered=await self._remembered(request),
            signed=signed,
            csrf=csrf,
            error=error,
        )
        response = HTMLResponse(body, status_code=status, headers=HEADERS)
        self._cookie(response, CSRF_COOKIE, csrf, 3600, "strict")
        return response

    def _cookie(self, response: Response, name: str, value: str, max_age: int, samesite: SameSite) -> None:
        """An ``HttpOnly`` cookie for the consent page's paths only."""
        response.set_cookie(
            name, value, max_age=max_age, httponly=True, samesite=samesite, secure=self.secure, path="/oauth"
        )

    def _same_site(self, request: Request, csrf: str) -> bool:
        """The form's CSRF token matches its cookie, and no other origin posted it."""
        cookie = request.cookies.get(CSRF_COOKIE, "")
        issuer = urlsplit(self.provider.issuer)
        same_origin = request.headers.get("origin") in (None, f"{issuer.scheme}://{issuer.netloc}")
        return bool(cookie) and hmac.compare_digest(cookie, csrf) and same_origin

    async def _approve(
        self, request: Request, fields: dict[str, str], signed: str, pending: dict[str, Any]
    ) -> Response:
        address = client_address(request.scope)
        if self.failures.wait(address) is not None:
            error = "Too many wrong keys from this address; wait a minute."
            return await self._page(request, signed, pending, error=error, status=429)
        key, error = await self._key(request, fields)
        if key is None:
            await count_failure(self.failures, address, self.shared, door=FAILED_CONSENT_DOOR)
            return await self._page(request, signed, pending, error=error, status=401)
        project, refused = project_for(key, fields.get("project", "").strip())
        if refused is not None:
            return await self._page(request, signed, pending, error=refused, status=400)
        response = RedirectResponse(
            await self.provider.approve(pending, key, project), status_code=303, headers=HEADERS
        )
        if fields.get("remember") == "yes":
            remember = (await self.provider.signed("remember")).dumps({"key": key.id, "org": key.org})
            self._cookie(response, REMEMBER_COOKIE, remember, REMEMBER_MAX_AGE_S, "lax")
        return response

    async def _key(self, request: Request, fields: dict[str, str]) -> tuple[ApiKey | None, str]:
        """The key the person entered, or the one this browser remembers when they entered none."""
        typed = fields.get("api_key", "").strip()
        if not typed:
            remembered = await self._remembered(request)
            return remembered, "" if remembered else "Enter a Lore API key (it starts with lore_sk_)."
        if not KEY_PATTERN.fullmatch(typed):
            return None, "That is not a Lore API key: one is lore_sk_ followed by 32 letters and digits."
        key: ApiKey | None = await self.provider.verifier.bounded(
            self.provider.keys.key_by_hash, secret_digest(typed)
        )
        return (None, UNKNOWN_KEY) if key is None or key.revoked_at is not None else (key, "")

    async def _remembered(self, request: Request) -> ApiKey | None:
        value = (await self.provider.signed("remember")).check(request.cookies.get(REMEMBER_COOKIE, ""))
        if value is None or not isinstance(value.get("key"), str) or not isinstance(value.get("org"), str):
            return None
        key: ApiKey | None = await self.provider.verifier.bounded(
            self.provider.keys.key_by_id, value["org"], value["key"]
        )
        return key if key is not None and key.revoked_at is None else None


def project_for(key: ApiKey, asked: str) -> tuple[str | None, str | None]:
    """The project a grant reaches: the one asked for, within the key's; (project, error)."""
    if not asked:
        return key.project, None
    if not PROJECT_PATTERN.fullmatch(asked):
        return None, BAD_PROJECT
    if key.project is not None and asked != key.project:
        why = f"This API key reaches only project {key.project}; leave the project empty or use another key."
        return None, why
    return asked, None


def render(
    *,
    client_name: str,
    redirect_host: str,
    remembered: ApiKey | None,
    signed: str,
    csrf: str,
    error: str | None,
) -> str:
    """The page, every value escaped (a client's name is whatever the client said it is)."""
    e = html.escape
    reach = f"project {e(remembered.project)}" if remembered and remembered.project else "the key's projects"
    known = (
        f"<p>This browser approved before with the key <b>{e(remembered.name)}</b> ({e(remembered.prefix)}…) of "
        f"org <b>{e(remembered.org)}</b>; leave the key empty to use it again ({reach}).</p>"
        if remembered
        else ""
    )
    problem = f'<p class="error" role="alert">{e(error)}</p>' if error else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width">
<title>Connect to Lore</title><style>{STYLE}</style></head><body>
<h1>Connect {e(client_name)} to Lore?</h1>
<dl><dt>Client</dt><dd id="client">{e(client_name)}</dd>
<dt>Returns to</dt><dd id="redirect-host">{e(redirect_host)}</dd>
<dt>Reaches</dt><dd>the org and project of the API key you enter (or the project below)</dd></dl>
<p>It will read and write this memory as that key can, until the key is revoked. It cannot manage keys.</p>
{problem}{known}
<form method="post" action="/oauth/consent">
<input type="hidden" name="request" value="{e(signed)}"><input type="hidden" name="csrf" value="{e(csrf)}">
<p><label>Lore API key<br><input type="password" name="api_key" id="api_key" autocomplete="off"
 placeholder="lore_sk_..."></label></p>
<p><label>Project (optional; empty: every project the key reaches)<br>
<input type="text" name="project" id="project"></label></p>
<p><label><input type="checkbox" name="remember" value="yes" id="remember"> Remember this key's approval in
 this browser (a signed cookie naming the key, not the key)</label></p>
<p><button type="submit" name="decision" value="approve" id="approve">Approve</button>
<button type="submit" name="decision" value="deny" id="deny">Deny</button></p>
</form></body></html>"""


def _problem(sentence: str, status: int = 400) -> HTMLResponse:
    body = (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Lore</title><style>{STYLE}</style>'
        f'</head><body><h1>Lore</h1><p class="error" role="alert">{html.escape(sentence)}</p></body></html>'
    )
    return HTMLResponse(body, status_code=status, headers=HEADERS)
