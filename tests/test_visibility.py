"""Session visibility: a Context tool's `ctx.disable_components()`, `ctx.enable_components()` and
`ctx.reset_visibility()` hide and show tools, versions, resources, templates and prompts for the session
that called it, as FastMCP does: the same tool file served by ToolDock and by FastMCP in process, read by
the same client, answers alike after each step. Other sessions see everything; the rules outlive a worker
restart and apply to what a reload adds; a call without a session is refused as FastMCP refuses it."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import run_mcp

FILE = '''import json

from fastmcp import Context
from fastmcp.prompts import prompt
from fastmcp.resources import resource
from fastmcp.tools import tool
from fastmcp.utilities.versions import VersionSpec


@tool
async def toggle(rule: str, ctx: Context) -> str:
    """Changes this session's visibility: {"op": "disable" | "enable" | "reset", ...criteria}."""
    asked = json.loads(rule)
    op = asked.pop("op")
    if op == "reset":
        await ctx.reset_visibility()
        return "reset"
    for name in ("names", "keys", "tags", "components"):
        if name in asked:
            asked[name] = set(asked[name])
    if "version" in asked:
        asked["version"] = VersionSpec(**asked["version"])
    await (ctx.enable_components if op == "enable" else ctx.disable_components)(**asked)
    return op


@tool
def public(x: int) -> int:
    """Anyone's."""
    return x


@tool(tags={"admin"})
def wipe(x: int) -> str:
    """An admin's."""
    return f"wiped {x}"


@tool(name="add", version="1")
def add_one(a: int) -> int:
    """Adds nothing."""
    return a


@tool(name="add", version="2")
def add_two(a: int, b: int = 0) -> int:
    """Adds."""
    return a + b


@resource("data://secret", tags={"admin"})
def secret() -> str:
    """An admin's resource."""
    return "s3cr3t"


@resource("data://item/{id}")
def item(id: str) -> str:
    """One item."""
    return f"item {id}"


@prompt(tags={"admin"})
def audit(subject: str) -> str:
    """An admin's prompt."""
    return f"Audit {subject}."
