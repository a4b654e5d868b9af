"""Upstream namespaces (issue 13): a folder with a `tools.toml` served through the gateway, every MUST of
seed 001 (Toolman) as a test named after it, against a real gateway process and real upstream servers
(stdio servers on the official SDK here; the third-party servers from npm and PyPI are in
test_upstream_real.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shlex
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from conftest import FIXTURES, Gateway
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from relaykit import Line, cleanup, relay_env

pytestmark = pytest.mark.slow

DEMO = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'upstreams' / 'demo_server.py'))}"
ONE_DEMO = f'active_toolsets = ["demo_add"]\n[[servers]]\nnamespace = "demo"\ncommand = "{DEMO}"\n'
EMPTY = {"tools_on": [], "tools_off": [], "resources_on": [], "resources_off": []}


def write_upstream(tools: Path, name: str, toml: str) -> Path:
    folder = tools / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tools.toml").write_text(toml)
    return folder


def aggregate_toml(count_file: Path) -> str:
    return f"""
active_toolsets = ["demo_add", "demo_slow", "demo_fail", "demo_demo://greeting"]

[[servers]]
namespace = "demo"
command = "{DEMO} --flavor first"
env = {{ DEMO_LIST_COUNT = "{count_file}" }}

[[servers]]
namespace = "demo"
command = "{DEMO} --flavor second"

[[servers]]
namespace = ""
command = "{DEMO} --flavor bare"
"""


@pytest.fixture(scope="module")
def agg(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("upstream")
    tools = tmp / "tools"
    write_upstream(tools, "agg", aggregate_toml(tmp / "lists.txt"))
    (tools / "plain").mkdir()
    (tools / "plain" / "calc.py").write_text(
        'from fastmcp.tools import tool\n\n\n@tool\ndef double(x: int) -> int:\n    """Twice x."""\n    return 2 * x\n'
    )
    gw = Gateway(tools, tmp / "gateway.log").start()
    # with the schema cache warm the gateway is up before its upstreams are: wait until they are too
    gw.wait_for(lambda: all(s["state"] != "starting" for s in gw.namespace("agg")["servers"]), what="upstreams")
    gw.count_file = tmp / "lists.txt"  # type: ignore[attr-defined]
    yield gw
    gw.stop()


@contextlib.asynccontextmanager
async def session(gw: Gateway, namespace: str, mode: str = "legacy") -> AsyncIterator[Client]:
    """An official SDK 2.x client on `/ns/<namespace>/mcp`: `legacy` (a 2025-11-25 session) or `auto`."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {gw.token}"}, timeout=60) as http:
        transport = streamable_http_client(f"{gw.url}/ns/{namespace}/mcp", http_client=http)
        async with Client(transport, mode=mode, cache=None) as client:
            yield client


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


async def activate(client: Client, **lists: list[str]) -> types.CallToolResult:
    return await client.call_tool("toolman_activate", {**EMPTY, **lists})


async def tool_names(client: Client) -> list[str]:
    return [t.name for t in (await client.list_tools()).tools]


def catalog_of(tools: list[types.Tool]) -> str:
    return next(t for t in tools if t.name == "toolman_activate").description or ""


# -- start-up and caching ----------------------------------------------------------------------------


def test_spawns_and_connects_every_server_at_startup(agg):
    status = agg.namespace("agg")
    assert status["state"] == "ready" and status["kind"] == "upstream"
    assert [s["state"] for s in status["servers"]] == ["ready", "ready", "ready"]
    assert [s["namespace"] for s in status["servers"]] == ["demo", "demo", ""]


def test_caches_tools_resources_and_prompts(agg):
    """Listing through the gateway never reaches the upstream again: it answered tools/list once."""

    async def go() -> None:
        for _ in range(5):
            async with session(agg, "agg") as client:
                await client.list_tools()
                await client.list_resources()
                await client.list_prompts()

    run(go())
    assert agg.count_file.read_text().count("list") == 1


