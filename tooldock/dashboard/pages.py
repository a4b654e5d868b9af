"""Serves the dashboard: `GET /ui` and any `GET /ui/...` path answer the app's page (so a bookmarked view such
as `/ui/namespaces/NS/tools/TOOL` opens directly), `/ui/assets/<file>` the files of `static/`.

Plain ASGI in front of the bearer-token check, as the Swagger UI pages are: the page and its files hold no
data. The app asks for the token itself, keeps it in the tab's sessionStorage and sends it as an
`Authorization` header with each request it makes (never a cookie, never in a URL). The files are read once,
at start; each answer carries `Content-Security-Policy: default-src 'self'` (images of tool results are
`data:` URLs), an ETag the browser revalidates with, and `nosniff`.

With single sign-on (TOOLDOCK_OAUTH_ISSUER and TOOLDOCK_OAUTH_DASHBOARD_CLIENT_ID), the page also carries the
issuer, the dashboard's public client id, the gateway's resource and the scopes to ask for (a `tooldock-sso`
meta tag, read by static/sso.js), and the CSP lets the page reach the issuer's origin only (`connect-src
'self' <issuer origin>`: its discovery document and token endpoint, called with fetch).
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from urllib.parse import urlsplit

from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tooldock.oauth import OAuthConfig

STATIC = Path(__file__).resolve().parent / "static"
PREFIX, ASSETS = "/ui", "/ui/assets/"
# A tool's images and audio come as data: URLs; nothing else but the gateway's own files.
CSP = (
    "default-src 'self'; img-src 'self' data:; media-src 'self' data:; base-uri 'none'; form-action 'self'; "
    "frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
}
TYPES = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
}
INDEX = "index.html"


def sso_settings(config: OAuthConfig | None) -> dict[str, str] | None:
    """What the page needs to sign people in at the issuer, or None without a dashboard client."""
    if config is None or config.dashboard_client_id is None or config.resource is None:
        return None
    scopes = " ".join(dict.fromkeys(g.value for g in config.grants)) if config.claim == "scope" else ""
    return {
        "issuer": config.issuer,
        "client_id": config.dashboard_client_id,
        "resource": config.resource,
        "scope": " ".join(filter(None, ("openid", scopes))),
    }


def csp_for(sso: dict[str, str] | None) -> str:
    """CSP, with the issuer's origin added to `connect-src` when people sign in there."""
    if sso is None:
        return CSP
    parts = urlsplit(sso["issuer"])
    return CSP.replace("; img-src", f"; connect-src 'self' {parts.scheme}://{parts.netloc}; img-src", 1)


def _attribute(text: str) -> str:
    return text.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")


class DashboardPages:
    """Answers `/ui` and `/ui/...` (GET and HEAD; other methods 405); everything else goes on to `app`.
    `oauth`: the gateway's OAuth settings (single sign-on when they name a dashboard client)."""

    def __init__(self, app: ASGIApp, folder: Path = STATIC, oauth: OAuthConfig | None = None) -> None:
        self.app = app
        sso = sso_settings(oauth)
        self.headers = {**HEADERS, "Content-Security-Policy": csp_for(sso)}
        self.index = (folder / INDEX).read_text(encoding="utf-8")
        self.index = self.index.replace("__SSO__", _attribute(json.dumps(sso)) if sso else "")
        self.files: dict[str, tuple[bytes, str, str]] = {}  # name -> (bytes, content type, ETag)
        for path in sorted(folder.iterdir()):
            if path.is_file() and path.suffix in TYPES:
                body = path.read_bytes()
                self.files[path.name] = (body, TYPES[path.suffix], f'"{hashlib.sha256(body).hexdigest()[:32]}"')

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path != PREFIX and not path.startswith(PREFIX + "/"):
            await self.app(scope, receive, send)
            return
        if scope["method"] not in ("GET", "HEAD"):
            answer: Response = PlainTextResponse("the dashboard's pages take GET", 405, headers=self.headers)
            answer.headers["Allow"] = "GET, HEAD"
        elif path.startswith(ASSETS):
            answer = self._asset(path[len(ASSETS) :], scope)
        else:
            answer = self._page(scope.get("root_path") or "")
        await answer(scope, receive, send)

    def _page(self, root: str) -> Response:
        # The root path (a gateway behind a prefix) goes into attributes: escaped so it cannot end one.
        safe = _attribute(root)
        body = self.index.replace("__ROOT__", safe)
        return Response(
            body, media_type="text/html; charset=utf-8", headers={**self.headers, "Cache-Control": "no-store"}
        )

    def _asset(self, name: str, scope: Scope) -> Response:
        found = self.files.get(name)
        if found is None:
            return PlainTextResponse(f"no dashboard file {name[:100]!r}", 404, headers=self.headers)
        body, kind, etag = found
        headers = {**self.headers, "ETag": etag, "Cache-Control": "no-cache"}
        presented = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"if-none-match"), None)
        if presented is not None and etag in (tag.strip() for tag in presented.split(",")):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type=kind, headers=headers)
