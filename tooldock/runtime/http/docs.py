"""Swagger UI for the REST API: `/docs` for the gateway's own document (`/openapi.json`), and
`/ns/{namespace}/docs` for a namespace's typed document (`/ns/{namespace}/openapi.json`).

The pages are plain ASGI in front of the bearer-token check, so they load without a token: they hold no
data, only Swagger UI, whose script and stylesheet the browser loads from a CDN (jsDelivr, the npm package
swagger-ui-dist, as FastAPI's own docs page does). The page handles the bearer token, so it loads one pinned
release with Subresource Integrity: a CDN serving anything else gets no page rather than the token
(tests/browser pins the same release; tests check the hashes against its files). With
TOOLDOCK_SWAGGER_UI_DIR (a network with no way to jsDelivr), the gateway serves the two files from that
folder itself, at `/docs/swagger-ui-bundle.js` and `/docs/swagger-ui.css` (read once at start; the page's
`integrity` is theirs). The OpenAPI documents themselves still need the bearer token, as every endpoint but
`/health` does, so the page asks for the token first, keeps it in the tab's sessionStorage, sends it only
when fetching the document, and pre-fills Swagger UI's "Authorize" dialog with it (the documents declare the
`bearer` HTTP scheme), which "Try it out" uses.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

from starlette.responses import HTMLResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from tooldock.namespace.names import NAMESPACE_RE
from tooldock.runtime.settings import SWAGGER_FILES

SWAGGER_VERSION = "5.35.0"
SWAGGER_CDN = f"https://cdn.jsdelivr.net/npm/swagger-ui-dist@{SWAGGER_VERSION}/"
SWAGGER_JS = SWAGGER_CDN + "swagger-ui-bundle.js"
SWAGGER_CSS = SWAGGER_CDN + "swagger-ui.css"
# sha384 of the two files in the npm package (what jsDelivr serves, byte for byte), for `integrity`.
SWAGGER_SRI = {
    "swagger-ui-bundle.js": "sha384-gjRm0bEPMeTmMh5jT2cHccIwCUZSTd8YC+j0d0sXw0MdGEfScduGpSyF3ZSSLkX9",
    "swagger-ui.css": "sha384-WlYgdmXYOOBWL5apwjDEZwN+U3HmXSSu5R6V5aGxEcf7z+KuRNwBhoxKVN1i3D5I",
}
_NS_DOCS = re.compile(r"^/ns/([^/]+)/docs$")
TYPES = {"swagger-ui-bundle.js": "text/javascript; charset=utf-8", "swagger-ui.css": "text/css; charset=utf-8"}


@dataclass(frozen=True)
class SwaggerSource:
    """Where a page loads Swagger UI's script and stylesheet from, with their `integrity` values."""

    js: str
    css: str
    js_sri: str
    css_sri: str


CDN = SwaggerSource(SWAGGER_JS, SWAGGER_CSS, SWAGGER_SRI["swagger-ui-bundle.js"], SWAGGER_SRI["swagger-ui.css"])


class LocalSwagger:
    """Swagger UI's two files from TOOLDOCK_SWAGGER_UI_DIR (settings checked they are there), read once."""

    def __init__(self, folder: Path) -> None:
        self.files: dict[str, tuple[bytes, str]] = {}  # name -> (bytes, sha384 integrity)
        for name in SWAGGER_FILES:
            body = (folder / name).read_bytes()
            self.files[name] = (body, "sha384-" + base64.b64encode(hashlib.sha384(body).digest()).decode())
        try:
            self.version = str(json.loads((folder / "package.json").read_text())["version"])
        except (OSError, ValueError, KeyError, TypeError):
            self.version = "unknown"

    def source(self, root: str) -> SwaggerSource:
        (_, js_sri), (_, css_sri) = self.files["swagger-ui-bundle.js"], self.files["swagger-ui.css"]
        return SwaggerSource(f"{root}/docs/swagger-ui-bundle.js", f"{root}/docs/swagger-ui.css", js_sri, css_sri)

    def response(self, name: str, if_none_match: str | None) -> Response:
        body, integrity = self.files[name]
        etag = f'"{integrity[7:47]}"'
        headers = {"ETag": etag, "Cache-Control": "no-cache", "X-Content-Type-Options": "nosniff"}
        if if_none_match is not None and etag in (tag.strip() for tag in if_none_match.split(",")):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type=TYPES[name], headers=headers)