'''

STEPS: list[dict[str, Any]] = [
    {"op": "disable", "tags": ["admin"]},
    {"op": "enable", "names": ["wipe"]},
    {"op": "disable", "keys": ["tool:add@2"]},  # the listed version: the highest left is listed and run
    {"op": "disable", "keys": ["tool:add@1"]},
    {"op": "disable", "names": ["data://item/{id}"]},
    {"op": "disable", "components": ["prompt", "tool"], "version": {"gte": "2"}},
    {"op": "reset"},
]


async def _read(session: Any) -> dict[str, Any]:
    """What the session sees now, and what its calls of each component answer ("refused": an error result
    or a JSON-RPC error; ToolDock words its errors its own way)."""

    async def outcome(call: Any) -> Any:
        try:
            result = await call
        except Exception:  # a JSON-RPC error (mcp's MCPError)
            return "refused"
        if result.is_error if hasattr(result, "is_error") else False:
            return "refused"
        if hasattr(result, "contents"):
            return [c.text for c in result.contents]
        if hasattr(result, "messages"):
            return [m.content.text for m in result.messages]
        return result.structured_content

    def block(tool: Any) -> str:  # fastmcp's `_meta` block, less the empty tags ToolDock leaves out
        found = {k: v for k, v in ((tool.meta or {}).get("fastmcp") or {}).items() if v != []}
        return json.dumps(found, sort_keys=True)

    tools = (await session.list_tools()).tools
    return {
        "tools": sorted((t.name, t.description, json.dumps(t.input_schema, sort_keys=True), block(t)) for t in tools),
        "resources": sorted(str(r.uri) for r in (await session.list_resources()).resources),
        "templates": sorted(t.uri_template for t in (await session.list_resource_templates()).resource_templates),
        "prompts": sorted(p.name for p in (await session.list_prompts()).prompts),
        "wipe": await outcome(session.call_tool("wipe", {"x": 1})),
        "add": await outcome(session.call_tool("add", {"a": 1, "b": 2})),
        "add@1": await outcome(session.call_tool("add", {"a": 1}, meta={"fastmcp": {"version": "1"}})),
        "public": await outcome(session.call_tool("public", {"x": 5})),
        "secret": await outcome(session.read_resource("data://secret")),
        "item": await outcome(session.read_resource("data://item/7")),
        "audit": await outcome(session.get_prompt("audit", {"subject": "x"})),
    }


async def _steps(session: Any, notices: list[str]) -> list[dict[str, Any]]:
    seen = [await _read(session)]
    for step in STEPS:
        notices.append(f"step {step['op']}")
        toggled = await session.call_tool("toggle", {"rule": json.dumps(step)})
        assert not toggled.is_error, toggled
        seen.append(await _read(session))
    return seen


def _collector(notices: list[str]) -> Callable[[Any], Awaitable[None]]:
    """A client's message handler that writes down the list_changed notices it hears, in order."""

    async def handler(message: Any) -> None:
        root = getattr(message, "root", message)
        method = getattr(root, "method", None)
        if isinstance(method, str) and method.endswith("list_changed"):
            notices.append(method)

    return handler


def _direct(path: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """The steps against the file served by FastMCP in process, through the official SDK's ClientSession."""
    from fastmcp import Client
    from test_mcp_like_fastmcp import fastmcp_server

    notices: list[str] = []
    handler = _collector(notices)

    async def main() -> list[dict[str, Any]]:
        async with Client(fastmcp_server(path), message_handler=handler) as client:
            return await _steps(client.session, notices)

    return anyio.run(main), notices


def _through(gateway: Any, namespace: str) -> tuple[list[dict[str, Any]], list[str]]:
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    notices: list[str] = []
    handler = _collector(notices)

    async def main() -> list[dict[str, Any]]:
        async with httpx2.AsyncClient(headers=gateway.headers(namespace), timeout=60) as http:
            async with streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write, message_handler=handler) as session:
                    await session.initialize()
                    return await _steps(session, notices)

    return asyncio.run(main()), notices


@pytest.fixture
def gateway(make_gateway, tmp_path: Path):
    (tmp_path / "src" / "vis").mkdir(parents=True)
    (tmp_path / "src" / "vis" / "vis.py").write_text(FILE)
    return make_gateway(tmp_path / "src")


def test_visibility_steps_answer_as_fastmcp_answers(gateway, tmp_path: Path):
    through, heard = _through(gateway, "vis")
    direct, told = _direct(tmp_path / "src" / "vis" / "vis.py")
    assert len(through) == len(direct) == len(STEPS) + 1
    for number, (mine, theirs) in enumerate(zip(through, direct, strict=True)):
        assert mine == theirs, (number, STEPS[number - 1] if number else "start")
    # what each step told the session, in order, as FastMCP tells it
    assert heard == told
    assert "notifications/tools/list_changed" in heard
    # a sanity check of the reading itself: the first step hid the admin's tool, resource and prompt
    assert through[1]["wipe"] == through[1]["secret"] == through[1]["audit"] == "refused"
    assert through[0]["wipe"] == {"result": "wiped 1"} and through[0]["secret"] == ["s3cr3t"]



async def _toggle(session: Any, **rule: Any) -> Any:
    return await session.call_tool("toggle", {"rule": json.dumps(rule)})


async def _names(session: Any) -> list[str]:
    return sorted(t.name for t in (await session.list_tools()).tools)


def test_other_sessions_see_everything_and_run_on(gateway):
    """One session's rules are its own: another session, open at the same time, lists and calls the hidden
    tool (on the lean path, which hands only sessions with rules to the SDK)."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError

    async def main() -> tuple[list[str], list[str], Any, Any]:
        async with httpx2.AsyncClient(headers=gateway.headers("vis"), timeout=60) as one_http, \
                httpx2.AsyncClient(headers=gateway.headers("vis"), timeout=60) as two_http:
            async with streamable_http_client(f"{gateway.url}/mcp", http_client=one_http) as (r1, w1), \
                    streamable_http_client(f"{gateway.url}/mcp", http_client=two_http) as (r2, w2):
                async with ClientSession(r1, w1) as one, ClientSession(r2, w2) as two:
                    await one.initialize()
                    await two.initialize()
                    await _names(two)
                    assert not (await _toggle(one, op="disable", names=["wipe", "public"])).is_error
                    with pytest.raises(MCPError) as refused:  # as an unknown tool is refused (-32602)
                        await one.call_tool("public", {"x": 1})
                    return await _names(one), await _names(two), refused.value, await two.call_tool("public", {"x": 2})

    mine, theirs, refused, ran = asyncio.run(main())
    assert mine == ["add", "toggle"] and theirs == ["add", "public", "toggle", "wipe"]
    assert ran.structured_content == {"result": 2} and not ran.is_error
    assert refused.error.code == -32602
    assert refused.error.message == "no tool named 'public' in namespace 'vis'; available: add, toggle"


def test_rules_outlive_a_worker_restart_and_apply_to_what_a_reload_adds(make_gateway, tmp_path: Path):
    """The gateway keeps the rules: a worker that is killed comes back with the session's tools still hidden,
    and a tool a reload adds with a hidden tag is hidden too (the worker matches the rules again)."""
    (tmp_path / "src" / "vis").mkdir(parents=True)
    (tmp_path / "src" / "vis" / "vis.py").write_text(FILE)
    gw = make_gateway(tmp_path / "src", env={"MANAGER_INTERNAL_TOKEN": "manager-token-abcdef"})

    async def body(session: Any) -> tuple[list[str], list[str], list[str], Any]:
        assert not (await _toggle(session, op="disable", tags=["admin"])).is_error
        before = await _names(session)
        pid = int(gw.namespace("vis")["pid"])
        os.kill(pid, signal.SIGKILL)
        await asyncio.to_thread(gw.wait_for, lambda: gw.namespace("vis")["pid"] not in (None, pid)
                                and gw.namespace("vis")["state"] == "ready", 60, "the worker's restart")
        after_restart = await _names(session)
        (gw.tools_dir / "vis" / "more.py").write_text(
            "from fastmcp.tools import tool\n\n\n@tool(tags={'admin'})\ndef purge() -> str:\n"
            "    'An admin tool added later.'\n    return 'purged'\n\n\n@tool\ndef hello() -> str:\n"
            "    'Anyone.'\n    return 'hi'\n")
        reloaded = await asyncio.to_thread(gw.post, "/reload", headers={"X-Manager-Token": "manager-token-abcdef"})
        assert reloaded.status_code == 200, reloaded.text
        try:
            await session.call_tool("purge", {})
        except Exception as exc:  # -32602, as for a tool the namespace does not have
            return before, after_restart, await _names(session), exc
        raise AssertionError("the hidden tool ran")

    before, after_restart, after_reload, purge = run_mcp(gw, "vis", body)
    assert before == after_restart == ["add", "public", "toggle"]
    assert after_reload == ["add", "hello", "public", "toggle"]
    assert "no tool named 'purge'" in str(purge)


def test_a_call_without_a_session_is_refused_as_fastmcp_refuses_it(gateway):
    """REST (and 2026-07-28, the relay socket) has no session to keep rules for: refused, as FastMCP refuses
    an unauthenticated 2026-07-28 request."""
    answer = gateway.post("/tools/toggle", "vis", {"rule": json.dumps({"op": "disable", "names": ["wipe"]})})
    assert answer.status_code == 500, answer.text
    message = answer.json()["error"]["message"]
    assert "Session visibility rules are scoped to a client, and this request has no session to keep them " \
           "for: REST calls, the relay socket and MCP 2026-07-28 requests have none" in message, message
    assert gateway.post("/tools/wipe", "vis", {"x": 3}).json() == {"result": "wiped 3"}


def test_hiding_the_listed_version_of_a_versioned_tool_lists_the_highest_left(gateway):
    """Rules that hide a versioned tool's listed (highest) version but not the others: the session's list
    shows the highest version left, with its own schema, and a call that names no version runs it, as in
    FastMCP; asking for the hidden version is refused."""

    async def body(session: Any) -> tuple[Any, Any, Any, Any]:
        assert not (await _toggle(session, op="disable", keys=["tool:add@2"])).is_error
        listed = next(t for t in (await session.list_tools()).tools if t.name == "add")
        plain = await session.call_tool("add", {"a": 5})
        with_b = await session.call_tool("add", {"a": 1, "b": 2})  # version 1 takes no `b`
        try:
            await session.call_tool("add", {"a": 1, "b": 2}, meta={"fastmcp": {"version": "2"}})
        except Exception as exc:
            return listed, plain, with_b, exc
        raise AssertionError("the hidden version ran")

    listed, plain, with_b, hidden = run_mcp(gateway, "vis", body)
    assert listed.description == "Adds nothing." and set(listed.input_schema["properties"]) == {"a"}
    assert listed.meta["fastmcp"]["version"] == "1" and listed.meta["fastmcp"]["versions"] == ["1"]
    assert plain.structured_content == {"result": 5} and not plain.is_error
    assert with_b.is_error
    assert "has no version '2'" in str(hidden)


def test_over_legacy_sse(gateway):
    """A legacy SSE connection is a session too: its rules hide for it."""
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client

    async def main() -> tuple[list[str], list[str]]:
        async with sse_client(f"{gateway.url}/sse", headers=gateway.headers("vis")) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                before = await _names(session)
                assert not (await _toggle(session, op="disable", tags=["admin"])).is_error
                return before, await _names(session)

    assert asyncio.run(main()) == (["add", "public", "toggle", "wipe"], ["add", "public", "toggle"])


def test_what_a_worker_reports_is_checked():
    """A worker runs the namespace's code: what it reports is taken only in the expected shape, and a rule
    list over the limit is refused (the relay drops the event; the session's rules stay as they were)."""
    from tooldock.runtime.mcp.visibility import MAX_RULES_BYTES, NOTICES, Hidden, SessionRules
    from tooldock.worker.protocol import LIST_CHANGED

    assert set(NOTICES) == LIST_CHANGED  # every notice a worker may pass on, the gateway sends

    listed = [{"name": "wipe"}, {"name": "add", "_meta": {"fastmcp": {"version": "2", "versions": ["2", "1"]}}}]
    garbled = Hidden({"tools": "wipe", "versions": ["add"], "resources": {"data://x": 1}, "prompts": None})
    assert garbled.tools_listed(listed) == listed and garbled.surface("resources", [{"uri": "data://x"}])
    hidden = Hidden({"tools": ["wipe", 3], "versions": {"add": ["1"]}})
    assert hidden.tools_listed(listed) == [
        {"name": "add", "_meta": {"fastmcp": {"version": "2", "versions": ["2"]}}}
    ]
    assert hidden.refuses_call(listed[1], {"fastmcp": {"version": "1"}})
    assert not hidden.refuses_call(listed[1], {"fastmcp": {"version": "2"}})
    assert not hidden.refuses_call(listed[1], None)
    # a listing of the highest version left is taken only as a valid tool of its name that names its version
    one = {"name": "add", "inputSchema": {"type": "object"}, "_meta": {"fastmcp": {"version": "1", "versions": ["1"]}}}
    flat = {**one, "description": "inlined"}
    replaced = Hidden({"versions": {"add": ["2"]}, "listed": {"add": one, "wipe": {"name": "other"}}, "inlined": {"add": flat}})
    assert replaced.tools_listed(listed) == [listed[0], one] and replaced.tools_listed(listed, inline=True)[1] == flat
    assert replaced.version_left("add", None) == "1" and replaced.version_left("add", {"fastmcp": {"version": "2"}}) is None
    for junk in ({"name": "add"}, {"name": "add", "inputSchema": {"type": "object"}}, "x", {"name": "add", "inputSchema": 3}):
        assert Hidden({"versions": {"add": ["2"]}, "listed": {"add": junk}}).listed == {}
    rules = SessionRules(lambda: 7)
    rules.keep({"rules": [{"enabled": False, "names": ["wipe"]}, "junk"], "hidden": {"tools": ["wipe"]}})
    assert rules.rules == [{"enabled": False, "names": ["wipe"]}] and rules.generation == 7
    with pytest.raises(ValueError, match="limited"):
        rules.keep({"rules": [{"names": ["x" * MAX_RULES_BYTES]}]})
    assert rules.rules == [{"enabled": False, "names": ["wipe"]}] and rules.fields() == {"visibility": rules.rules}


def test_a_worker_that_does_not_answer_leaves_the_last_answer_and_is_asked_again(monkeypatch):
    """After a reload a session's list asks its worker what the rules hide now; a worker whose loop is stuck
    (a tool blocking it) holds that list up for at most ASK_SECONDS, the last answer standing; the next list
    asks again and takes the answer."""
    from types import SimpleNamespace

    from tooldock.runtime.mcp import visibility

    monkeypatch.setattr(visibility, "ASK_SECONDS", 0.2)

    class Worker:
        def __init__(self) -> None:
            self.stuck, self.asked = True, 0

        async def request(self, op: str, **fields: Any) -> Any:
            assert op == "visibility.hidden" and fields == {"visibility": [{"enabled": False, "tags": ["x"]}]}
            self.asked += 1
            if self.stuck:
                await asyncio.Event().wait()
            return {"tools": ["new"]}

    worker, generation = Worker(), [1]
    engine: Any = SimpleNamespace(
        registry=SimpleNamespace(snapshot=SimpleNamespace(entries={"ns": SimpleNamespace(worker=worker)}))
    )
    rules = visibility.SessionRules(lambda: generation[0])
    rules.keep({"rules": [{"enabled": False, "tags": ["x"]}], "hidden": {"tools": ["old"]}})
    generation[0] = 2  # a reload

    async def main() -> tuple[float, Any, Any, Any]:
        started = asyncio.get_running_loop().time()
        stuck = await visibility.hidden_for(rules, "ns", engine)
        waited = asyncio.get_running_loop().time() - started
        worker.stuck = False
        answered = await visibility.hidden_for(rules, "ns", engine)
        again = await visibility.hidden_for(rules, "ns", engine)  # as of this generation: not asked again
        return waited, stuck, answered, again

    waited, stuck, answered, again = asyncio.run(main())
    assert 0.2 <= waited < 2
    assert stuck is not None and stuck.tools == frozenset({"old"})
    assert answered is not None and answered.tools == frozenset({"new"}) and again is answered
    assert worker.asked == 2 and rules.generation == 2
