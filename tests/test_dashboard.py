"""The web dashboard at /ui/ (issue 60) in a real browser: Debian's Chromium, headless, driven by Playwright,
against one gateway serving a namespace with a tool per input-schema shape the form draws (`shapes`), a
small one (`ok`) and one whose worker dies on start (`crashy`, a crash loop).

Every page runs in a browser context whose requests to anything but loopback are refused and recorded: a
test fails if the page asked for one (the browser also resolves no host name but localhost).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest

from conftest import FIXTURES, Gateway, require
from tooldock.dashboard import CSP
from tooldock.dashboard.pages import STATIC
from tooldock.keys import KeyStore
from tooldock.secrets import SecretStore

LOOPBACK = {"127.0.0.1", "localhost", "[::1]"}
ROOT = Path(__file__).resolve().parent.parent
SHAPES = '''"""One tool per input-schema shape the dashboard's form draws, a failing one, an image, a Context tool."""

import asyncio
from typing import Annotated, Literal

from fastmcp import Context
from fastmcp.tools import tool
from fastmcp.utilities.types import Image
from pydantic import BaseModel, Field


class Address(BaseModel):
    street: str
    zip: int = Field(description="Postal code")


@tool(annotations={"readOnlyHint": True})
def greet(name: Annotated[str, Field(description="Who to greet")], times: int = 2, loud: bool = False) -> str:
    """Greet someone (read-only)."""
    text = " ".join([f"hello {name}"] * times)
    return text.upper() if loud else text


@tool
def scale(x: float, factor: float = 1.5) -> float:
    """Multiply a number."""
    return x * factor


@tool
def pick(color: Literal["red", "green", "blue"], size: Literal[1, 2, 3] = 2) -> str:
    """Choose from enums."""
    return f"{color}:{size}"


@tool
def ship(to: Address, express: bool = False) -> dict:
    """A nested object."""
    return {"label": f"{to.street} {to.zip}", "express": express}


@tool
def total(values: list[int], tags: list[str] = []) -> dict:
    """Arrays."""
    return {"sum": sum(values), "tags": tags}


@tool
def maybe(note: str | None = None, count: int | None = None) -> str:
    """Nullable fields."""
    return f"note={note!r} count={count!r}"


@tool
def either(value: int | list[str]) -> str:
    """A union the form does not draw: the JSON view."""
    return repr(value)


@tool
def fail(reason: str) -> str:
    """Always fails."""
    raise ValueError(f"failed on purpose: {reason}")


@tool
def dot() -> Image:
    """A one-pixel PNG."""
    return Image(data=bytes.fromhex(
        "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
        "1f15c4890000000d49444154789c63f8cfc0f01f0005000201a7f3b95b0000000049454e44ae426082"), format="png")


@tool
async def crawl(steps: int = 50, ctx: Context = None) -> str:
    """Report progress and a log line every step (0.2 s each)."""
    for step in range(steps):
        await ctx.report_progress(step + 1, steps, f"step {step + 1}")
        await ctx.info(f"working on step {step + 1}")
        await asyncio.sleep(0.2)
    return f"crawled {steps}"
'''
OK = '''from fastmcp.tools import tool


@tool(annotations={"readOnlyHint": True})
def ping() -> str:
    """Answer pong."""
    return "pong"


@tool
def wipe() -> str:
    """Pretend to delete everything (not read-only)."""
    return "wiped"
'''


DEMO = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'upstreams' / 'demo_server.py'))}"
UPSTREAM = f'''active_toolsets = ["demo_add"]

[[servers]]
namespace = "demo"
command = "{DEMO}"

