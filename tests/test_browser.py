"""The Swagger UI pages (`/docs`, `/ns/{namespace}/docs`) and CORS, in a real browser: Debian's Chromium,
headless, driven by Playwright.

The pages load one pinned release of Swagger UI from jsDelivr, with Subresource Integrity. Tests send no
traffic beyond loopback, so the browser gets those two files from the same release of the npm package
(pinned in tests/browser), answered as jsDelivr answers (CORS for `crossorigin`), and Chromium checks
their hashes; every other request to anything but loopback is refused and recorded: a test fails if the
page asked for one. The browser also resolves no host name but localhost (`--host-resolver-rules`).
With TOOLDOCK_SWAGGER_UI_DIR the gateway serves the files itself: there the browser reaches nothing
beyond loopback at all.
"""

from __future__ import annotations

import base64
import hashlib
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from conftest import EXAMPLES, Gateway, npm_install, require
from tooldock.runtime.http import docs

HERE = Path(__file__).resolve().parent
LOOPBACK = {"127.0.0.1", "localhost", "[::1]"}
TYPES = {".js": "text/javascript", ".css": "text/css"}


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium (Debian's `chromium`) that resolves no host name but localhost."""
    require("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # the test extra installs it
        pytest.fail("playwright is not installed: run ./scripts/test, which installs the test extra")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium"),
            args=["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1", "--no-sandbox"],
        )
        yield browser
        browser.close()


@pytest.fixture(scope="module")
def swagger_dist() -> Path:
    """swagger-ui-dist from the npm registry, as pinned in tests/browser."""
    return npm_install(HERE / "browser", "browser", "Swagger UI's assets", marker="swagger-ui-dist/package.json",
                       scripts=False) / "swagger-ui-dist"


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """examples/, with CORS for pages served from http://localhost (any port)."""
    tmp = tmp_path_factory.mktemp("browser")
    tools = tmp / "tools"
    shutil.copytree(EXAMPLES, tools, ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    gateway = Gateway(tools, tmp / "gateway.log", {"CORS_ORIGINS": "http://localhost:*"}).start()
    yield gateway
    gateway.stop()


class Page:
    """A fresh browser context and page whose requests beyond loopback are answered from `dist` (Swagger
    UI's two files, as jsDelivr would) or refused and kept in `refused` (all of them without `dist`)."""

    def __init__(self, browser: Any, dist: Path | None) -> None:
        self.refused: list[str] = []
        self.context = browser.new_context()
        self.context.route("**/*", lambda route: self._route(route, dist))
        self.page = self.context.new_page()

    def _route(self, route: Any, dist: Path | None) -> None:
        url = route.request.url
        if dist is not None and url.startswith(docs.SWAGGER_CDN):
            name = url[len(docs.SWAGGER_CDN) :].split("?")[0]
            if name in docs.SWAGGER_SRI:
                headers = {"Access-Control-Allow-Origin": "*"}  # jsDelivr's, which `crossorigin` needs
                route.fulfill(path=str(dist / name), content_type=TYPES[Path(name).suffix], headers=headers)
                return
        elif urlsplit(url).hostname in LOOPBACK or url.startswith(("data:", "blob:")):
            route.continue_()
            return
        self.refused.append(url)
        route.abort()

    def close(self) -> None:
        self.context.close()
        assert not self.refused, f"the page asked for addresses beyond loopback: {self.refused}"


@pytest.fixture
def page(browser: Any, swagger_dist: Path) -> Iterator[Any]:
    opened = Page(browser, swagger_dist)
    yield opened.page
    opened.close()


def try_it_out(operation: Any, body: str, **headers: str) -> tuple[str, str]:
    """Swagger UI's "Try it out" on an operation: open it, fill its header parameters and body, execute;
    the answer's status and body as the page shows them."""
    operation.locator(".opblock-summary").click()
    operation.locator("button.try-out__btn").click()
    for name, value in headers.items():
        operation.locator(f'tr[data-param-name="{name}"] input').fill(value)
    operation.locator("textarea.body-param__text").fill(body)
    operation.locator("button.execute").click()
    answer = operation.locator(".live-responses-table tbody")
    status = answer.locator(".response-col_status").first
    status.wait_for(state="visible", timeout=30_000)
    return status.inner_text().strip(), answer.locator(".response-col_description .microlight").first.inner_text()


def test_the_page_pins_the_release_tests_browser_installs_and_its_hashes(swagger_dist: Path) -> None:
    pinned = json.loads((HERE / "browser" / "package.json").read_text())["dependencies"]["swagger-ui-dist"]
    assert pinned == docs.SWAGGER_VERSION == json.loads((swagger_dist / "package.json").read_text())["version"]
    for name, integrity in docs.SWAGGER_SRI.items():
        digest = base64.b64encode(hashlib.sha384((swagger_dist / name).read_bytes()).digest()).decode()
        assert integrity == f"sha384-{digest}", f"{name}: update SWAGGER_SRI in tooldock/runtime/http/docs.py"


def test_a_file_that_is_not_the_pinned_one_does_not_run(gw: Gateway, browser: Any, swagger_dist: Path,
                                                         tmp_path: Path) -> None:
    """A CDN answering with other bytes (a compromised or changed file): Chromium refuses the script, so
    the page never runs Swagger UI, the code that would hold the token."""
    tampered = tmp_path / "swagger-ui-bundle.js"
    tampered.write_bytes((swagger_dist / "swagger-ui-bundle.js").read_bytes() + b"\nwindow.tampered = true;\n")
    shutil.copy(swagger_dist / "swagger-ui.css", tmp_path / "swagger-ui.css")
    opened = Page(browser, tmp_path)
    try:
        errors: list[str] = []
        opened.page.on("console", lambda message: errors.append(message.text))
        opened.page.goto(gw.url + "/docs")
        opened.page.wait_for_function("document.readyState === 'complete'")
        assert opened.page.evaluate("typeof window.SwaggerUIBundle") == "undefined"
        assert opened.page.evaluate("window.tampered") is None
        assert any("integrity" in e for e in errors), errors
    finally:
        opened.close()


def test_docs_page_asks_for_the_token_then_shows_and_runs_the_api(gw: Gateway, page: Any) -> None:
    page.goto(gw.url + "/docs")
    form = page.locator("#tooldock-auth")
    form.wait_for(state="visible")
    assert page.locator("#swagger-ui .opblock").count() == 0  # nothing shown before the token

    page.fill("#tooldock-auth input", "not-the-token")
    page.click("#tooldock-auth button")
    page.wait_for_function("document.getElementById('tooldock-note').textContent.includes('401')")
    assert "refused that token" in page.inner_text("#tooldock-note")
    assert page.evaluate("window.sessionStorage.getItem('tooldock.bearer')") is None

    page.fill("#tooldock-auth input", gw.token)
    page.click("#tooldock-auth button")
    call = page.locator(".opblock", has=page.locator(".opblock-summary-path", has_text="/tools/call"))
    call.first.wait_for(state="visible", timeout=30_000)
    assert form.is_hidden()
    assert "ToolDock" in page.inner_text(".info .title")

    # The token entered was handed to Swagger UI's Authorize dialog: "Try it out" sends it.
    status, body = try_it_out(call.first, '{"name": "add", "arguments": {"a": 2, "b": 3}}', **{"X-Namespace": "multi-tool"})
    assert status == "200", call.first.inner_text()
    assert '"result": 5' in body

    page.reload()  # the token is kept in the tab: no question the second time
    call.first.wait_for(state="visible", timeout=30_000)
    assert form.is_hidden()


def test_namespace_docs_page_shows_its_typed_tools_and_calls_one(gw: Gateway, page: Any) -> None:
    page.goto(gw.url + "/ns/multi-tool/docs")
    page.fill("#tooldock-auth input", gw.token)
    page.click("#tooldock-auth button")
    add = page.locator(".opblock", has=page.locator(".opblock-summary-path", has_text="/tools/add"))
    add.first.wait_for(state="visible", timeout=30_000)
    assert page.locator(".opblock-summary-path", has_text="/tools/multiply").count() == 1
    status, body = try_it_out(add.first, '{"a": 4, "b": 0.5}')
    assert status == "200", add.first.inner_text()
    assert "4.5" in body


# -- TOOLDOCK_SWAGGER_UI_DIR: the gateway serves Swagger UI itself ---------------------------------------

@pytest.fixture(scope="module")
def offline_gw(tmp_path_factory: pytest.TempPathFactory, swagger_dist: Path) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("offline")
    tools = tmp / "tools"
    shutil.copytree(EXAMPLES, tools, ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    gateway = Gateway(tools, tmp / "gateway.log", {"TOOLDOCK_SWAGGER_UI_DIR": str(swagger_dist)}).start()
    yield gateway
    gateway.stop()


def test_with_swagger_ui_dir_the_docs_work_with_no_way_beyond_loopback(offline_gw: Gateway, browser: Any,
                                                                      swagger_dist: Path) -> None:
    opened = Page(browser, None)  # nothing answers for jsDelivr: any request beyond loopback fails the test
    try:
        page = opened.page
        page.goto(offline_gw.url + "/ns/multi-tool/docs")
        page.fill("#tooldock-auth input", offline_gw.token)
        page.click("#tooldock-auth button")
        add = page.locator(".opblock", has=page.locator(".opblock-summary-path", has_text="/tools/add"))
        add.first.wait_for(state="visible", timeout=30_000)
        status, body = try_it_out(add.first, '{"a": 1, "b": 2}')
        assert status == "200", add.first.inner_text()
        assert "3" in body
    finally:
        opened.close()
    assert f"/docs serves Swagger UI {docs.SWAGGER_VERSION} from {swagger_dist}" in offline_gw.logs


def test_the_gateway_serves_swagger_ui_files_with_their_hash(offline_gw: Gateway, swagger_dist: Path) -> None:
    """The page names the gateway's copies with their own sha384; the files come with no token, their
    type, and an ETag a browser revalidates with (304); nothing else under /docs/ is served."""
    import httpx

    page = httpx.get(offline_gw.url + "/docs", timeout=30).text
    assert docs.SWAGGER_CDN not in page
    for name, kind in (("swagger-ui-bundle.js", "text/javascript"), ("swagger-ui.css", "text/css")):
        body = (swagger_dist / name).read_bytes()
        integrity = "sha384-" + base64.b64encode(hashlib.sha384(body).digest()).decode()
        assert f'"/docs/{name}" integrity="{integrity}"' in page
        got = httpx.get(f"{offline_gw.url}/docs/{name}", timeout=30)
        assert got.status_code == 200 and got.content == body and got.headers["content-type"].startswith(kind)
        again = httpx.get(f"{offline_gw.url}/docs/{name}", headers={"If-None-Match": got.headers["etag"]}, timeout=30)
        assert again.status_code == 304 and again.content == b""
    for other in ("package.json", "index.html", "swagger-ui-bundle.js.map"):
        assert httpx.get(f"{offline_gw.url}/docs/{other}", timeout=30).status_code == 401  # not served: auth's


# -- CORS ----------------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def origin_server() -> Iterator[int]:
    """An empty page on loopback, on a port of its own: the origin a cross-origin script runs in."""

    class Blank(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
            body = b"<!doctype html><title>origin</title>"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Blank)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


FETCH = """async ([url, token]) => {
  try {
    const reply = await fetch(url, {method: "POST", headers: {"Authorization": "Bearer " + token,
      "Content-Type": "application/json"}, body: JSON.stringify({a: 2, b: 3})});
    return {status: reply.status, body: await reply.text(), requestId: reply.headers.get("X-Request-Id")};
  } catch (error) {
    return {error: String(error)};
  }
}"""


def test_a_listed_origin_calls_a_tool_with_its_token(gw: Gateway, page: Any, origin_server: int) -> None:
    page.goto(f"http://localhost:{origin_server}/")  # CORS_ORIGINS lists http://localhost:*
    got = page.evaluate(FETCH, [gw.url + "/ns/multi-tool/tools/add", gw.token])
    assert got.get("status") == 200, got
    assert '"result":5' in got["body"].replace(" ", "")
    assert got["requestId"], "X-Request-Id is an exposed header: the page can read it"


def test_a_listed_origin_reads_why_it_was_refused(gw: Gateway, page: Any, origin_server: int) -> None:
    page.goto(f"http://localhost:{origin_server}/")
    got = page.evaluate(FETCH, [gw.url + "/ns/multi-tool/tools/add", "wrong-token"])
    assert got.get("status") == 401, got
    assert "bearer token" in got["body"]


def test_an_origin_not_listed_cannot_read_the_answer(gw: Gateway, page: Any, origin_server: int) -> None:
    page.goto(f"http://127.0.0.1:{origin_server}/")  # not http://localhost: not listed
    got = page.evaluate(FETCH, [gw.url + "/ns/multi-tool/tools/add", gw.token])
    assert "error" in got and "Failed to fetch" in got["error"], got


MCP = """async ([url, token]) => {
  const headers = {"Authorization": "Bearer " + token, "Content-Type": "application/json",
                   "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2025-11-25"};
  const post = (body) => fetch(url, {method: "POST", headers, body: JSON.stringify(body)});
  const init = await post({jsonrpc: "2.0", id: 1, method: "initialize", params: {protocolVersion: "2025-11-25",
    capabilities: {}, clientInfo: {name: "browser", version: "1"}}});
  const session = init.headers.get("Mcp-Session-Id");
  await init.text();
  headers["Mcp-Session-Id"] = session;
  await (await post({jsonrpc: "2.0", method: "notifications/initialized"})).text();
  const call = await post({jsonrpc: "2.0", id: 2, method: "tools/call",
                           params: {name: "add", arguments: {a: 2, b: 3}}});
  return {session, initStatus: init.status, status: call.status, body: await call.text()};
}"""


def test_a_browser_mcp_client_reads_its_session_id_and_calls_a_tool(gw: Gateway, page: Any, origin_server: int) -> None:
    """A page on a listed loopback origin (what MCP's Origin check accepts on a loopback bind) speaks MCP:
    Mcp-Session-Id is an exposed header, so the page can read it and send it back."""
    page.goto(f"http://localhost:{origin_server}/")
    got = page.evaluate(MCP, [gw.url + "/ns/multi-tool/mcp", gw.token])
    assert got["initStatus"] == 200 and got["session"], got
    assert got["status"] == 200, got
    assert '"structuredContent":{"result":5.0}' in got["body"].replace(" ", ""), got
