"""The dashboard's runner beyond the form (issue 60): a tool's questions answered in dialogs (elicitation
accepted and declined, sampling approved and rejected), the full input-schema check before sending with
messages next to the fields, and the output-schema check of results; the tools page's filters; the
overview's upstream health, last swap and secrets. Same set-up as tests/test_dashboard.py (Debian's
Chromium driven by Playwright, every request beyond loopback refused), with a gateway of its own.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import FIXTURES, Gateway
from test_dashboard import AXE, SHOTS, Tab, browser, run  # noqa: F401 (browser: the module's Chromium fixture)

from tooldock.keys import KeyStore
from tooldock.secrets import SecretStore

ASKS = '''"""Tools that ask the person running them, and tools whose schemas the runner checks."""

from typing import Annotated, Literal

from fastmcp import Context
from fastmcp.tools import tool
from mcp.types import SamplingMessage, TextContent
from pydantic import Field


@tool
async def book(city: str, ctx: Context) -> str:
    """Ask who travels (elicitation)."""
    answer = await ctx.elicit(f"Who is travelling to {city}?", str)
    if answer.action != "accept":
        return f"no booking ({answer.action})"
    return f"{answer.data} goes to {city}"


@tool
async def suggest(city: str, ctx: Context) -> str:
    """Ask the model for a sight (sampling)."""
    sampled = await ctx.session.create_message(
        messages=[SamplingMessage(role="user", content=TextContent(type="text", text=f"One sight in {city}?"))],
        max_tokens=20, related_request_id=ctx.request_id)
    return f"sight: {sampled.content.text}"


@tool(annotations={"idempotentHint": True})
def bounded(
    count: Annotated[int, Field(ge=1, le=10, multiple_of=2)],
    code: Annotated[str, Field(pattern="^[A-Z]{3}$", description="Three capitals")],
    ratio: Annotated[float, Field(gt=0, lt=1)] = 0.5,
    name: Annotated[str, Field(min_length=2, max_length=5)] = "abc",
    tags: Annotated[list[str], Field(min_length=1, max_length=3, json_schema_extra={"uniqueItems": True})] = ["a"],
    level: Literal["low", "high"] = "low",
) -> str:
    """Every bound the form can check."""
    return f"{count} {code} {ratio} {name} {tags} {level}"


@tool(output_schema={"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]})
def liar(honest: bool = False) -> dict:
    """Structured content that breaks its own output schema unless honest."""
    return {"count": 3} if honest else {"count": "many"}


@tool(annotations={"destructiveHint": True, "openWorldHint": True})
def purge() -> str:
    """Destructive and open-world."""
    return "purged"
'''


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    tmp = tmp_path_factory.mktemp("dashboard-runner")
    tools = tmp / "tools"
    (tools / "asks").mkdir(parents=True)
    (tools / "asks" / "tools.py").write_text(ASKS)
    (tools / "asks" / "tooldock.yaml").write_text("secrets: [ASKS_TOKEN]\n")
    (tools / "asks" / "broken.py").write_text("import not_a_module_anywhere\n")  # a problem the scan reports
    demo = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'upstreams' / 'demo_server.py'))}"
    (tools / "up").mkdir()
    (tools / "up" / "tools.toml").write_text(f'active_toolsets = ["demo_add"]\n\n[[servers]]\nnamespace = "demo"\n'
                                              f'command = "{demo}"\n')
    SecretStore(tmp / "secrets", tmp / "age.key").init()
    env = {"TOOLDOCK_KEYS_DIR": str(tmp / "keys"), "TOOLDOCK_SECRETS_DIR": str(tmp / "secrets"),
           "TOOLDOCK_AGE_KEY_FILE": str(tmp / "age.key")}
    gw = Gateway(tools, tmp / "gateway.log", env).start()
    gw.keys_dir = tmp / "keys"  # type: ignore[attr-defined]
    gw.wait_for(lambda: gw.namespace("up")["servers"][0]["state"] == "ready", 60, "the upstream server")
    yield gw
    gw.stop()


@pytest.fixture(scope="module")
def admin(browser: Any, gateway: Gateway) -> Iterator[Tab]:  # noqa: F811
    opened = Tab(browser, gateway.url)
    opened.open("/", gateway.token)
    yield opened
    opened.close()


def dialog(page: Any, kind: str) -> Any:
    found = page.locator(f"dialog[data-kind={kind}]")
    found.wait_for()
    return found


# -- elicitation and sampling -------------------------------------------------------------------------------

def test_an_elicitation_is_answered_in_its_dialog(admin: Tab) -> None:
    """Over an MCP session: the question is answered on the call's stream, and the tool runs once."""
    page = admin.open("/namespaces/asks/tools/book")
    sent: list[str] = []

    def record(request: Any) -> None:
        if request.method == "POST" and request.url.endswith("/ns/asks/mcp"):
            sent.append(json.loads(request.post_data).get("method", "response"))

    page.on("request", record)
    page.get_by_label("city", exact=True).fill("Lisbon")
    page.get_by_role("button", name="Run").click()
    asked = page.get_by_role("dialog", name="The tool asks for input")
    asked.wait_for()
    assert "Who is travelling to Lisbon?" in asked.inner_text()
    assert page.evaluate("document.activeElement.closest('dialog') !== null")  # focus is in the dialog
    asked.get_by_role("button", name="Accept").click()  # the requested field is required
    assert "value is required" in asked.get_by_role("alert").inner_text()
    asked.get_by_label("value", exact=True).fill("Ada")
    asked.get_by_role("button", name="Accept").click()
    result = page.locator("section.result[data-status=ok]")
    result.wait_for()
    assert "Ada goes to Lisbon" in result.inner_text()
    page.remove_listener("request", record)
    assert sent == ["initialize", "notifications/initialized", "logging/setLevel", "tools/call", "response"]
    assert page.locator("dialog").count() == 0
    assert page.evaluate("document.activeElement.textContent") == "Run"  # focus back where it was