def test_prefixes_tool_prompt_resource_and_template_names(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            await activate(client, tools_on=["demo_wordy"], resources_on=["demo_demo://items/{item}"])
            assert "demo_wordy" in await tool_names(client)
            resources = [str(r.uri) for r in (await client.list_resources()).resources]
            assert resources == ["demo_demo://greeting"]
            templates = [t.uri_template for t in (await client.list_resource_templates()).resource_templates]
            assert templates == ["demo_demo://items/{item}"]
            prompts = sorted(p.name for p in (await client.list_prompts()).prompts)
            assert prompts == ["demo_greet", "demo_haiku", "greet", "haiku"]  # "" keeps the upstream's own names
            read = await client.read_resource("demo_demo://items/42")
            assert read.contents[0].text == "item 42" and str(read.contents[0].uri) == "demo_demo://items/42"
            prompt = await client.get_prompt("demo_greet", {"name": "Ada"})
            assert prompt.messages[0].content.text == "Hello Ada"

    run(go())


def test_first_listed_server_wins_a_collision(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            tools = (await client.list_tools()).tools
            add = next(t for t in tools if t.name == "demo_add")
            assert add.description == "Add two numbers (first)."
            assert catalog_of(tools).count("demo_add ") == 1
            greeting = await client.read_resource("demo_demo://greeting")
            assert greeting.contents[0].text == "hello from first"

    run(go())
    assert any("demo_add" in c for c in agg.namespace("agg")["collisions"])


def test_globs_activate_tools_and_resources_independently(agg):
    """`demo_add` and the resource `demo_demo://greeting` match; `demo_wordy` and the template do not."""

    async def go() -> None:
        async with session(agg, "agg") as client:
            assert await tool_names(client) == ["toolman_activate", "demo_add", "demo_fail", "demo_slow"]
            assert [str(r.uri) for r in (await client.list_resources()).resources] == ["demo_demo://greeting"]
            assert (await client.list_resource_templates()).resource_templates == []

    run(go())


def test_prompts_are_always_active(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            assert len((await client.list_prompts()).prompts) == 4
            # no activation list names prompts, and deactivating everything leaves them
            await activate(client, tools_off=["demo_add"], resources_off=["demo_demo://greeting"])
            assert len((await client.list_prompts()).prompts) == 4

    run(go())


def test_registers_exactly_one_tool_of_its_own(tmp_path, make_gateway):
    tools = tmp_path / "src"
    write_upstream(tools, "none", f'[[servers]]\nnamespace = "demo"\ncommand = "{DEMO}"\n')
    gw = make_gateway(tools)

    async def go() -> None:
        async with session(gw, "none") as client:
            assert await tool_names(client) == ["toolman_activate"]

    run(go())


# -- toolman_activate --------------------------------------------------------------------------------


def test_activate_requires_four_list_parameters(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            schema = catalog_tool = next(t for t in (await client.list_tools()).tools if t.name == "toolman_activate")
            assert sorted(schema.input_schema["required"]) == ["resources_off", "resources_on", "tools_off", "tools_on"]
            assert catalog_tool.input_schema["properties"]["tools_on"]["type"] == "array"
            missing = await client.call_tool("toolman_activate", {"tools_on": ["demo_wordy"]})
            assert missing.is_error and "tools_off is required" in text(missing)
            assert "demo_wordy" not in await tool_names(client)

    run(go())


def test_activate_with_all_lists_empty_is_an_error(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            result = await activate(client)
            assert result.is_error and "name at least one tool or resource" in text(result)

    run(go())


def test_unknown_names_change_nothing_and_get_suggestions(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            before = await tool_names(client)
            result = await activate(
                client, tools_on=["demo_wordy", "demo_wordie"], resources_on=["demo_demo://greetin"]
            )
            assert result.is_error
            message = text(result)
            assert "'demo_wordie' (did you mean 'demo_wordy'" in message
            assert "'demo_demo://greetin' (did you mean 'demo_demo://greeting'" in message
            assert "Nothing was changed" in message
            assert await tool_names(client) == before  # demo_wordy, valid, was not applied either
            error = result.structured_content["error"]
            assert error["code"] == "invalid_arguments" and "demo_wordie" in error["details"]["unknown"]

    run(go())


def test_activation_confirms_briefly_and_unmentioned_items_keep_their_state(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            result = await activate(client, tools_on=["demo_wordy"], tools_off=["demo_fail"])
            assert not result.is_error and text(result).startswith("Activated 1 tool; deactivated 1 tool.")
            assert await tool_names(client) == ["toolman_activate", "demo_add", "demo_wordy", "demo_slow"]

    run(go())


def test_catalog_in_description_marks_active_items_and_truncates_to_132(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            catalog = catalog_of((await client.list_tools()).tools)
            lines = catalog.splitlines()
            assert "* demo_add - Add two numbers (first)." in lines
            assert "  add - Add two numbers (bare)." in lines  # inactive: no marker
            assert "* demo_demo://greeting - A greeting" in lines
            assert "  demo_demo://items/{item} - One item" in lines
            wordy = next(line for line in lines if line.startswith("  demo_wordy - "))
            assert len(wordy.removeprefix("  demo_wordy - ")) == 132 and wordy.endswith("…")

    run(go())


def test_catalog_is_regenerated_when_activation_changes(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            await activate(client, tools_on=["add"], tools_off=["demo_add"])
            catalog = catalog_of((await client.list_tools()).tools)
            assert "* add - Add two numbers (bare)." in catalog.splitlines()
            assert "  demo_add - Add two numbers (first)." in catalog.splitlines()

    run(go())


def test_tools_list_is_activate_plus_active_tools_with_full_schemas(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(tools) == {"toolman_activate", "demo_add", "demo_slow", "demo_fail"}
            assert tools["demo_add"].input_schema["properties"].keys() == {"a", "b"}
            assert tools["demo_add"].input_schema["required"] == ["a", "b"]

    run(go())


# -- proxying ------------------------------------------------------------------------------------------


def test_active_tool_call_strips_the_prefix_and_relays_the_result(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            result = await client.call_tool("demo_add", {"a": 2, "b": 40})
            assert not result.is_error and text(result) == "42"
            assert result.structured_content == {"result": 42}

    run(go())


def test_inactive_tool_error_says_to_activate_it_first(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            result = await client.call_tool("demo_wordy", {"text": "x"})
            assert result.is_error
            assert "call toolman_activate with tools_on=['demo_wordy'] first" in text(result)
            assert result.structured_content["error"]["code"] == "tool_inactive"

    run(go())


def test_unknown_tool_error_lists_similar_names(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            with pytest.raises(Exception, match=r"unknown tool 'demo_ad'; similar: demo_add"):
                await client.call_tool("demo_ad", {"a": 1, "b": 2})

    run(go())


def test_inactive_resource_error_says_to_activate_it_first(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            with pytest.raises(Exception, match=r"resources_on=\['demo_demo://items/\{item\}'\] first"):
                await client.read_resource("demo_demo://items/7")

    run(go())


def test_upstream_errors_are_relayed_unwrapped(agg):
    async def go() -> None:
        async with session(agg, "agg") as client:
            failed = await client.call_tool("demo_fail", {"reason": "the test asked"})
            assert failed.is_error
            assert text(failed) == "Error executing tool fail"  # what the SDK server says (it hides exception text)
            assert failed.structured_content is None  # the upstream's own result, not ToolDock's error shape
            bad = await client.call_tool("demo_add", {"a": "two"})
            assert bad.is_error and "validation error" in text(bad)
            with pytest.raises(MCPError) as through:  # a JSON-RPC error from upstream, passed on as it was sent
                await client.get_prompt("demo_greet", {})
        argv = shlex.split(DEMO)
        # the same server asked directly, in the protocol revision the gateway's own client negotiates with it
        async with Client(StdioServerParameters(command=argv[0], args=argv[1:]), mode="auto") as direct:
            with pytest.raises(MCPError) as straight:
                await direct.get_prompt("greet", {})
        assert (through.value.error.code, through.value.error.message) == (
            straight.value.error.code,
            straight.value.error.message,
        )

    run(go())
    # over REST the failed result is a failure too (it was a 200 carrying the error text)
    failed = agg.call("agg", "demo_fail", reason="the test asked")
    assert failed.status_code == 500 and failed.json()["error"]["code"] == "internal_error", failed.text
    assert failed.json()["error"]["message"] == "Error executing tool fail"


def test_rest_and_openapi_see_the_configured_default(agg):
    listed = agg.get("/tools", "agg").json()["tools"]
    assert [t["name"] for t in listed] == ["demo_add", "demo_fail", "demo_slow"]
    assert agg.call("agg", "demo_add", a=1, b=2).json() == {"result": {"result": 3}}
    inactive = agg.call("agg", "demo_wordy", text="x")
    assert inactive.status_code == 409 and inactive.json()["error"]["code"] == "tool_inactive"
    own = agg.call("agg", "toolman_activate", **EMPTY)
    assert own.status_code == 409 and "MCP session" in own.json()["error"]["message"]
    unknown = agg.call("agg", "demo_ad", a=1)
    assert unknown.status_code == 404 and "similar: demo_add" in unknown.json()["error"]["message"]
    doc = agg.get("/ns/agg/openapi.json").json()
    assert set(doc["paths"]) >= {"/tools/demo_add", "/tools/demo_slow"} and "/tools/demo_wordy" not in doc["paths"]
    plain = agg.call("plain", "double", x=4)
    assert plain.json() == {"result": 8}  # a tool-file namespace next to it is unaffected


def test_activation_is_per_session(agg):
    """One client's activation does not change another's; 2026-07-28 clients (no session) share one view."""

    async def go() -> None:
        async with session(agg, "agg") as first, session(agg, "agg") as second:
            await activate(first, tools_on=["demo_wordy"])
            assert "demo_wordy" in await tool_names(first)
            assert "demo_wordy" not in await tool_names(second)
        async with session(agg, "agg", mode="auto") as modern:
            assert modern.protocol_version == "2026-07-28"
            await activate(modern, tools_on=["demo_getenv"])
        async with session(agg, "agg", mode="auto") as modern_again:
            assert "demo_getenv" in await tool_names(modern_again)
            await activate(modern_again, tools_off=["demo_getenv"])
        async with session(agg, "agg") as legacy:
            assert "demo_getenv" not in await tool_names(legacy)

    run(go())
    assert "demo_wordy" not in [t["name"] for t in agg.get("/tools", "agg").json()["tools"]]


def test_activation_sends_list_changed_to_that_session(agg):
    async def go() -> None:
        seen: list[str] = []

        async def on_message(message: Any) -> None:
            if isinstance(message, types.ServerNotification):
                seen.append(message.root.method if hasattr(message, "root") else message.method)

        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {agg.token}"}) as http:
            transport = streamable_http_client(f"{agg.url}/ns/agg/mcp", http_client=http)
            async with Client(transport, mode="legacy", cache=None, message_handler=on_message) as client:
                await activate(client, tools_on=["demo_wordy"])
                for _ in range(50):
                    if "notifications/tools/list_changed" in seen:
                        break
                    await asyncio.sleep(0.1)
        assert "notifications/tools/list_changed" in seen
        assert "notifications/resources/list_changed" in seen

    run(go())


async def call_watching(
    gw: Gateway, namespace: str, tool: str, arguments: dict[str, Any]
) -> tuple[str, list[tuple[float, float | None, str | None]], list[Any]]:
    """`tools/call` on a 2025-11-25 session at log level info: the result's text, and the progress
    (value, total, message) and log messages that came on the way."""
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def on_progress(value: float, total: float | None, message: str | None) -> None:
        progress.append((value, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {gw.token}"}) as http:
        transport = streamable_http_client(f"{gw.url}/ns/{namespace}/mcp", http_client=http)
        async with Client(transport, mode="legacy", cache=None, logging_callback=on_log) as client:
            await client.set_logging_level("info")
            result = await client.session.call_tool(tool, arguments, progress_callback=on_progress)
            return text(result), progress, logs


def test_progress_and_log_messages_are_relayed_to_the_caller(agg):
    result, progress, logs = run(call_watching(agg, "agg", "demo_slow", {"seconds": 2}))
    assert result == "slept 2.0"
    assert progress == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]
    assert logs == ["step 1 of 2", "step 2 of 2"]


def lean_count(gw: Gateway, method: str) -> float:
    """Requests of `method` the gateway's lean MCP path answered (its own metric), all protocol versions."""
    metrics = gw.get("/metrics").text
    prefix = f'tooldock_mcp_lean_requests_total{{method="{method}"'
    return sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith(prefix))


@pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")  # logging/setLevel, on purpose
def test_an_established_session_is_served_by_the_lean_path_with_its_own_view(agg):
    """After its first list, a 2025 session's lists and calls of an upstream namespace skip the SDK's
    per-message machinery, and still see that session's activation, its progress and log messages, the
    upstream's errors as sent, and the SDK's answers (activation itself stays with the SDK: it tells the
    session its lists changed)."""

    async def go() -> dict[str, Any]:
        progress: list[float] = []
        logs: list[Any] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append(value)

        async def on_log(params: types.LoggingMessageNotificationParams) -> None:
            logs.append(params.data)

        out: dict[str, Any] = {}
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {agg.token}"}, timeout=60) as http:
            transport = streamable_http_client(f"{agg.url}/ns/agg/mcp", http_client=http)
            async with Client(transport, mode="legacy", cache=None, logging_callback=on_log) as first, \
                    session(agg, "agg") as second:
                await first.set_logging_level("info")
                await tool_names(first), await tool_names(second)  # the SDK serves each session's first list
                before = {m: lean_count(agg, m) for m in ("tools/call", "tools/list")}
                await activate(first, tools_on=["demo_wordy"])
                out["first_tools"], out["second_tools"] = await tool_names(first), await tool_names(second)
                out["wordy"] = text(await first.call_tool("demo_wordy", {"text": "hi"}))
                out["inactive"] = await second.call_tool("demo_wordy", {"text": "hi"})
                out["sum"] = await first.call_tool("demo_add", {"a": 2, "b": 3})
                out["slow"] = await first.session.call_tool("demo_slow", {"seconds": 2}, progress_callback=on_progress)
                out["failed"] = await first.call_tool("demo_fail", {"reason": "lean"})
                with pytest.raises(MCPError) as unknown:
                    await first.call_tool("demo_ad", {"a": 1, "b": 2})
                out["unknown"] = unknown.value.error
                out["lean"] = {m: lean_count(agg, m) - before[m] for m in before}
        out["progress"], out["logs"] = progress, logs
        return out

    out = run(go())
    assert out["lean"] == {"tools/call": 6, "tools/list": 2}, out["lean"]  # all but toolman_activate
    assert "demo_wordy" in out["first_tools"] and "demo_wordy" not in out["second_tools"]
    assert out["wordy"] and out["inactive"].is_error
    assert out["inactive"].structured_content["error"]["code"] == "tool_inactive"
    assert out["sum"].structured_content == {"result": 5} and not out["sum"].is_error
    assert text(out["slow"]) == "slept 2.0" and out["progress"] == [1.0, 2.0]
    assert out["logs"] == ["step 1 of 2", "step 2 of 2"]
    assert out["failed"].is_error and text(out["failed"]) == "Error executing tool fail"
    assert out["failed"].structured_content is None
    assert out["unknown"].code == -32602 and "similar: demo_add" in out["unknown"].message


# -- the server's questions: sampling and elicitation reach the caller ----------------------------------


async def answering_client(
    gw: Gateway,
    mode: str,
    heard: list[Any],
    namespace: str = "asks",
    says: str = "Tea is warm.",
    fills: dict[str, Any] | None = None,
    **declared: bool,
) -> AsyncIterator[Client]:
    """A client of `namespace` that answers sampling with `says` and elicitation by accepting with `fills`
    (default: teal), recording each question it is asked; `declared`: which of the two it declares."""

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        heard.append(params.messages[0].content.text)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=says), model="m")

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        heard.append(params.message)
        return types.ElicitResult(action="accept", content=fills or {"colour": "teal"})

    callbacks: dict[str, Any] = {}
    if declared.get("sampling", True):
        callbacks["sampling_callback"] = sample
    if declared.get("elicitation", True):
        callbacks["elicitation_callback"] = elicit
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {gw.token}"}, timeout=60) as http:
        transport = streamable_http_client(f"{gw.url}/ns/{namespace}/mcp", http_client=http)
        async with Client(transport, mode=mode, cache=None, **callbacks) as client:
            yield client


answering = contextlib.asynccontextmanager(answering_client)


@pytest.fixture(scope="module")
def asks(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("asks")
    toml = f'active_toolsets = ["demo_*"]\n[[servers]]\nnamespace = "demo"\ncommand = "{DEMO}"\n'
    yield from relay_gateway(tmp, "asks", toml)


def relay_gateway(tmp: Path, namespace: str, toml: str) -> Any:
    """A gateway serving upstream `namespace` (its tools.toml `toml`), ready, with a relay socket of its own
    (`gw.relay`: its path and key store); stopped after."""
    write_upstream(tmp / "tools", namespace, toml)
    env, sock, keys = relay_env()
    gw = Gateway(tmp / "tools", tmp / "gateway.log", env).start()
    gw.relay = sock, keys
    gw.wait_for(lambda: gw.namespace(namespace)["servers"][0]["state"] == "ready", what="the upstream")
    yield gw
    gw.stop()
    cleanup(sock)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
def test_sampling_and_elicitation_of_an_upstream_reach_the_client_that_called(asks, mode):
    """A 2025-11-25 client is asked over its session; a 2026-07-28 client (`auto`) through input_required
    rounds, the upstream call run again with its answer."""

    async def go() -> None:
        heard: list[Any] = []
        async with answering(asks, mode, heard) as client:
            mused = await client.call_tool("demo_muse", {"topic": "tea"})
            assert not mused.is_error and text(mused) == "the client wrote: Tea is warm.", text(mused)
            chosen = await client.call_tool("demo_favourite", {})
            assert not chosen.is_error and text(chosen) == "accept: teal", text(chosen)
            prompt = await client.get_prompt("demo_haiku", {})  # a prompt's input_required rounds too
            assert prompt.messages[0].content.text == "A haiku about teal"
        assert heard == ["a line about tea", "Your favourite colour?", "Which colour?"]

    run(go())


def test_an_upstream_question_to_a_client_that_did_not_declare_it_is_refused(asks):
    async def go() -> None:
        heard: list[Any] = []
        async with answering(asks, "legacy", heard, sampling=False) as client:
            with pytest.raises(MCPError, match="did not declare the sampling capability") as refused:
                await client.call_tool("demo_muse", {"topic": "tea"})
            assert refused.value.error.code == types.INVALID_REQUEST
            chosen = await client.call_tool("demo_favourite", {})  # what it did declare still works
            assert text(chosen) == "accept: teal"
        assert heard == ["Your favourite colour?"]

    run(go())
    assert "refused its sampling/createMessage request: the calling client did not declare" in asks.logs


def test_an_upstream_question_during_a_rest_call_is_refused_with_the_reason(asks):
    answer = asks.call("asks", "demo_muse", topic="tea")
    assert answer.status_code == 502 and answer.json()["error"]["code"] == "upstream_error", answer.text
    assert "over REST, or over the relay socket without _meta.tooldock/capabilities" in answer.text, answer.text


def test_an_upstream_question_during_a_relay_call_reaches_the_caller_that_declared_it(asks):
    """The relay socket: a call that declared sampling in its _meta is asked the server's question on its
    connection, and the server gets the answer; a call that declared nothing is refused, as an MCP client
    without the capability would be."""
    sock, keys = asks.relay
    _, key = keys.create("asks", "write", ("asks",))
    line = Line(sock)
    line.send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "oubliette_call_tool", "params": {
        "api_key": key, "tool": "asks_demo_muse", "arguments": {"topic": "tea"},
        "_meta": {"tooldock/capabilities": {"sampling": {}}}}}).encode() + b"\n")
    question = line.read()
    assert question["method"] == "sampling/createMessage", question
    assert question["params"]["messages"][0]["content"]["text"] == "a line about tea"
    assert question["params"]["_meta"]["tooldock/requestId"] == 5
    line.send(json.dumps({"jsonrpc": "2.0", "id": question["id"], "result": {
        "role": "assistant", "model": "m", "content": {"type": "text", "text": "Tea is warm."}}}).encode() + b"\n")
    answer = line.read()
    assert answer["id"] == 5 and answer["result"]["isError"] is False, answer
    assert answer["result"]["content"][0]["text"] == "the client wrote: Tea is warm."
    refused = line.call(key, "asks_demo_muse", rid=6, topic="tea")
    assert "the calling client did not declare the sampling capability" in json.dumps(refused), refused
    line.close()


def test_a_2026_upstream_asks_each_caller_its_own_question_while_others_are_in_flight(asks):
    """A 2026-07-28 server's questions come back as the call's own input_required result: there is no doubt
    whose they are, so they are put to that caller with other calls running (contrast server-everything,
    a 2025 server, in test_upstream_real.py)."""

    async def go() -> None:
        first: list[Any] = []
        second: list[Any] = []
        async with answering(asks, "legacy", first) as slow_client, answering(asks, "auto", second) as client:
            slow = asyncio.ensure_future(slow_client.call_tool("demo_slow", {"seconds": 2}))
            try:
                await asyncio.sleep(0.5)
                mused = await client.call_tool("demo_muse", {"topic": "rain"})
                assert text(mused) == "the client wrote: Tea is warm."
            finally:
                assert text(await slow) == "slept 2.0"
        assert first == [] and second == ["a line about rain"]

    run(go())


# -- life: crashes, restarts, shutdown ---------------------------------------------------------------------


def descendants(pid: int) -> set[int]:
    """Every process below `pid` (read from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                stat = (entry / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def server_pids(gw: Gateway, marker: str) -> list[int]:
    found = []
    for pid in descendants(gw.proc.pid):
        with contextlib.suppress(OSError):
            if marker in Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace"):
                found.append(pid)
    return sorted(found)


def one_server_toml(flavor: str, restart: bool, globs: str = '["demo_*"]') -> str:
    return (
        f"active_toolsets = {globs}\nrestart = {str(restart).lower()}\n\n"
        f'[[servers]]\nnamespace = "demo"\ncommand = "{DEMO} --flavor {flavor}"\n\n'
        f'[[servers]]\nnamespace = "other"\ncommand = "{DEMO} --flavor stays"\n'
    )


def test_crashed_upstream_items_leave_the_catalog_and_it_is_logged(tmp_path, make_gateway):
    """restart = false is Toolman v1: a server that exits is gone with its tools, resources and prompts."""
    tools = tmp_path / "src"
    write_upstream(tools, "crash", one_server_toml("crashme", restart=False))
    gw = make_gateway(tools)
    [pid] = server_pids(gw, "crashme")
    os.kill(pid, signal.SIGKILL)
    gw.wait_for(
        lambda: (
            gw.namespace("crash")["servers"][0]["state"] == "failed"
            or gw.namespace("crash")["servers"][0]["state"] == "down"
        ),
        what="the server to be marked down",
    )
    status = gw.namespace("crash")
    assert status["state"] == "degraded"
    assert all(not name.startswith("demo_") for name in status["tools"]), status["tools"]

    async def go() -> None:
        async with session(gw, "crash") as client:
            tools = (await client.list_tools()).tools
            assert [t.name for t in tools if t.name.startswith("demo_")] == []
            assert "demo_add" not in catalog_of(tools) and "other_add" in catalog_of(tools)
            assert sorted(p.name for p in (await client.list_prompts()).prompts) == ["other_greet", "other_haiku"]

    run(go())
    assert "its 7 tool(s), 2 resource(s) and 2 prompt(s) left the catalog" in gw.logs
    time.sleep(1.5)
    assert gw.namespace("crash")["servers"][0]["restarts"] == 0  # v1: never restarted


def test_upstream_killed_mid_call_fails_cleanly_and_returns_after_restart(tmp_path, make_gateway):
    tools = tmp_path / "src"
    write_upstream(tools, "crash", one_server_toml("killme", restart=True))
    gw = make_gateway(tools)
    [pid] = server_pids(gw, "killme")

    async def go() -> None:
        async with session(gw, "crash") as client:
            call = asyncio.create_task(client.call_tool("demo_slow", {"seconds": 10}))
            await asyncio.sleep(1.5)
            os.kill(pid, signal.SIGKILL)
            result = await asyncio.wait_for(call, 10)
            assert result.is_error
            assert result.structured_content["error"]["code"] == "upstream_unavailable"
            assert "went away during the request" in text(result)

    run(go())
    gw.wait_for(lambda: gw.namespace("crash")["servers"][0]["state"] == "ready", what="the restart")
    status = gw.namespace("crash")
    assert status["servers"][0]["restarts"] == 1 and "demo_add" in status["tools"]
    assert server_pids(gw, "killme") != [pid]
    assert gw.call("crash", "demo_add", a=1, b=1).json() == {"result": {"result": 2}}


def test_shutdown_closes_sessions_and_leaves_no_child_process(tmp_path, make_gateway):
    tools = tmp_path / "src"
    write_upstream(tools, "one", one_server_toml("shutdown-a", restart=True))
    write_upstream(tools, "two", one_server_toml("shutdown-b", restart=True))
    gw = make_gateway(tools)
    pids = descendants(gw.proc.pid)
    spawned = server_pids(gw, "shutdown-") + server_pids(gw, "--flavor stays")
    assert len(spawned) == 4 and set(spawned) <= pids
    gw.stop()
    assert gw.proc.returncode is not None
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.1)
    assert [p for p in pids if alive(p)] == []


# -- configuration and bad input ----------------------------------------------------------------------------


def test_malformed_tools_toml_is_reported_and_others_keep_serving(tmp_path, make_gateway):
    tools = tmp_path / "src"
    write_upstream(tools, "broken", 'active_toolsets = ["x"\n[[servers]]\n')
    write_upstream(tools, "nokey", '[[servers]]\nnamespace = "a"\n')
    write_upstream(tools, "good", ONE_DEMO)
    gw = make_gateway(tools)
    broken = gw.namespace("broken")
    assert broken["state"] == "failed" and broken["problems"][0]["file"] == "tools.toml"
    assert "invalid TOML" in broken["problems"][0]["message"] and broken["problems"][0]["line"] == 2
    nokey = gw.namespace("nokey")
    assert "needs exactly one of command" in nokey["problems"][0]["message"]
    assert gw.call("good", "demo_add", a=1, b=2).status_code == 200
    assert gw.get("/health").json()["unhealthy"] == {"broken": "failed", "nokey": "failed"}


def test_a_command_that_does_not_exist_fails_that_server_only(tmp_path, make_gateway):
    tools = tmp_path / "src"
    write_upstream(
        tools,
        "mixed",
        f'active_toolsets = ["*"]\nrestart = false\n[[servers]]\nnamespace = "gone"\n'
        f'command = "/nonexistent/mcp-server --flag"\n\n[[servers]]\nnamespace = "demo"\ncommand = "{DEMO}"\n',
    )
    gw = make_gateway(tools)
    status = gw.namespace("mixed")
    assert status["state"] == "degraded"
    assert "command not found" in status["servers"][0]["last_error"]
    assert gw.call("mixed", "demo_add", a=2, b=2).json() == {"result": {"result": 4}}


def test_an_upstream_that_never_answers_initialize_is_bounded(tmp_path, make_gateway):
    tools = tmp_path / "src"
    silent = f"{shlex.quote(sys.executable)} -c 'import sys, time; sys.stdin.read(); time.sleep(600)'"
    write_upstream(
        tools, "silent", f'startup_timeout = 2\nrestart = false\n[[servers]]\nnamespace = "s"\ncommand = "{silent}"\n'
    )
    began = time.monotonic()
    gw = make_gateway(tools)
    assert time.monotonic() - began < 30
    status = gw.namespace("silent")
    assert status["state"] == "failed"
    assert "no answer to initialize and listing within 2s" in status["servers"][0]["last_error"]
    assert server_pids(gw, "time.sleep(600)") == []  # the silent process was stopped, not left behind


def test_mixed_folder_serves_upstreams_and_reports_tool_files(tmp_path, make_gateway):
    tools = tmp_path / "src"
    folder = write_upstream(tools, "both", ONE_DEMO)
    (folder / "extra.py").write_text("from fastmcp.tools import tool\n\n@tool\ndef x() -> int:\n    return 1\n")
    gw = make_gateway(tools)
    status = gw.namespace("both")
    assert status["tools"] == ["demo_add"]
    assert status["problems"][0]["file"] == "extra.py" and status["problems"][0]["code"] == "mixed_namespace"


def test_servers_are_added_and_removed_by_editing_tools_toml_and_reloading(tmp_path, make_gateway):
    tools = tmp_path / "src"
    edit = 'active_toolsets = ["*_add"]\n[[servers]]\nnamespace = "{}"\ncommand = "{} --flavor edit-{}"\n'
    write_upstream(tools, "edit", edit.format("a", DEMO, "a"))
    gw = make_gateway(tools)
    assert gw.namespace("edit")["tools"] == ["a_add"]
    old = server_pids(gw, "edit-a")
    live = gw.tools_dir / "edit" / "tools.toml"
    live.write_text(edit.format("b", DEMO, "b"))
    gw.proc.send_signal(signal.SIGHUP)
    gw.wait_for(lambda: gw.namespace("edit")["tools"] == ["b_add"], what="the reload")
    gw.wait_for(lambda: not any(alive(p) for p in old), what="the removed server to stop")
    live.write_text("[[servers]]\nnamespace = \n")  # a broken edit: the previous version keeps serving
    gw.proc.send_signal(signal.SIGHUP)
    gw.wait_for(lambda: "reload_error" in gw.namespace("edit"), what="the broken edit to be reported")
    assert gw.call("edit", "b_add", a=1, b=1).json() == {"result": {"result": 2}}


def test_schema_cache_lists_tools_before_the_upstream_is_up_again(tmp_path, make_gateway):
    tools = tmp_path / "src"
    slow_start = f"sh -c 'sleep 4; exec {DEMO} --flavor cached'"
    write_upstream(
        tools, "cached", f'active_toolsets = ["demo_add"]\n[[servers]]\nnamespace = "demo"\ncommand = "{slow_start}"\n'
    )
    state = tmp_path / "state"
    env = {"TOOLDOCK_STATE_DIR": str(state)}
    first = make_gateway(tools, env=env)
    assert first.namespace("cached")["tools"] == ["demo_add"]
    first.stop()
    began = time.monotonic()
    second = make_gateway(tools, env=env)
    assert time.monotonic() - began < 4, "the second start waited for the upstream instead of using the cache"
    status = second.namespace("cached")
    assert status["tools"] == ["demo_add"] and status["servers"][0]["state"] == "starting"
    # a call waits (bounded) for the server to come up
    assert second.call("cached", "demo_add", a=3, b=4).json() == {"result": {"result": 7}}
    assert json.loads((state / "upstream-cache" / "cached.json").read_text())


def test_a_cached_server_that_fails_its_first_start_leaves_the_catalog(tmp_path, make_gateway):
    """Listed from the schema cache while it starts; when that start fails its cached tools go (they used
    to stay listed, every call failing, until a reload)."""
    tools = tmp_path / "src"
    broken = tmp_path / "broken"
    flaky = f"sh -c 'sleep 1; test -e {broken} && exit 3; exec {DEMO} --flavor cached'"
    write_upstream(
        tools,
        "cached",
        f'active_toolsets = ["demo_add"]\nrestart = false\n[[servers]]\nnamespace = "demo"\ncommand = "{flaky}"\n',
    )
    env = {"TOOLDOCK_STATE_DIR": str(tmp_path / "state")}
    first = make_gateway(tools, env=env)
    assert first.namespace("cached")["tools"] == ["demo_add"]
    first.stop()
    broken.touch()
    second = make_gateway(tools, env=env)
    assert second.namespace("cached")["tools"] == ["demo_add"]  # from the cache, while it starts
    second.wait_for(lambda: second.namespace("cached")["servers"][0]["state"] == "failed", what="the failed start")
    assert second.namespace("cached")["tools"] == []
    assert "its 7 tool(s), 2 resource(s) and 2 prompt(s) left the catalog" in second.logs


def test_a_registry_server_that_cannot_be_resolved_is_reported_not_crashed(tmp_path, make_gateway):
    """(Resolution itself: test_upstream_registry.py.) Port 9 on loopback refuses: the registry is unreachable."""
    tools = tmp_path / "src"
    demo = ONE_DEMO[ONE_DEMO.index("[[servers]]") :]
    write_upstream(tools, "reg", f'restart = false\n[[servers]]\nnamespace = "r"\nregistry = "io.github.a/b"\n\n{demo}')
    gw = make_gateway(tools, env={"MCP_REGISTRY_URL": "http://127.0.0.1:9", "TOOLDOCK_STATE_DIR": str(tmp_path / "st")})
    gw.wait_for(lambda: gw.namespace("reg")["servers"][0]["state"] == "failed", what="the registry server to fail")
    status = gw.namespace("reg")
    assert status["state"] == "degraded"
    assert "cannot reach the MCP Registry at http://127.0.0.1:9" in status["servers"][0]["last_error"]


RAW = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'upstreams' / 'raw_server.py'))}"


def test_invalid_json_rpc_from_an_upstream_is_bounded_and_reported(tmp_path, make_gateway):
    tools = tmp_path / "src"
    write_upstream(
        tools,
        "garbage",
        f'startup_timeout = 3\nrestart = false\n[[servers]]\nnamespace = "g"\ncommand = "{RAW} garbage-init"\n',
    )
    folder = write_upstream(
        tools, "late", f'active_toolsets = ["*"]\n[[servers]]\nnamespace = "l"\ncommand = "{RAW} garbage-call"\n'
    )
    (folder / "tooldock.yaml").write_text("limits:\n  timeout: 3\n")
    gw = make_gateway(tools)
    garbage = gw.namespace("garbage")
    assert garbage["state"] == "failed" and "within 3s" in garbage["servers"][0]["last_error"]
    began = time.monotonic()
    answer = gw.call("late", "l_echo", text="hi")
    assert answer.status_code == 504 and answer.json()["error"]["code"] == "execution_timeout"
    assert time.monotonic() - began < 10
    assert "sent an invalid message" in gw.logs
    assert gw.namespace("late")["state"] == "ready"  # the server itself is still up


def test_a_huge_upstream_result_is_refused_with_its_size(tmp_path, make_gateway):
    tools = tmp_path / "src"
    write_upstream(tools, "huge", f'active_toolsets = ["*"]\n[[servers]]\nnamespace = "h"\ncommand = "{RAW} huge"\n')
    gw = make_gateway(tools)
    assert gw.call("huge", "h_big", size=1_000_000).json()["result"] == "x" * 1_000_000
    refused = gw.call("huge", "h_big", size=17_000_000)
    assert refused.status_code == 502
    assert "more than the 16777216 allowed" in refused.json()["error"]["message"]
    assert gw.call("huge", "h_echo", text="still here").json()["result"] == "still here"


# -- toolman_activate through the relay socket: each connection its own view ---------------------------


@pytest.fixture(scope="module")
def picked(tmp_path_factory: pytest.TempPathFactory) -> Any:
    yield from relay_gateway(tmp_path_factory.mktemp("picked"), "pick", ONE_DEMO)


def test_a_relay_connection_activates_its_own_tools(picked):
    """A relay connection lists `<namespace>_toolman_activate` with the defaults, and what it activates it
    alone sees and may call; another connection keeps the defaults, and REST has no activation."""
    sock, keys = picked.relay
    _, key = keys.create("picker", "write", ("pick",))
    mine, other = Line(sock), Line(sock)
    assert mine.tools(key) == other.tools(key) == ["pick_demo_add", "pick_toolman_activate"]
    wordy = mine.call(key, "pick_demo_wordy", text="hi")
    assert "error" in wordy or wordy["result"]["isError"], wordy  # not active yet
    activated = mine.call(key, "pick_toolman_activate", tools_on=["demo_wordy"], tools_off=["demo_add"],
                          resources_on=[], resources_off=[])
    assert activated["result"]["isError"] is False, activated
    assert mine.tools(key) == ["pick_demo_wordy", "pick_toolman_activate"]
    assert mine.call(key, "pick_demo_wordy", text="hi")["result"]["isError"] is False
    assert other.tools(key) == ["pick_demo_add", "pick_toolman_activate"]  # its own view: the defaults
    refused = other.call(key, "pick_demo_wordy", text="hi")
    assert "error" in refused or refused["result"]["isError"], refused
    mine.close()
    again = Line(sock)  # a new connection starts from the defaults
    assert again.tools(key) == ["pick_demo_add", "pick_toolman_activate"]
    again.close()
    other.close()
    rest = picked.call("pick", "toolman_activate", tools_on=["demo_wordy"], tools_off=[], resources_on=[],
                       resources_off=[])
    assert rest.status_code >= 400 and "REST callers use the tools" in rest.text, rest.text


def test_a_watching_relay_connection_is_told_when_its_activation_changed_its_view(picked):
    """As an MCP session is: a connection watching its key's tools (`tooldock_watch_tools`) gets
    `notifications/tools/list_changed` before the answer to its own successful activation; a refused one
    tells nothing, another connection's view did not change, and a connection not watching is not told."""
    from test_relay_socket import _quiet_for

    sock, keys = picked.relay
    _, key = keys.create("watcher", "write", ("pick",))
    mine, other, unwatched = Line(sock), Line(sock), Line(sock)
    for line in (mine, other):
        assert line.rpc("tooldock_watch_tools", api_key=key)["result"] == {"watching": True}
    call = {"api_key": key, "tool": "pick_toolman_activate", "arguments": {**EMPTY, "tools_on": ["demo_wordy"]}}
    mine.send(json.dumps({"jsonrpc": "2.0", "id": 5, "method": "oubliette_call_tool", "params": call}).encode() + b"\n")
    assert mine.read() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    answer = mine.read()
    assert answer["id"] == 5 and answer["result"]["isError"] is False, answer
    refused = mine.call(key, "pick_toolman_activate", 6, **{**EMPTY, "tools_on": ["demo_nope"]})  # answer first
    assert "error" in refused or refused["result"]["isError"], refused
    assert unwatched.call(key, "pick_toolman_activate", 7, **{**EMPTY, "tools_on": ["demo_wordy"]})["result"]
    assert "pick_demo_wordy" in mine.tools(key)
    assert _quiet_for(other, 1)  # its view did not change (the last read of it: a timed-out socket file is done)
    for line in (mine, other, unwatched):
        line.close()


def test_tooldock_relay_tells_its_client_when_an_activation_changed_its_tools(picked):
    from test_relay_client import names, run_relay

    sock, keys = picked.relay
    _, key = keys.create("relay-picker", "write", ("pick",))
    told: list[str] = []

    async def on_message(message: Any) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ToolListChangedNotification):
            told.append("tools/list_changed")

    async def body(session):
        before = await names(session)
        done = await session.call_tool("oubliette_pick_toolman_activate", {**EMPTY, "tools_on": ["demo_wordy"]})
        for _ in range(50):
            if told:
                break
            await asyncio.sleep(0.1)
        return before, done, await names(session)

    (before, done, after), stderr = run_relay(sock, key, body, on_message=on_message)
    assert before == ["oubliette_pick_demo_add", "oubliette_pick_toolman_activate"]
    assert not done.is_error, done
    assert after == ["oubliette_pick_demo_add", "oubliette_pick_demo_wordy", "oubliette_pick_toolman_activate"]
    assert told == ["tools/list_changed"]
    assert key not in stderr and "Traceback" not in stderr


def test_tooldock_relay_applies_its_clients_activation_again_after_the_gateway_restarts(tmp_path):
    """The gateway keeps a relay connection's activation as long as the connection; `tooldock relay` keeps
    its client's: after a gateway restart (a new connection) the client's tools and calls are as before,
    and it is not told of a change. Names gone since are refused with one warning, the namespace shows its
    defaults, and the client is told; a new activation there starts from the defaults."""
    from test_relay_client import names, run_relay

    gw = next(gateway := relay_gateway(tmp_path, "pick", ONE_DEMO))
    sock, keys = gw.relay
    _, key = keys.create("keeper", "write", ("pick",))
    told: list[float] = []

    async def on_message(message: Any) -> None:
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            told.append(time.monotonic())

    def restart(toml: str | None = None) -> None:
        gw.stop()
        if toml is not None:
            write_upstream(tmp_path / "tools", "pick", toml)
        gw.start()
        gw.wait_for(lambda: gw.namespace("pick")["servers"][0]["state"] == "ready", what="the upstream")

    async def told_within(seconds: float, after: float) -> bool:
        for _ in range(int(seconds * 10)):
            if any(t > after for t in told):
                return True
            await asyncio.sleep(0.1)
        return False

    async def body(session):
        activate = {**EMPTY, "tools_on": ["demo_wordy"], "tools_off": ["demo_add"]}
        assert not (await session.call_tool("oubliette_pick_toolman_activate", activate)).is_error
        assert await told_within(5, 0)
        before = await names(session)
        await asyncio.to_thread(restart)
        restarted = time.monotonic()
        wordy = await session.call_tool("oubliette_pick_demo_wordy", {"text": "hi"})  # the first request
        after = await names(session)
        quiet = not await told_within(6, restarted)  # past the relay's watch timer (5 s) too
        # The upstream's names change ("demo" becomes "other"): the remembered ones are gone.
        await asyncio.to_thread(restart, ONE_DEMO.replace('"demo_add"', '"other_add"').replace('"demo"', '"other"'))
        changed = time.monotonic()
        assert await told_within(20, changed), "the client was not told its tools changed"
        defaults = await names(session)
        again = await session.call_tool("oubliette_pick_toolman_activate", {**EMPTY, "tools_on": ["other_wordy"]})
        await asyncio.to_thread(restart)  # this time the new state (defaults + other_wordy) comes back
        return before, wordy, after, quiet, defaults, again, await names(session)

    try:
        (before, wordy, after, quiet, defaults, again, last), stderr = run_relay(
            sock, key, body, on_message=on_message)
    finally:
        next(gateway, None)
    assert before == after == ["oubliette_pick_demo_wordy", "oubliette_pick_toolman_activate"]
    assert not wordy.is_error, wordy
    assert quiet, "the client was told its tools changed though they came back as they were"
    assert defaults == ["oubliette_pick_other_add", "oubliette_pick_toolman_activate"]
    assert not again.is_error, (again, stderr)
    assert stderr.count("could not apply pick_toolman_activate again") == 1, stderr
    assert "unknown name(s): 'demo_wordy'" in stderr, stderr
    assert last == ["oubliette_pick_other_add", "oubliette_pick_other_wordy", "oubliette_pick_toolman_activate"]
    assert key not in stderr and "Traceback" not in stderr


def test_calls_go_on_through_reloads_one_after_another(tmp_path, make_gateway):
    """Reloads back to back replace an upstream namespace while its servers are still starting (listed from
    the schema cache): a call waiting for such a server is in flight, so the retired version drains it
    instead of stopping the server under it (calls hung until their timeout)."""
    tools = tmp_path / "src"
    toml = f'active_toolsets = ["demo_add"]\n[[servers]]\nnamespace = "demo"\ncommand = "{DEMO}"\n'
    write_upstream(tools, "busy", toml)
    gw = make_gateway(tools, env={"MANAGER_INTERNAL_TOKEN": "manager-token-0", "TOOL_CALL_TIMEOUT_SECONDS": "20"})
    live = gw.tools_dir / "busy" / "tools.toml"

    async def go() -> list[int]:
        answers: list[int] = []
        stop = asyncio.Event()
        async with httpx2.AsyncClient(headers=gw.headers("busy"), timeout=60) as http:

            async def caller() -> None:
                while not stop.is_set():
                    answer = await http.post(f"{gw.url}/tools/demo_add", json={"a": 1, "b": 2})
                    assert answer.json() == {"result": {"result": 3}}, answer.text
                    answers.append(answer.status_code)

            callers = [asyncio.create_task(caller()) for _ in range(2)]
            await asyncio.sleep(0.5)
            for round_ in range(4):
                live.write_text(toml + f"# edit {round_}\n")
                reloaded = await http.post(f"{gw.url}/reload", headers={"X-Manager-Token": "manager-token-0"})
                assert reloaded.json()["failed"] == {}, reloaded.text
            await asyncio.sleep(3)
            stop.set()
            await asyncio.gather(*callers)
        return answers

    answers = run(go())  # every call answered 3: none hit its timeout (20 s) or a missing tool
    assert len(answers) > 10