PAGE = """<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>__TITLE__</title>
<link rel="stylesheet" href="__CSS__" integrity="__CSS_SRI__" crossorigin="anonymous">
<style>
  #tooldock-auth { font-family: sans-serif; margin: 1.5em 2em; }
  #tooldock-auth input { width: 24em; }
</style>
</head>
<body>
<form id="tooldock-auth" hidden>
  <p>This document needs the gateway's bearer token (<code>TOOLDOCK_BEARER_TOKEN</code>, or the one
  printed when the gateway started). It is kept in this tab only.</p>
  <label>Bearer token <input type="password" autocomplete="off" required></label>
  <button type="submit">Load</button>
  <p id="tooldock-note"></p>
</form>
<div id="swagger-ui"></div>
<script src="__JS__" integrity="__JS_SRI__" crossorigin="anonymous"></script>
<script>
(function () {
  var SPEC = __SPEC__;
  var KEY = "tooldock.bearer";
  var form = document.getElementById("tooldock-auth");
  var input = form.querySelector("input");
  var note = document.getElementById("tooldock-note");

  function token() { return window.sessionStorage.getItem(KEY); }

  function ask(message) {
    note.textContent = message || "";
    form.hidden = false;
    input.focus();
  }

  function start() {
    form.hidden = true;
    var ui = SwaggerUIBundle({
      url: SPEC,
      dom_id: "#swagger-ui",
      presets: [SwaggerUIBundle.presets.apis, SwaggerUIBundle.SwaggerUIStandalonePreset],
      layout: "BaseLayout",
      deepLinking: true,
      validatorUrl: null,
      requestInterceptor: function (req) {
        var t = token();
        if (req.loadSpec && t) { req.headers.Authorization = "Bearer " + t; }
        return req;
      },
      responseInterceptor: function (res) {
        if (res.status === 401 && res.url && res.url.split("?")[0].endsWith(SPEC)) {
          window.sessionStorage.removeItem(KEY);
          ask("The gateway refused that token (401).");
        }
        return res;
      },
      onComplete: function () {
        var t = token();
        if (t) { ui.preauthorizeApiKey("bearer", t); }
      }
    });
  }

  form.addEventListener("submit", function (event) {
    event.preventDefault();
    window.sessionStorage.setItem(KEY, input.value.trim());
    input.value = "";
    start();
  });
  if (token()) { start(); } else { ask(""); }
})();
</script>
</body>
</html>
"""


def docs_page(title: str, openapi_url: str, source: SwaggerSource = CDN) -> HTMLResponse:
    # The URL goes into a script as a JSON string; "<", ">" and "&" escaped so it cannot end the script.
    spec = json.dumps(openapi_url).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    html = (
        PAGE.replace("__TITLE__", title)
        .replace("__CSS_SRI__", source.css_sri)
        .replace("__JS_SRI__", source.js_sri)
        .replace("__CSS__", source.css)
        .replace("__JS__", source.js)
        .replace("__SPEC__", spec)
    )
    return HTMLResponse(
        html, headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}
    )


class DocsPages:
    """Answers `GET /docs` and `GET /ns/{namespace}/docs` (no token needed), and Swagger UI's files when
    `local` serves them; everything else goes on."""

    def __init__(self, app: ASGIApp, local: LocalSwagger | None = None) -> None:
        self.app, self.local = app, local

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            path, root = scope["path"], scope.get("root_path", "")
            page: Response | None = None
            if path == "/docs":
                page = docs_page("ToolDock API", f"{root}/openapi.json", self._source(root))
            elif (found := _NS_DOCS.match(path)) and NAMESPACE_RE.match(found.group(1)):
                namespace = found.group(1)
                spec = f"{root}/ns/{namespace}/openapi.json"
                page = docs_page(f"ToolDock namespace {namespace}", spec, self._source(root))
            elif self.local is not None and path.startswith("/docs/") and path[6:] in SWAGGER_FILES:
                etags = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"if-none-match"), None)
                page = self.local.response(path[6:], etags)
            if page is not None:
                await page(scope, receive, send)
                return
        await self.app(scope, receive, send)

    def _source(self, root: str) -> SwaggerSource:
        return self.local.source(root) if self.local is not None else CDN
