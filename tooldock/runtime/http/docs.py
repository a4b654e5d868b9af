"""Swagger UI for the REST API: `/docs` for the gateway's own document (`/openapi.json`), and
`/ns/{namespace}/docs` for a namespace's typed document (`/ns/{namespace}/openapi.json`).

The pages are plain ASGI in front of the bearer-token check, so they load without a token: they hold no
data, only Swagger UI, whose script and stylesheet the browser loads from a CDN (jsDelivr, the npm
package swagger-ui-dist, as FastAPI's own docs page does). The page handles the bearer token, so it
loads one pinned release with Subresource Integrity: a CDN serving anything else gets no page rather
than the token (tests/browser pins the same release; tests check the hashes against its files).
The OpenAPI documents themselves still
need the bearer token, as every endpoint but `/health` does, so the page asks for the token first, keeps
it in the tab's sessionStorage, sends it only when fetching the document, and pre-fills Swagger UI's
"Authorize" dialog with it (the documents declare the `bearer` HTTP scheme), which "Try it out" uses.
"""

from __future__ import annotations

import json
import re

from starlette.responses import HTMLResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from tooldock.namespace.names import NAMESPACE_RE

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


def docs_page(title: str, openapi_url: str) -> HTMLResponse:
    # The URL goes into a script as a JSON string; "<", ">" and "&" escaped so it cannot end the script.
    spec = json.dumps(openapi_url).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
    html = (
        PAGE.replace("__TITLE__", title)
        .replace("__CSS_SRI__", SWAGGER_SRI["swagger-ui.css"])
        .replace("__JS_SRI__", SWAGGER_SRI["swagger-ui-bundle.js"])
        .replace("__CSS__", SWAGGER_CSS)
        .replace("__JS__", SWAGGER_JS)
        .replace("__SPEC__", spec)
    )
    return HTMLResponse(
        html, headers={"Cache-Control": "no-store", "X-Frame-Options": "DENY", "Referrer-Policy": "no-referrer"}
    )


class DocsPages:
    """Answers `GET /docs` and `GET /ns/{namespace}/docs` (no token needed); everything else goes on."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] in ("GET", "HEAD"):
            path, root = scope["path"], scope.get("root_path", "")
            page = None
            if path == "/docs":
                page = docs_page("ToolDock API", f"{root}/openapi.json")
            elif (found := _NS_DOCS.match(path)) and NAMESPACE_RE.match(found.group(1)):
                namespace = found.group(1)
                page = docs_page(f"ToolDock namespace {namespace}", f"{root}/ns/{namespace}/openapi.json")
            if page is not None:
                await page(scope, receive, send)
                return
        await self.app(scope, receive, send)