def test_an_elicitation_declined_with_escape_and_one_cancelled(admin: Tab) -> None:
    page = admin.open("/namespaces/asks/tools/book")
    page.get_by_label("city", exact=True).fill("Porto")
    page.get_by_role("button", name="Run").click()
    dialog(page, "elicitation")
    page.keyboard.press("Escape")
    page.locator("section.result[data-status=ok]").wait_for()
    assert "no booking (decline)" in page.get_by_role("region", name="Result").inner_text()
    page.get_by_role("button", name="Run").click()
    dialog(page, "elicitation").get_by_role("button", name="Cancel").click()
    page.get_by_role("region", name="Result").get_by_text("no booking (cancel)", exact=True).wait_for()


def test_sampling_is_approved_with_a_reply_or_rejected(admin: Tab) -> None:
    page = admin.open("/namespaces/asks/tools/suggest")
    page.get_by_label("city", exact=True).fill("Rome")
    page.get_by_role("button", name="Run").click()
    asked = page.get_by_role("dialog", name="The tool asks for a model's reply (sampling)")
    asked.wait_for()
    assert "user: One sight in Rome?" in asked.get_by_role("list", name="Messages").inner_text()
    asked.get_by_role("button", name="Approve").click()  # an empty reply is not sent
    assert "Write the reply" in asked.get_by_role("alert").inner_text()
    asked.get_by_label("Reply", exact=True).fill("the Pantheon")
    asked.get_by_role("button", name="Approve").click()
    page.locator("section.result[data-status=ok]").wait_for()
    assert "sight: the Pantheon" in page.get_by_role("region", name="Result").inner_text()
    page.get_by_role("button", name="Run").click()
    dialog(page, "sampling").get_by_role("button", name="Reject").click()
    page.locator("section.result[data-status=tool-error]").wait_for()  # the tool got the refusal as an error
    result = page.get_by_role("region", name="Result").inner_text()
    assert "You rejected the tool's sampling request." in result and "null" not in result
    assert not page.get_by_role("button", name="Run").is_disabled()


def test_without_a_session_the_questions_go_through_input_required_rounds(admin: Tab) -> None:
    """The fallback when the gateway opens no session (mcp.js over 2026-07-28): the tool's question comes back
    as input_required, is answered, and the call is sent again with the answer and the requestState."""
    page = admin.open("/tools")
    got = page.evaluate("""async () => {
        const { callTool } = await import("/ui/assets/mcp.js");
        const asked = [];
        const onAsk = async (requests) => {
            asked.push(...Object.values(requests).map((r) => r.method));
            return Object.fromEntries(Object.keys(requests).map((k) => [k, { action: "accept", content: { value: "Ada" } }]));
        };
        const result = await callTool("asks", "book", { city: "Bergen" }, { onAsk });
        const plain = await callTool("asks", "book", { city: "Bergen" }, {}).catch((error) => error.message);
        return { asked, text: result.content[0].text, plain };
    }""")
    assert got["asked"] == ["elicitation/create"] and got["text"] == "Ada goes to Bergen"
    assert "did not declare the elicitation capability" in got["plain"]  # no onAsk: nothing declared