[[servers]]
namespace = "gone"
command = "/nonexistent/upstream-server"
'''


class Dash:
    """The gateway, its key store and audit log folder."""

    def __init__(self, gateway: Gateway, keys: KeyStore, audit: Path, secrets: SecretStore) -> None:
        self.gateway, self.keys, self.audit, self.secrets = gateway, keys, audit, secrets
        self.url, self.token = gateway.url, gateway.token

    def audit_lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for f in sorted(self.audit.glob("*.jsonl")) for line in f.read_text().splitlines()]


@pytest.fixture(scope="module")
def dash(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dash]:
    tmp = tmp_path_factory.mktemp("dashboard")
    tools = tmp / "tools"
    for name, text in (("shapes", SHAPES), ("ok", OK)):
        (tools / name).mkdir(parents=True)
        (tools / name / "tools.py").write_text(text)
    (tools / "ok" / "tooldock.yaml").write_text("secrets: [API_TOKEN]\n")
    (tools / "up").mkdir()  # an upstream namespace: one server that runs, one that cannot start
    (tools / "up" / "tools.toml").write_text(UPSTREAM)
    shutil.copytree(FIXTURES / "crashy" / "crashy", tools / "crashy")
    SecretStore(tmp / "secrets", tmp / "age.key").init()
    env = {"TOOLDOCK_KEYS_DIR": str(tmp / "keys"), "TOOLDOCK_LOG_DIR": str(tmp / "audit"),
           "TOOLDOCK_RESTART_BACKOFF": "0.05", "TOOLDOCK_SECRETS_DIR": str(tmp / "secrets"),
           "TOOLDOCK_AGE_KEY_FILE": str(tmp / "age.key")}
    gateway = Gateway(tools, tmp / "gateway.log", env).start()
    gateway.wait_for(lambda: gateway.namespace("crashy")["state"] == "crash_loop", 60, "the crash loop")
    gateway.wait_for(lambda: gateway.namespace("up")["servers"][0]["state"] == "ready", 60, "the upstream server")
    yield Dash(gateway, KeyStore(tmp / "keys"), tmp / "audit", SecretStore(tmp / "secrets", tmp / "age.key"))
    gateway.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium (Debian's `chromium`) that resolves no host name but localhost."""
    require("chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # the test extra installs it
        if os.environ.get("CI") == "true":
            pytest.fail("playwright is not installed: run ./scripts/test, which installs the test extra")
        pytest.skip("playwright is not installed (the test extra has it)")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium"),
            args=["--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE localhost, EXCLUDE 127.0.0.1", "--no-sandbox"],
        )
        yield browser
        browser.close()


class Tab:
    """A fresh browser context (its own sessionStorage) whose requests beyond loopback are refused and kept."""

    def __init__(self, browser: Any, base: str) -> None:
        self.base, self.refused, self.errors = base, [], []
        self.context = browser.new_context()
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.set_default_timeout(20_000)
        self.page.on("pageerror", lambda error: self.errors.append(str(error)))
        self.page.on("console", lambda m: self.errors.append(m.text) if "Content Security Policy" in m.text else None)

    def _route(self, route: Any) -> None:
        url = route.request.url
        if urlsplit(url).hostname in LOOPBACK or url.startswith(("data:", "blob:")):
            route.continue_()
            return
        self.refused.append(url)
        route.abort()

    def open(self, path: str, token: str | None = None) -> Any:
        """Go to `path` (under /ui) and, with `token`, sign in on the form the page shows."""
        self.page.goto(self.base + "/ui" + path)
        if token is not None:
            self.page.get_by_label("Bearer token or API key").fill(token)
            self.page.get_by_role("button", name="Sign in").click()
            self.page.get_by_role("button", name="Sign out").wait_for()
        return self.page

    def close(self) -> None:
        self.context.close()
        assert not self.refused, f"the dashboard asked for addresses beyond loopback: {self.refused}"
        assert not self.errors, f"the page had script or CSP errors: {self.errors}"


@pytest.fixture
def tab(browser: Any, dash: Dash) -> Iterator[Tab]:
    opened = Tab(browser, dash.url)
    yield opened
    opened.close()


@pytest.fixture(scope="module")
def admin(browser: Any, dash: Dash) -> Iterator[Tab]:
    """One tab signed in with the bearer token, shared by the runner tests (each opens its tool's URL)."""
    opened = Tab(browser, dash.url)
    opened.open("/", dash.token)
    yield opened
    opened.close()


# -- served by the gateway ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ["/ui", "/ui/", "/ui/tools", "/ui/namespaces/shapes/tools/greet", "/ui/no/such/view"])
def test_every_ui_path_answers_the_app_without_a_token_and_with_the_csp(dash: Dash, path: str) -> None:
    reply = httpx.get(dash.url + path, timeout=30)
    assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/html")
    assert reply.headers["content-security-policy"] == CSP and CSP.startswith("default-src 'self';")
    assert '<script type="module" src="/ui/assets/app.js">' in reply.text
    assert "Authorization" not in reply.text and dash.token not in reply.text


def test_the_files_come_with_the_csp_their_type_and_an_etag(dash: Dash) -> None:
    for name, kind in (("app.js", "text/javascript"), ("style.css", "text/css"), ("icon.svg", "image/svg+xml")):
        reply = httpx.get(f"{dash.url}/ui/assets/{name}", timeout=30)
        assert reply.status_code == 200 and reply.content == (STATIC / name).read_bytes()
        assert reply.headers["content-type"].startswith(kind) and reply.headers["content-security-policy"] == CSP
        again = httpx.get(f"{dash.url}/ui/assets/{name}", headers={"If-None-Match": reply.headers["etag"]}, timeout=30)
        assert again.status_code == 304
    for outside in ("/ui/assets/../pages.py", "/ui/assets/%2e%2e/pages.py", "/ui/assets/index.html"):
        reply = httpx.get(dash.url + outside, timeout=30)
        assert "from __future__" not in reply.text and "__ROOT__" not in reply.text  # the app's page, or a 404
    assert httpx.get(f"{dash.url}/ui/assets/nothing.js", timeout=30).headers["content-security-policy"] == CSP
    assert httpx.post(f"{dash.url}/ui/", timeout=30).status_code == 405


def test_every_module_the_app_imports_ships_in_the_package() -> None:
    """Plain ES modules, no build step: each relative import names a file of static/, and nothing is
    loaded from elsewhere (no http: or // in an import, a src or a stylesheet)."""
    for script in STATIC.glob("*.js"):
        text = script.read_text()
        for target in re.findall(r'from "([^"]+)"', text):
            assert target.startswith("./") and (STATIC / target[2:]).is_file(), f"{script.name} imports {target}"
        assert not re.search(r"""(import|fetch)\(?\s*["'](https?:)?//""", text), script.name
    assert not re.search(r"https?://", (STATIC / "index.html").read_text() + (STATIC / "style.css").read_text())
    ignored = [p for p in STATIC.iterdir() if p.suffix in (".pyc",)]
    assert not ignored
    assert 'packages = ["tooldock"]' in (ROOT / "pyproject.toml").read_text()  # the wheel takes the whole folder


def test_the_keys_endpoints_are_in_the_gateways_openapi_and_the_reference(dash: Dash) -> None:
    doc = httpx.get(dash.url + "/openapi.json", headers={"Authorization": f"Bearer {dash.token}"}, timeout=30).json()
    assert {"get", "post"} <= set(doc["paths"]["/keys"]) and "delete" in doc["paths"]["/keys/{key_id}"]
    assert "get" in doc["paths"]["/whoami"]
    sys.path.insert(0, str(ROOT / "docs" / "_ext"))
    from tooldock_docs.parts_api import operations

    listed = {(method, path) for method, path, _ in operations()}
    assert {("GET", "/keys"), ("POST", "/keys"), ("DELETE", "/keys/{key_id}"), ("GET", "/whoami")} <= listed


# -- sign-in ------------------------------------------------------------------------------------------------

def test_a_wrong_token_is_refused_with_a_message_and_sign_in_returns_to_the_deep_link(tab: Tab, dash: Dash) -> None:
    page = tab.open("/namespaces/shapes/tools/greet")
    page.get_by_label("Bearer token or API key").fill("not-the-token")
    page.get_by_role("button", name="Sign in").click()
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert "refused this token (401)" in alert.inner_text() and "bearer token" in alert.inner_text()
    assert page.evaluate("window.sessionStorage.length") == 0
    page.get_by_label("Bearer token or API key").fill(dash.token)
    page.get_by_role("button", name="Sign in").click()
    page.get_by_role("heading", name="greet", exact=True).wait_for()
    assert page.url == dash.url + "/ui/namespaces/shapes/tools/greet"
    assert page.get_by_role("button", name="Run").is_visible()
    stored = page.evaluate("Object.values(window.sessionStorage)")
    assert stored == [dash.token]
    assert page.context.cookies() == []  # the token is never a cookie
    page.reload()  # kept in the tab: no question the second time
    page.get_by_role("heading", name="greet", exact=True).wait_for()


# -- overview and tools -------------------------------------------------------------------------------------

def test_the_overview_shows_each_state_and_the_reason_of_the_failing_one(admin: Tab, dash: Dash) -> None:
    page = admin.open("/")
    crashy = page.locator('tr[data-namespace="crashy"]')
    crashy.wait_for()
    assert crashy.get_attribute("data-status") == "crash_loop"
    assert "exited with code 3" in crashy.locator(".reason").inner_text()
    shapes = page.locator('tr[data-namespace="shapes"]')
    assert shapes.get_attribute("data-status") == "ready" and shapes.locator(".reason").inner_text() == ""
    pid = dash.gateway.namespace("shapes")["pid"]
    assert f"pid {pid}" in shapes.inner_text() and "10 tools" in shapes.inner_text()
    assert re.search(r"4 namespaces, 2 ready; generation \d+", page.inner_text("main"))


def test_tools_are_searched_by_text_and_regex_and_filtered_by_namespace(admin: Tab) -> None:
    page = admin.open("/tools")
    count = page.locator("#tool-count")
    count.wait_for()
    assert count.inner_text() == "19 of 19 tools in 3 namespaces"
    visible = lambda: [r.get_attribute("data-tool") for r in page.locator("tbody tr:visible").all()]  # noqa: E731
    page.get_by_label("Search tools").fill("GREET")
    assert visible() == ["greet"] and count.inner_text() == "1 of 19 tools in 3 namespaces"
    page.get_by_label("Regular expression").check()
    page.get_by_label("Search tools").fill(r"^shapes/(pick|ship)\b")
    assert visible() == ["pick", "ship"]
    page.get_by_label("Search tools").fill("(")
    assert "Not a valid regular expression" in page.get_by_role("alert").inner_text()
    page.get_by_label("Search tools").fill("")
    page.get_by_label("Namespace").select_option("ok")
    assert visible() == ["ping", "wipe"] and count.inner_text() == "2 of 19 tools in 3 namespaces"
    page.get_by_role("link", name="ping").click()
    page.get_by_role("heading", name="ping", exact=True).wait_for()
    assert page.url.endswith("/ui/namespaces/ok/tools/ping")


# -- running tools: one run per schema shape --------------------------------------------------------------

def until(page: Any, script: str, timeout: float = 20) -> Any:
    """Poll `script` in the page until it is truthy (wait_for_function evaluates a string, which the CSP
    forbids: no 'unsafe-eval')."""
    deadline = time.monotonic() + timeout
    while not (value := page.evaluate(script)):
        assert time.monotonic() < deadline, f"never true: {script}"
        time.sleep(0.05)
    return value


def run(page: Any) -> Any:
    """Press Run; the Result region once the call has ended."""
    page.get_by_role("button", name="Run").click()
    page.locator("section.result:not([data-status=running]):not([data-status=idle])").wait_for()
    return page.get_by_role("region", name="Result")


def test_strings_integers_booleans_defaults_and_help(admin: Tab) -> None:
    page = admin.open("/namespaces/shapes/tools/greet")
    name = page.get_by_label("name", exact=True)
    assert name.get_attribute("aria-describedby") and page.get_by_text("Who to greet").is_visible()
    assert page.locator(".field-string .req").inner_text() == "required"
    assert page.get_by_label("times", exact=True).input_value() == "2"  # the default
    page.get_by_role("button", name="Run").click()  # nothing sent: the required name is missing
    assert "name is required" in page.get_by_role("alert").inner_text()
    assert page.get_by_role("region", name="Result").get_attribute("data-status") == "idle"
    name.fill("Ada")
    page.get_by_label("times", exact=True).fill("3")
    page.get_by_label("loud", exact=True).check()
    result = run(page)
    assert result.get_attribute("data-status") == "ok"
    assert "HELLO ADA HELLO ADA HELLO ADA" in result.locator("pre.text").inner_text()
    assert re.search(r"Took \d+ ms", result.inner_text())


def test_numbers(admin: Tab) -> None:
    page = admin.open("/namespaces/shapes/tools/scale")
    page.get_by_label("x", exact=True).fill("2.5")
    assert page.get_by_label("factor", exact=True).input_value() == "1.5"
    assert json.loads(run(page).locator("pre.structured").inner_text()) == {"result": 3.75}


def test_enums_are_selects(admin: Tab) -> None:
    page = admin.open("/namespaces/shapes/tools/pick")
    color = page.get_by_label("color", exact=True)
    assert color.evaluate("e => e.tagName") == "SELECT"
    assert color.locator("option").all_inner_texts() == ["(not set)", "red", "green", "blue"]
    color.select_option(label="blue")
    page.get_by_label("size", exact=True).select_option(label="3")
    assert "blue:3" in run(page).inner_text()


def test_nested_objects(admin: Tab) -> None:
    page = admin.open("/namespaces/shapes/tools/ship")
    assert page.locator("fieldset.object legend").inner_text().startswith("to")
    page.get_by_label("street", exact=True).fill("Main St")
    page.get_by_label("zip", exact=True).fill("12345")
    assert page.get_by_text("Postal code").is_visible()
    structured = json.loads(run(page).locator("pre.structured").inner_text())
    assert structured == {"label": "Main St 12345", "express": False}


def test_arrays_with_add_and_remove(admin: Tab) -> None:
    page = admin.open("/namespaces/shapes/tools/total")
    for _ in range(3):
        page.get_by_role("button", name="Add to values").click()
    for index, value in enumerate(("1", "20", "300"), start=1):
        page.get_by_label(f"values {index}", exact=True).fill(value)
    page.get_by_role("button", name="Remove values 2").click()  # the rest renumbered: 1, 300
    assert page.get_by_label("values 2", exact=True).input_value() == "300"
    assert page.get_by_label("values 3", exact=True).count() == 0
    page.get_by_role("button", name="Add to tags").click()
    page.get_by_label("tags 1", exact=True).fill("x")
    assert json.loads(run(page).locator("pre.structured").inner_text()) == {"sum": 301, "tags": ["x"]}


def test_nullable_fields(admin: Tab) -> None:
    page = admin.open("/namespaces/shapes/tools/maybe")
    note_null = page.get_by_label("note is null", exact=True)
    assert note_null.is_checked() and page.get_by_label("count is null", exact=True).is_checked()  # default null
    note_null.uncheck()
    page.get_by_label("note", exact=True).fill("hi")
    assert "note='hi' count=None" in run(page).inner_text()


def test_a_schema_the_form_cannot_draw_falls_back_to_the_json_view(admin: Tab) -> None:
    page = admin.open("/namespaces/shapes/tools/either")
    assert "cannot show this tool's input (a choice between 2 shapes" in page.locator(".note").inner_text()
    assert page.get_by_role("button", name="Edit as JSON").count() == 0
    page.get_by_label("Arguments (JSON)").fill('{"value": ["a", "b"]}')
    assert "['a', 'b']" in run(page).inner_text()
    page.get_by_label("Arguments (JSON)").fill('{"value": ')
    run_button = page.get_by_role("button", name="Run")
    run_button.click()
    assert "not valid JSON" in page.get_by_role("alert").first.inner_text()


def test_the_json_view_round_trips_with_the_form(admin: Tab) -> None:
    page = admin.open("/namespaces/shapes/tools/ship")
    page.get_by_label("street", exact=True).fill("Elm")
    page.get_by_label("zip", exact=True).fill("7")
    page.get_by_role("button", name="Edit as JSON").click()
    arguments = page.get_by_label("Arguments (JSON)")
    assert json.loads(arguments.input_value()) == {"to": {"street": "Elm", "zip": 7}, "express": False}
    arguments.fill('{"to": {"street": "Oak", "zip": 9}, "express": true}')
    page.get_by_role("button", name="Edit as form").click()
    assert page.get_by_label("street", exact=True).input_value() == "Oak"
    assert page.get_by_label("zip", exact=True).input_value() == "9"
    assert page.get_by_label("express", exact=True).is_checked()
    assert json.loads(run(page).locator("pre.structured").inner_text()) == {"label": "Oak 9", "express": True}


def test_a_tool_error_is_told_apart_from_a_transport_error(admin: Tab) -> None:
    page = admin.open("/namespaces/shapes/tools/fail")
    page.get_by_label("reason", exact=True).fill("testing")
    result = run(page)
    assert result.get_attribute("data-status") == "tool-error"
    assert "Tool error" in result.get_by_role("alert").inner_text() and "failed on purpose: testing" in result.inner_text()
    page.route("**/ns/shapes/mcp", lambda route: route.fulfill(
        status=503, content_type="application/json",
        body='{"error": {"code": "namespace_unavailable", "message": "the worker is restarting"}}'))
    try:
        result = run(page)
    finally:
        page.unroute("**/ns/shapes/mcp")
    assert result.get_attribute("data-status") == "transport-error"
    assert "Transport error" in result.inner_text() and "HTTP 503: the worker is restarting" in result.inner_text()


def test_images_are_shown(admin: Tab) -> None:
    page = admin.open("/namespaces/shapes/tools/dot")
    image = run(page).get_by_role("img")
    assert image.get_attribute("src").startswith("data:image/png;base64,iVBOR")
    assert image.evaluate("img => img.complete && img.naturalWidth") == 1  # CSP let it load


def test_copy_as_curl_leaves_the_token_out_and_the_command_works(admin: Tab, dash: Dash) -> None:
    page = admin.open("/namespaces/shapes/tools/greet")
    page.get_by_label("name", exact=True).fill("Bo")
    page.get_by_role("button", name="Copy as curl").click()
    command = page.get_by_label("curl command").inner_text()
    assert dash.token not in command and '"Authorization: Bearer $TOOLDOCK_TOKEN"' in command
    assert f"'{dash.url}/ns/shapes/mcp'" in command and "'Mcp-Name: greet'" in command
    body = json.loads(re.search(r"-d '(.*)'$", command, re.S).group(1))
    headers = dict(h.split(": ", 1) for h in re.findall(r"-H '([^']+)'", command))
    reply = httpx.post(f"{dash.url}/ns/shapes/mcp", json=body, timeout=30,
                       headers={**headers, "Authorization": f"Bearer {dash.token}"})
    assert "hello Bo hello Bo" in reply.text


def test_a_context_tools_progress_and_log_lines_and_cancel(admin: Tab, dash: Dash) -> None:
    page = admin.open("/namespaces/shapes/tools/crawl")
    page.get_by_role("button", name="Run").click()
    progress = page.get_by_role("progressbar", name="Progress")
    until(page, "document.querySelector('progress').value >= 2")
    assert progress.get_attribute("max") == "50"
    assert page.get_by_role("list", name="Log").get_by_text("info: working on step 1", exact=True).is_visible()
    page.get_by_role("button", name="Cancel").click()
    result = page.get_by_role("region", name="Result")
    page.locator("section.result[data-status=cancelled]").wait_for()
    assert "Cancelled after" in result.inner_text()
    stopped = lambda: any(line.get("tool") == "crawl" and line["status"] == "cancelled"  # noqa: E731
                          for line in dash.audit_lines())
    dash.gateway.wait_for(stopped, 15, "the audit line of the cancelled call")
    page.get_by_label("steps", exact=True).fill("3")
    assert "crawled 3" in run(page).inner_text()
    assert page.locator("progress").evaluate("p => [p.value, p.max]") == [3, 3]
    assert page.get_by_role("list", name="Log").locator("li").count() == 3


# -- keys and scopes ----------------------------------------------------------------------------------------

def test_an_admin_creates_and_revokes_a_key(admin: Tab, dash: Dash) -> None:
    page = admin.open("/keys")
    page.get_by_label("Name", exact=True).fill("ci-reader")
    page.get_by_label("Scope").select_option("read")
    page.get_by_label("Namespaces (globs, comma-separated)").fill("shapes, ok")
    page.get_by_role("button", name="Create key").click()
    secret = page.get_by_label("New API key").input_value()
    assert secret.startswith("tdk_")
    (made,) = [k for k in dash.keys.list() if k.name == "ci-reader"]
    row = page.locator(f'tr[data-key="{made.id}"]')
    assert row.get_attribute("data-status") == "active" and "ok, shapes" in row.inner_text()
    whoami = httpx.get(dash.url + "/whoami", headers={"Authorization": f"Bearer {secret}"}, timeout=30).json()
    assert whoami["scope"] == "read" and whoami["admin"] is False
    page.reload()  # shown once: not again
    page.locator(f'tr[data-key="{made.id}"]').wait_for()
    assert secret not in page.content() and page.get_by_label("New API key").count() == 0
    page.get_by_role("button", name=f"Revoke key ci-reader ({made.id})").click()
    page.locator(f'tr[data-key="{made.id}"][data-status=revoked]').wait_for()
    refused = httpx.get(dash.url + "/whoami", headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    assert refused.status_code == 401
    dash.gateway.wait_for(lambda: {(line.get("method"), line.get("target")) for line in dash.audit_lines()}
                          >= {("keys/create", made.id), ("keys/revoke", made.id)}, 10, "the audit lines")
    assert secret not in dash.gateway.logs and all(secret not in json.dumps(line) for line in dash.audit_lines())


def test_a_read_scoped_key_sees_no_write_action(tab: Tab, dash: Dash) -> None:
    _, secret = dash.keys.create("viewer", "read")
    page = tab.open("/tools", secret)
    assert "API key viewer (read)" in page.locator("#who").inner_text()
    assert page.get_by_role("link", name="Keys").count() == 0
    page.locator("#tool-count").wait_for()
    tools = [r.get_attribute("data-tool") for r in page.locator("tbody tr").all()]
    assert sorted(tools) == ["greet", "ping"]  # the read-only ones: nothing that writes
    page = tab.open("/keys")
    page.get_by_text("Managing API keys takes the bearer token or an admin API key").wait_for()
    assert page.get_by_role("button", name="Create key").count() == 0 and page.get_by_role("button", name="Revoke").count() == 0
    for method, path in (("GET", "/keys"), ("POST", "/keys"), ("DELETE", "/keys/0123456789ab")):
        reply = httpx.request(method, dash.url + path, json={"name": "x", "scope": "admin"}, timeout=30,
                              headers={"Authorization": f"Bearer {secret}"})
        assert reply.status_code == 403 and "may not manage API keys" in reply.json()["error"]["message"]
    page = tab.open("/namespaces/ok/tools/wipe")  # a deep link to a tool it may not see
    assert "Cannot open this tool" in page.get_by_role("alert").inner_text()
    assert page.get_by_role("button", name="Run").count() == 0


def test_a_revoked_token_mid_session_goes_back_to_sign_in_with_the_reason(tab: Tab, dash: Dash) -> None:
    key, secret = dash.keys.create("short-lived", "admin")
    page = tab.open("/tools", secret)
    page.locator("#tool-count").wait_for()
    dash.keys.revoke(key.id)
    page.get_by_role("link", name="Overview").click()
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert "no longer accepts this token" in alert.inner_text() and "revoked" in alert.inner_text()
    assert page.get_by_label("Bearer token or API key").is_visible()
    assert page.evaluate("window.sessionStorage.length") == 0


def test_sign_in_and_a_run_work_from_the_keyboard(tab: Tab, dash: Dash) -> None:
    page = tab.open("/namespaces/shapes/tools/greet")
    page.get_by_label("Bearer token or API key").wait_for()
    page.keyboard.type(dash.token)  # the field has the focus
    page.keyboard.press("Enter")
    name = page.get_by_label("name", exact=True)
    name.wait_for()
    assert page.evaluate("document.activeElement.tagName") == "H1"  # the view's heading, for screen readers
    name.focus()
    page.keyboard.type("Kim")
    page.keyboard.press("Enter")  # submits the form: Run
    page.locator("section.result[data-status=ok]").wait_for()
    assert "hello Kim hello Kim" in page.get_by_role("region", name="Result").inner_text()
    for button in page.get_by_role("button").all():
        assert button.evaluate("b => b.textContent.trim() || b.getAttribute('aria-label')"), button


# -- activity, metrics, secrets, connect ------------------------------------------------------------------

def test_activity_lists_this_browsers_calls_replays_one_and_finds_it_in_the_audit_log(admin: Tab, dash: Dash) -> None:
    page = admin.open("/namespaces/shapes/tools/greet")
    page.get_by_label("name", exact=True).fill("Replayed")
    result = run(page)
    request_id = result.get_attribute("data-request-id")
    assert request_id and request_id.startswith("ui-")
    page.get_by_role("link", name="Activity").click()
    mine = page.get_by_role("table", name="This browser's calls")
    row = mine.locator("tbody tr").first
    assert "shapes / greet" in row.inner_text() and request_id in row.inner_text()
    page.get_by_label("Request id").fill(request_id)
    page.get_by_role("button", name="Filter").click()
    found = page.get_by_role("table", name="Audit log").locator(f'tr[data-request-id="{request_id}"]')
    found.wait_for()
    assert found.get_attribute("data-status") == "ok" and "greet" in found.inner_text()
    rows = page.get_by_role("table", name="Audit log").locator("tbody tr")
    deadline = time.monotonic() + 10  # the filtered answer replaces the unfiltered list (which may hold the row too)
    while rows.count() != 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert rows.count() == 1
    assert f"request_id={request_id}" in page.url  # the filter is in the address, to share
    with page.expect_download() as download:
        page.get_by_role("button", name="Download JSONL").click()
    lines = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines()]
    assert [line["request_id"] for line in lines] == [request_id] and lines[0]["tool"] == "greet"
    page.get_by_label("Request id").fill("")
    page.get_by_label("Tool").fill("ping")
    page.get_by_role("button", name="Filter").click()  # following: a call made elsewhere shows up
    fresh = dash.gateway.post("/tools/ping", "ok", {}, headers={"X-Request-Id": "followed-1"})
    assert fresh.status_code == 200
    page.locator('tr[data-request-id="followed-1"]').wait_for(timeout=10_000)
    page.get_by_role("button", name=re.compile(r"^Replay greet")).first.click()
    page.get_by_role("heading", name="greet", exact=True).wait_for()
    assert page.get_by_label("name", exact=True).input_value() == "Replayed"
    assert "hello Replayed" in run(page).inner_text()


def test_the_audit_endpoint_keeps_to_the_keys_scope_and_to_the_audit_folder(dash: Dash, tmp_path: Path) -> None:
    dash.gateway.post("/tools/wipe", "ok", {})
    dash.gateway.post("/tools/ping", "ok", {})
    outside = tmp_path / "outside.jsonl"
    outside.write_text(json.dumps({"time": "2999-01-01T00:00:00.000+00:00", "namespace": "ok", "tool": "leak"}) + "\n")
    (dash.audit / "2999-01-01.jsonl").symlink_to(outside)  # a link in the folder is not followed
    (dash.audit / "notes.jsonl").write_text(json.dumps({"namespace": "ok", "tool": "leak"}) + "\n")
    try:
        _, secret = dash.keys.create("audit-reader", "read", ("ok",))
        as_key = {"Authorization": f"Bearer {secret}"}
        dash.gateway.wait_for(lambda: any(line.get("tool") == "wipe" for line in dash.audit_lines()), 10, "the wipe line")
        everything = dash.gateway.get("/audit?limit=1000").json()["lines"]
        assert {"wipe", "ping", "greet"} <= {line.get("tool") for line in everything}
        assert all(line.get("tool") != "leak" for line in everything)
        seen = httpx.get(dash.url + "/audit?limit=1000", headers=as_key, timeout=30).json()["lines"]
        assert seen and {line["namespace"] for line in seen} == {"ok"}
        assert {line["tool"] for line in seen if "tool" in line} == {"ping"}  # wipe is not read-only: not its to see
        only = dash.gateway.get("/audit?namespace=ok&tool=ping&status=ok&limit=1").json()["lines"]
        assert len(only) == 1 and only[0]["tool"] == "ping"
        assert httpx.get(dash.url + "/audit?limit=5000", headers=as_key, timeout=30).status_code == 400
    finally:
        (dash.audit / "2999-01-01.jsonl").unlink()
        (dash.audit / "notes.jsonl").unlink()


def test_metrics_draw_calls_errors_and_latency_per_tool(admin: Tab, dash: Dash) -> None:
    failures = lambda: sum(line.get("tool") == "fail" for line in dash.audit_lines())  # noqa: E731
    time.sleep(0.3)  # the audit writer's lines of earlier calls are out
    before = failures()
    for _ in range(3):
        dash.gateway.post("/tools/fail", "shapes", {"reason": "metrics"})
    dash.gateway.wait_for(lambda: failures() == before + 3, 10, "3 more lines")
    stats = dash.gateway.get("/audit/stats?minutes=15&step=30").json()
    (fail,) = [s for s in stats["series"] if s["tool"] == "fail"]
    assert fail["calls"] >= 3 and fail["errors"] == fail["calls"]
    assert all(p["p50"] is not None and p["p95"] >= p["p50"] for p in fail["points"])
    page = admin.open("/metrics?minutes=15")
    row = page.locator('tr[data-series="shapes/fail"]')
    row.wait_for()
    assert row.locator("td").nth(1).inner_text() == str(fail["calls"])  # calls
    assert row.locator("td").nth(2).inner_text() == str(fail["errors"])  # errors
    charts = page.get_by_role("img")
    assert charts.count() == 4
    assert [c.get_attribute("aria-label").split(":")[0] for c in charts.all()] == ["Calls", "Errors", "Latency p50", "Latency p95"]
    assert page.locator("svg.chart").first.locator("polyline, circle").count() >= 1
    page.get_by_label("Window").select_option(label="Last hour")
    assert page.url.endswith("/ui/metrics?minutes=60")


def test_a_secret_is_set_and_never_shown_again(admin: Tab, dash: Dash) -> None:
    value = f"s3cr3t-{os.urandom(8).hex()}"
    page = admin.open("/secrets")
    bodies: list[Any] = []
    keep = lambda response: bodies.append(response)  # noqa: E731
    page.on("response", keep)
    row = page.locator('tr[data-secret="API_TOKEN"]')
    row.wait_for()
    assert row.get_attribute("data-status") == "missing" and "ok" in row.locator("td").nth(2).inner_text()
    page.get_by_role("button", name="Set API_TOKEN (ok)").click()
    assert page.get_by_label("Secret name").input_value() == "API_TOKEN" and page.get_by_label("Scope").input_value() == "ok"
    field = page.get_by_label("New value")
    assert field.get_attribute("type") == "password"
    field.fill(value)
    page.get_by_role("button", name="Save secret").click()
    page.get_by_role("status").filter(has_text="API_TOKEN is set (namespace ok)").wait_for()
    assert field.input_value() == ""
    page.locator('tr[data-secret="API_TOKEN"][data-scope="ok"][data-status="set"]').wait_for()
    assert dash.secrets.load_all()["namespaces"]["ok"]["API_TOKEN"] == value  # as `tooldock secrets set` stores it
    dash.gateway.wait_for(lambda: dash.gateway.namespace("ok").get("secrets_status") == "ok", 20, "the reload")
    read = lambda: [r.text() for r in bodies if r.request.resource_type in ("fetch", "xhr", "document")]  # noqa: E731
    texts = read()
    bodies.clear()
    page.reload()
    page.locator('tr[data-secret="API_TOKEN"][data-status="set"]').wait_for()
    page.remove_listener("response", keep)
    texts += read()
    assert len(texts) >= 4 and all(value not in text for text in texts)
    assert value not in page.content() and value not in dash.gateway.logs
    assert all(value not in json.dumps(line) for line in dash.audit_lines())
    assert any(line.get("method") == "secrets/set" and line["target"] == "API_TOKEN (ok)" for line in dash.audit_lines())
    for bad in ({"value": 5}, {"value": ""}, ["x"]):  # a wrong body is refused without echoing it
        reply = httpx.put(dash.url + "/secrets/API_TOKEN", json=bad, headers=dash.gateway.headers(), timeout=30)
        assert reply.status_code == 400 and "5" not in reply.json()["error"]["message"]


def test_a_read_scoped_key_sees_no_write_action_on_the_new_views(tab: Tab, dash: Dash) -> None:
    _, secret = dash.keys.create("viewer2", "read")
    page = tab.open("/secrets", secret)
    page.locator('tr[data-secret="API_TOKEN"]').first.wait_for()
    assert page.get_by_role("button", name="Save secret").count() == 0 and page.get_by_label("New value").count() == 0
    assert page.get_by_role("button", name=re.compile("^Set |^Rotate")).count() == 0
    reply = httpx.put(dash.url + "/secrets/API_TOKEN", json={"value": "nope-123"}, timeout=30,
                      headers={"Authorization": f"Bearer {secret}"})
    assert reply.status_code == 403 and "may not set secrets" in reply.json()["error"]["message"]
    for path in ("/activity", "/metrics", "/connect/shapes"):
        page = tab.open(path)
        page.locator("h1").wait_for()
        writes = page.get_by_role("button", name=re.compile("Create|Revoke|Save|Set|Rotate|Delete|Remove"))
        assert writes.count() == 0, path
    lines = httpx.get(dash.url + "/audit?limit=1000", headers={"Authorization": f"Bearer {secret}"}, timeout=30).json()
    assert all(line.get("tool") in ("greet", "ping") for line in lines["lines"])  # no key or secret changes, no writes


def test_connect_gives_each_client_this_gateways_url_and_no_token(admin: Tab, dash: Dash) -> None:
    from tooldock.cli.install import entry_for

    page = admin.open("/connect/shapes")
    url = f"{dash.url}/ns/shapes/mcp"
    text = {c: page.locator(f'pre[data-client="{c}"]').inner_text()
            for c in ("Claude Desktop", "Cursor", "VS Code", "LiteLLM", "Open WebUI", "curl")}
    assert json.loads(text["Cursor"])["mcpServers"]["tooldock-shapes"] == entry_for("cursor", url, "TOOLDOCK_BEARER_TOKEN")[1]
    vscode = json.loads(text["VS Code"])
    assert vscode["servers"]["tooldock-shapes"] == entry_for("vscode", url, "TOOLDOCK_BEARER_TOKEN")[1]
    desktop = json.loads(text["Claude Desktop"])["mcpServers"]["tooldock-shapes"]
    assert desktop["args"] == ["-y", "mcp-remote", url, "--header", "Authorization:${TOOLDOCK_AUTHORIZATION}"]
    assert f'url: "{url}"' in text["LiteLLM"] and url in text["Open WebUI"]
    assert all(dash.token not in t for t in text.values()) and dash.token not in page.content()
    command = text["curl"].replace("$TOOLDOCK_BEARER_TOKEN", dash.token)
    import subprocess

    listed = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=30).stdout
    assert '"greet"' in listed  # the command works
    page.get_by_label("Namespace").select_option("ok")
    page.locator('pre[data-client="Cursor"]').filter(has_text="/ns/ok/mcp").wait_for()
    assert page.url.endswith("/ui/connect/ok")


# -- accessibility and screenshots ---------------------------------------------------------------------------

AXE = ROOT / "tests" / "vendor" / "axe-core-4.14.1.min.js"  # npm axe-core 4.14.1's axe.min.js, test-only
AXE_SHA256 = "29348999450cdf2849a8e70b7912fc2da85a849da39c0d0d5394f51d4a9ed95c"
SHOTS = ROOT / "docs" / "_static" / "dashboard"
PAGES = {  # page -> (its address, what shows it has loaded)
    "sign-in": ("/", "form.signin"),
    "overview": ("/", 'tr[data-namespace="crashy"]'),
    "tools": ("/tools", "#tool-count"),
    "runner": ("/namespaces/shapes/tools/ship", "fieldset.object"),
    "activity": ("/activity", "#audit-count"),
    "metrics": ("/metrics", "svg.chart"),
    "secrets": ("/secrets", "#secrets-summary:not(:empty)"),
    "connect": ("/connect/shapes", 'pre[data-client="curl"]'),
    "keys": ("/keys", "form.new-key"),
    "upstream": ("/upstream", "ul.switches"),
}


def test_the_vendored_axe_core_is_the_pinned_one() -> None:
    import hashlib

    assert hashlib.sha256(AXE.read_bytes()).hexdigest() == AXE_SHA256
    assert AXE.read_text()[:40].startswith("/*! axe v4.14.1")


@pytest.mark.parametrize("name", list(PAGES))
def test_every_page_has_no_serious_accessibility_violation(browser: Any, admin: Tab, dash: Dash, name: str) -> None:
    """axe-core (pinned, injected by the test: the page's CSP stays as served) on each page; with
    TOOLDOCK_DASHBOARD_SCREENSHOTS=1 the page is also saved for the docs (docs/_static/dashboard/)."""
    path, ready = PAGES[name]
    signed_out = Tab(browser, dash.url) if name == "sign-in" else None
    try:
        page = signed_out.open(path) if signed_out is not None else admin.open(path)
        page.set_viewport_size({"width": 1280, "height": 800})
        page.locator(ready).first.wait_for()
        page.evaluate(AXE.read_text())
        found = page.evaluate("axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map("
                              "v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))")
        serious = [v for v in found if v["impact"] in ("serious", "critical")]
        assert not serious, f"{name}: {serious}"
        if name == "sign-in":  # the check sees what it must: a button without a name is critical
            page.evaluate("document.querySelector('form.signin').append(document.createElement('button'))")
            broken = page.evaluate("axe.run(document).then(r => r.violations.map(v => v.id + ':' + v.impact))")
            assert "button-name:critical" in broken
            page.reload()
        if os.environ.get("TOOLDOCK_DASHBOARD_SCREENSHOTS") == "1":
            SHOTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(SHOTS / f"{name}.png"), animations="disabled", caret="hide")
    finally:
        if signed_out is not None:
            signed_out.close()


def test_upstream_servers_state_and_error_and_the_catalog_as_switches(admin: Tab, dash: Dash, tab: Tab) -> None:
    page = admin.open("/upstream")
    section = page.locator('section[data-namespace="up"]')
    section.locator("ul.switches").wait_for()
    assert section.locator('tr[data-server="demo"]').get_attribute("data-status") == "ready"
    gone = section.locator('tr[data-server="gone"]')
    assert gone.get_attribute("data-status") in ("failed", "starting")
    dash.gateway.wait_for(lambda: dash.gateway.namespace("up")["servers"][1]["last_error"], 30, "the server's error")
    page.locator('tr[data-server="gone"] td.reason:not(:empty)').wait_for()
    assert "command not found" in page.locator('tr[data-server="gone"] td.reason').inner_text()
    add, wordy = page.get_by_role("switch", name="demo_add", exact=True), page.get_by_role("switch", name="demo_wordy")
    assert add.is_checked() and not wordy.is_checked()
    wordy.check()
    page.get_by_role("status").filter(has_text="demo_wordy is on").wait_for()
    listed = lambda: {t["name"] for t in mcp_list(dash, "up")}  # noqa: E731
    assert "demo_wordy" in listed()  # what a stateless client now sees
    page.reload()
    page.get_by_role("switch", name="demo_wordy").wait_for()
    assert page.get_by_role("switch", name="demo_wordy").is_checked()
    page.get_by_role("switch", name="demo_wordy").uncheck()
    page.get_by_role("status").filter(has_text="demo_wordy is off").wait_for()
    assert "demo_wordy" not in listed()
    _, secret = dash.keys.create("upstream-viewer", "read")
    page = tab.open("/upstream", secret)
    page.get_by_text("takes a key that may call toolman_activate").wait_for()
    assert page.get_by_role("switch").count() == 0 and page.locator('tr[data-server="demo"]').count() == 1


def mcp_list(dash: Dash, namespace: str) -> list[dict[str, Any]]:
    """tools/list as a stateless (2026-07-28) client sends it."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    reply = httpx.post(f"{dash.url}/ns/{namespace}/mcp", timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": meta}},
        headers={**dash.gateway.headers(), "Accept": "application/json, text/event-stream",
                 "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/list"})
    text = reply.text
    data = json.loads(text[text.index("{"):].splitlines()[0]) if text.startswith("event") or text.startswith("data") else reply.json()
    return data["result"]["tools"]
