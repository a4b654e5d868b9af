"""Serves the dashboard: `GET /ui` and any `GET /ui/...` path answer the app's page (so a bookmarked view such
as `/ui/namespaces/NS/tools/TOOL` opens directly), `/ui/assets/<file>` the files of `static/`.

Plain ASGI in front of the bearer-token check, as the Swagger UI pages are: the page and its files hold no
data. The app asks for the token itself, keeps it in the tab's sessionStorage and sends it as an
`Authorization` header with each request it makes (never a cookie, never in a URL). The files are read once,
at start; each answer carries `Content-Security-Policy: default-src 'self'` (images of tool results are
`data:` URLs), an ETag the browser revalidates with, and `nosniff`.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

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


class DashboardPages:
    """Answers `/ui` and `/ui/...` (GET and HEAD; other methods 405); everything else goes on to `app`."""

    def __init__(self, app: ASGIApp, folder: Path = STATIC) -> None:
        self.app = app
        self.index = (folder / INDEX).read_text(encoding="utf-8")
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
            answer: Response = PlainTextResponse("the dashboard's pages take GET", 405, headers=HEADERS)
            answer.headers["Allow"] = "GET, HEAD"
        elif path.startswith(ASSETS):
            answer = self._asset(path[len(ASSETS) :], scope)
        else:
            answer = self._page(scope.get("root_path") or "")
        await answer(scope, receive, send)

    def _page(self, root: str) -> Response:
        # The root path (a gateway behind a prefix) goes into attributes: escaped so it cannot end one.
        safe = root.replace("&", "&amp;").replace('"', "&quot;").replace("<", "&lt;").replace(">", "&gt;")
        body = self.index.replace("__ROOT__", safe)
        return Response(body, media_type="text/html; charset=utf-8", headers={**HEADERS, "Cache-Control": "no-store"})

    def _asset(self, name: str, scope: Scope) -> Response:
        found = self.files.get(name)
        if found is None:
            return PlainTextResponse(f"no dashboard file {name[:100]!r}", 404, headers=HEADERS)
        body, kind, etag = found
        headers = {**HEADERS, "ETag": etag, "Cache-Control": "no-cache"}
        presented = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"if-none-match"), None)
        if presented is not None and etag in (tag.strip() for tag in presented.split(",")):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type=kind, headers=headers)