# -- the schema checks -------------------------------------------------------------------------------------

def test_the_arguments_are_checked_against_the_input_schema_before_sending(admin: Tab) -> None:
    page = admin.open("/namespaces/asks/tools/bounded")
    page.get_by_label("count", exact=True).fill("3")
    page.get_by_label("code", exact=True).fill("abc")
    page.get_by_label("ratio", exact=True).fill("1")
    page.get_by_label("name", exact=True).fill("toolong")
    page.get_by_role("button", name="Run").click()
    summary = page.get_by_role("alert").inner_text()
    for expected in ("count must be a multiple of 2", "code must match the pattern ^[A-Z]{3}$",
                     "ratio must be less than 1", "name must be at most 5 characters long"):
        assert expected in summary
    assert page.locator("section.result").get_attribute("data-status") == "idle"  # nothing was sent
    code = page.get_by_label("code", exact=True)
    assert code.get_attribute("aria-invalid") == "true"
    described = code.get_attribute("aria-describedby").split()
    assert any("must match the pattern" in page.locator(f"#{i}").inner_text() for i in described)
    page.get_by_label("count", exact=True).fill("12")
    page.get_by_label("code", exact=True).fill("ABC")
    page.get_by_label("ratio", exact=True).fill("0.25")
    page.get_by_label("name", exact=True).fill("ok")
    page.get_by_role("button", name="Run").click()
    assert page.get_by_role("alert").inner_text() == "Check the arguments: count must be at most 10."
    assert page.locator(".field-error").all_inner_texts() == ["count must be at most 10"]
    page.get_by_label("count", exact=True).fill("4")
    page.get_by_role("button", name="Add to tags").click()
    page.get_by_label("tags 2", exact=True).fill("a")
    page.get_by_role("button", name="Run").click()
    assert "tags.1 repeats an earlier item" in page.get_by_role("alert").inner_text()
    page.get_by_label("tags 2", exact=True).fill("b")
    assert "4 ABC 0.25 ok ['a', 'b'] low" in run(page).inner_text()
    assert page.locator(".field-error").count() == 0
    page.get_by_role("button", name="Edit as JSON").click()  # the JSON view is checked too
    page.get_by_label("Arguments (JSON)").fill(json.dumps({"count": 4, "code": "ABC", "level": "mid"}))
    page.get_by_role("button", name="Run").click()
    assert page.get_by_role("alert").inner_text() == 'Check the arguments: level must be one of "low", "high".'


