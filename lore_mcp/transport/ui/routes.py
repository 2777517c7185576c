"""Serve the page's static files at ``/ui``, read once at start-up, so a request can only name one of them.
The CSP allows only this origin (no inline script, no eval, no framing), so even a lesson slipping past the
text-only rendering could not run script. The Host and Origin checks are ``/mcp``'s (DNS rebinding)."""

from __future__ import annotations

from importlib import resources
from typing import Any

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

UI_PATH = "/ui"
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    # The page is small and changes with the package: always ask, so an upgrade shows at once.
    "Cache-Control": "no-cache",
}
MEDIA_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}


def static_files(folder: Any = None, prefix: str = "") -> dict[str, tuple[bytes, str]]:
    folder = folder or resources.files(__package__ or "lore_mcp.transport.ui").joinpath("static")
    found: dict[str, tuple[bytes, str]] = {}
    for entry in folder.iterdir():
        suffix = "." + entry.name.rsplit(".", 1)[-1]
        if entry.is_dir():
            found.update(static_files(entry, f"{prefix}{entry.name}/"))
        elif suffix in MEDIA_TYPES:
            found[prefix + entry.name] = (entry.read_bytes(), MEDIA_TYPES[suffix])
    return found


def ui_routes(security: TransportSecuritySettings | None) -> list[Route]:
    """``/ui`` (to ``/ui/``), ``/ui/`` and its files, under ``security`` (``/mcp``'s Host/Origin policy)."""
    files = static_files()

    async def page_file(request: Request) -> Response:
        refused = await TransportSecurityMiddleware(security).validate_request(request)
        if refused is not None:
            return refused
        name = request.path_params.get("path") or "index.html"
        if name not in files:
            return Response("Not found.", status_code=404, media_type="text/plain", headers=SECURITY_HEADERS)
        body, media_type = files[name]
        return Response(body, media_type=media_type, headers=SECURITY_HEADERS)

    async def to_page(request: Request) -> Response:
        return RedirectResponse(f"{UI_PATH}/", status_code=307, headers=SECURITY_HEADERS)

    return [
        Route(UI_PATH, to_page, methods=["GET"]),
        Route(f"{UI_PATH}/", page_file, methods=["GET"]),
        Route(UI_PATH + "/{path:path}", page_file, methods=["GET"]),
    ]