CASES = [  # (schema, value, the messages validate.js gives)
    ({"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}, {"a": "x", "b": 1},
     ["b is not a known field (no other fields are allowed)"]),
    ({"type": "object", "required": ["a"], "properties": {"a": {"type": "integer"}}}, {}, ["a is required"]),
    ({"type": "integer"}, 1.5, ["the value must be a whole number"]),
    ({"type": ["string", "null"]}, None, []),
    ({"type": "string", "nullable": True}, None, []),
    ({"const": "x"}, "y", ['the value must be "x"']),
    ({"enum": [1, {"a": [1, 2]}]}, {"a": [1, 2]}, []),
    ({"type": "number", "minimum": 2, "exclusiveMaximum": 5}, 5, ["the value must be less than 5"]),
    ({"type": "number", "minimum": 2}, 1, ["the value must be at least 2"]),
    ({"type": "number", "maximum": 3, "exclusiveMaximum": True}, 3, ["the value must be less than 3"]),
    ({"type": "number", "multipleOf": 0.1}, 0.3, []),
    ({"type": "string", "minLength": 2}, "\U0001F600", ["the value must be at least 2 characters long"]),
    ({"type": "array", "items": {"type": "integer"}, "minItems": 2, "uniqueItems": True}, [1, 1],
     ["1 repeats an earlier item (the items must be unique)"]),
    ({"type": "array", "maxItems": 1}, [1, 2], ["the value must have at most 1 items"]),
    ({"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "string"}}]}, ["a"], []),
    ({"anyOf": [{"type": "integer"}, {"type": "array", "items": {"type": "string"}}]}, [1],
     ["the value matches none of the 2 allowed shapes"]),
    ({"oneOf": [{"type": "number"}, {"type": "integer"}]}, 2,
     ["the value matches 2 of the allowed shapes (oneOf wants exactly one)"]),
    ({"$defs": {"P": {"type": "object", "properties": {"z": {"type": "integer", "maximum": 9}}}},
      "type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}}, {"p": {"z": 10}}, ["p.z must be at most 9"]),
]


def test_the_validator_knows_each_keyword(admin: Tab) -> None:
    page = admin.open("/tools")
    got = page.evaluate("""async (cases) => {
        const { validate } = await import("/ui/assets/validate.js");
        return cases.map(([schema, value]) => validate(value, schema).map((p) => p.message));
    }""", [[schema, value] for schema, value, _ in CASES])
    assert got == [expected for _, _, expected in CASES]


def test_structured_content_is_checked_against_the_output_schema(admin: Tab) -> None:
    page = admin.open("/namespaces/asks/tools/liar")
    result = run(page)
    assert result.get_attribute("data-status") == "ok" and result.get_attribute("data-output-check") == "mismatch"
    warning = result.locator(".warning")
    assert "does not match the tool's output schema" in warning.inner_text()
    assert "count must be a whole number" in warning.inner_text()
    page.get_by_label("honest", exact=True).check()
    result = run(page)
    assert result.get_attribute("data-output-check") == "ok" and result.locator(".warning").count() == 0


# -- the tools page's filters ------------------------------------------------------------------------------

def test_tools_are_filtered_by_annotation_source_and_activity_and_the_filters_are_in_the_url(admin: Tab) -> None:
    page = admin.open("/tools?annotation=destructive")
    count = page.locator("#tool-count")
    count.wait_for()
    visible = lambda: sorted(r.get_attribute("data-tool") for r in page.locator("tbody tr:visible").all())  # noqa: E731
    assert visible() == ["purge"] and count.inner_text() == "1 of 12 tools in 2 namespaces"
    annotation = page.get_by_label("Annotation", exact=True)
    assert annotation.input_value() == "destructive"
    options = annotation.locator("option").all_inner_texts()
    assert "idempotent (1)" in options and "open world (1)" in options
    annotation.select_option("")
    page.get_by_label("Source", exact=True).select_option("upstream")
    page.get_by_label("Active", exact=True).select_option("no")
    inactive = ["demo_fail", "demo_favourite", "demo_getenv", "demo_muse", "demo_slow", "demo_wordy"]
    assert visible() == inactive and count.inner_text() == "6 of 12 tools in 2 namespaces"
    assert page.url.endswith("/ui/tools?source=upstream&active=no")
    assert "not active (6)" in page.get_by_label("Active", exact=True).locator("option").all_inner_texts()
    page.reload()  # bookmarkable: the same view again
    count.wait_for()
    assert visible() == inactive and page.get_by_label("Source", exact=True).input_value() == "upstream"
    page.get_by_label("Active", exact=True).select_option("yes")
    assert visible() == ["demo_add"]
    page.get_by_label("Source", exact=True).select_option("local")
    page.get_by_label("Active", exact=True).select_option("")
    page.get_by_label("Search tools").fill("^asks/b")
    page.get_by_label("Regular expression").check()
    assert visible() == ["book", "bounded"]
    assert page.url.endswith("/ui/tools?q=%5Easks%2Fb&re=1&source=local")


# -- the overview ------------------------------------------------------------------------------------------

def test_the_overview_shows_workers_secrets_servers_problems_and_follows_a_change_live(
    admin: Tab, gateway: Gateway
) -> None:
    page = admin.open("/")
    asks = page.locator('tr[data-namespace="asks"]')
    asks.wait_for()
    assert asks.get_attribute("data-status") == "ready"
    assert f"pid {gateway.namespace('asks')['pid']}" in asks.locator("td.worker").inner_text()
    assert asks.locator("td.secrets").inner_text() == "missing: ASKS_TOKEN"
    assert "broken.py" in asks.inner_text() and "no @tool function" in asks.inner_text()
    first = gateway.namespace("asks")["pid"]
    generation = int(httpx.get(gateway.url + "/health", timeout=30).json()["generation"])
    assert f"generation {generation}" in asks.locator("td.since").inner_text()
    up = page.locator('tr[data-namespace="up"]')
    assert up.locator('li[data-server="demo"]').get_attribute("data-status") == "ready"
    assert "demo: ready" in up.locator("td.servers").inner_text()
    page.locator("#live[data-live=stream]").wait_for()
    summary = page.locator("main > p.muted").first
    assert f"last reload or swap: generation {generation} at" in summary.inner_text()
    reply = httpx.put(f"{gateway.url}/secrets/ASKS_TOKEN", json={"value": "s3cret-value"},
                      headers=gateway.headers(), timeout=60)
    assert reply.status_code < 300, reply.text
    # no reload of the page: the stream brings the new state
    page.locator('tr[data-namespace="asks"] td.secrets span[data-secrets="ok"]').wait_for(timeout=30_000)
    gateway.wait_for(lambda: gateway.namespace("asks")["pid"] not in (None, first), 30, "the restarted worker")
    page.locator('tr[data-namespace="asks"][data-status="ready"]').wait_for()
    page.get_by_text(f"pid {gateway.namespace('asks')['pid']}").wait_for(timeout=10_000)
    assert "s3cret-value" not in page.content()


def serious(page: Any) -> list[Any]:
    """axe-core's serious or critical violations on the page as it is (the test injects it: the CSP stays)."""
    page.evaluate(AXE.read_text())
    found = page.evaluate("axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ("
                          "{id: v.id, impact: v.impact, nodes: v.nodes.slice(0, 3).map(n => n.target.join(' '))})))")
    return [v for v in found if v["impact"] in ("serious", "critical")]


def test_the_dialogs_and_the_checked_form_have_no_serious_accessibility_violation(admin: Tab) -> None:
    page = admin.open("/namespaces/asks/tools/book")
    page.get_by_label("city", exact=True).fill("Oslo")
    page.get_by_role("button", name="Run").click()
    asked = dialog(page, "elicitation")
    page.set_viewport_size({"width": 1280, "height": 800})
    if os.environ.get("TOOLDOCK_DASHBOARD_SCREENSHOTS") == "1":  # for the docs, as tests/test_dashboard.py's
        asked.get_by_label("value", exact=True).fill("Ada Lovelace")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "elicitation.png"), animations="disabled", caret="hide")
        asked.get_by_label("value", exact=True).fill("")
    asked.get_by_role("button", name="Accept").click()  # with its alert showing
    assert not serious(page)
    asked.get_by_role("button", name="Decline").click()
    page.locator("section.result[data-status=ok]").wait_for()
    page = admin.open("/namespaces/asks/tools/suggest")
    page.get_by_label("city", exact=True).fill("Oslo")
    page.get_by_role("button", name="Run").click()
    dialog(page, "sampling")
    assert not serious(page)
    page.keyboard.press("Escape")  # rejects
    page.locator("section.result[data-status=tool-error]").wait_for()
    page = admin.open("/namespaces/asks/tools/bounded")
    page.get_by_label("count", exact=True).fill("3")
    page.get_by_role("button", name="Run").click()
    page.locator(".field-error").first.wait_for()
    assert not serious(page)


def test_the_overview_endpoint_keeps_to_the_keys_scope(gateway: Gateway) -> None:
    reply = httpx.get(gateway.url + "/overview", headers=gateway.headers(), timeout=30).json()
    assert {ns["name"] for ns in reply["namespaces"]} == {"asks", "up"} and reply["changed"]["generation"] >= 1
    assert "worker_id" not in reply["namespaces"][0]
    with httpx.stream("GET", gateway.url + "/overview/live", headers=gateway.headers(), timeout=30) as live:
        assert live.headers["content-type"].startswith("text/event-stream")
        lines = live.iter_lines()
        event = next(line for line in lines if line.startswith("data:"))
        assert {ns["name"] for ns in json.loads(event[5:])["namespaces"]} == {"asks", "up"}
    assert httpx.get(gateway.url + "/overview", timeout=30).status_code == 401
    _, secret = KeyStore(gateway.keys_dir).create("overview-reader", "read", namespaces=("up",))  # type: ignore[attr-defined]
    scoped = httpx.get(gateway.url + "/overview", headers={"Authorization": f"Bearer {secret}"}, timeout=30).json()
    assert [ns["name"] for ns in scoped["namespaces"]] == ["up"]
