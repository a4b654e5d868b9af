"""One tool file served by ToolDock and by FastMCP in process, read through the same official client: the
resources, prompts, tools that fail by their result, and their failures answer alike (result, JSON-RPC
code and message), and what ToolDock words its own way (an unknown prompt) says what there is instead."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import VERSIONED_CALC, run_mcp
from mcp.shared.exceptions import MCPError

FILE = '''import enum

from fastmcp import Context
from fastmcp.prompts import Message, prompt
from fastmcp.resources import resource
from fastmcp.tools import ToolResult, tool
from mcp.types import TextContent
from pydantic import BaseModel, Field


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(BaseModel):
    x: int
    y: int = 0


@tool
def moved(p: Point, c: Color = Color.RED, by: Point | None = Field(default=None, description="an offset")) -> Point:
    """A model argument, an enum with a default, an optional model with a description: $refs, and siblings."""
    return Point(x=p.x + (by.x if by else 0), y=p.y)


@tool
def soft(x: int) -> ToolResult:
    """Fails by its result, not by raising."""
    return ToolResult(content=[TextContent(type="text", text=f"no stock for {x}")], structured_content={"x": x},
                      is_error=True)


@tool
async def soft_ctx(x: int, ctx: Context) -> ToolResult:
    """The same, with a Context."""
    await ctx.info("checking")
    return ToolResult(content=[TextContent(type="text", text=f"no stock for {x}")], structured_content={"x": x},
                      is_error=True)


@tool(description="Described by its decorator, not a docstring.", meta={"openai/outputTemplate": "ui://w.html"},
      tags={"ui", "demo"})
def decorated(x: int) -> int:
    return x


@tool
def as_dict(x: int) -> dict:
    """Plain JSON results (the worker makes their body itself): an object."""
    return {"x": x, "nested": {"list": [1, 2.5, None, "\u00fc", True]}, "empty": []}


@tool
def as_list(x: int) -> list[int]:
    """A list, wrapped in structured content."""
    return list(range(x))


@tool
def as_empty(x: int) -> list:
    """An empty list: no content block."""
    return []


@tool
def as_text(x: int) -> str:
    """Text."""
    return "\u00fc\u2028" * x


@tool
def as_none(x: int) -> None:
    """Nothing."""
    return None


@tool
def as_float(x: int) -> float:
    """A float."""
    return x / 3


@tool
def untyped(x: int):
    """No return annotation: no output schema."""
    return {"x": x, "y": [x]}


@resource("data://config", mime_type="application/json", tags={"settings"})
def config() -> dict:
    """Config."""
    return {"a": 1}


@resource("data://bytes", mime_type="application/octet-stream")
def blob() -> bytes:
    """Bytes."""
    return b"\\x00\\x01"


@resource("data://user/{uid}")
def user(uid: int) -> dict:
    """A user by id."""
    return {"uid": uid}


@resource("data://fail")
def fail() -> str:
    """Fails."""
    raise ValueError("nope")


@prompt(tags={"social"})
def greet(name: str, polite: bool = True) -> str:
    """Greet someone."""
    return f"Hello {name}" + ("!" if polite else "")


@prompt
def convo(topic: str) -> list:
    """A conversation."""
    return [Message("Tell me about " + topic), Message("Sure", role="assistant")]


@prompt
def refuses(x: str) -> str:
    """Fails."""
    raise RuntimeError("bad prompt")
'''

PLAIN = ("as_dict", "as_list", "as_empty", "as_text", "as_none", "as_float", "untyped")
READS = ("data://config", "data://bytes", "data://user/7", "data://user/x", "data://fail")
PROMPTS = (("greet", {"name": "Ann"}), ("greet", {"name": "Ann", "polite": "false"}), ("convo", {"topic": "cats"}),
           ("refuses", {"x": "1"}), ("greet", {}))


async def _answers(session: Any) -> dict[str, Any]:
    """What each read and prompt answers: the result without `_meta`, or the error's code and message."""
    out: dict[str, Any] = {}
    asks = [(f"read {uri}", session.read_resource, (uri,)) for uri in READS]
    asks += [(f"get {name} {arguments}", session.get_prompt, (name, arguments)) for name, arguments in PROMPTS]
    asks += [(f"call {name}", session.call_tool, (name, {"x": 3})) for name in ("soft", "soft", "soft_ctx")]
    asks += [("call decorated", session.call_tool, ("decorated", {"x": 3}))]
    asks += [(f"call {name}", session.call_tool, (name, {"x": 3})) for name in PLAIN for _ in range(2)]
    asks += [("call moved", session.call_tool, ("moved", {"p": {"x": 1}, "c": "blue", "by": {"x": 2}}))]
    listed = await session.list_tools()
    # in the order the file defines them, as a FastMCP server's decorators register them
    out["order"] = ([t.name for t in listed.tools], [str(r.uri) for r in (await session.list_resources()).resources],
                    [t.uri_template for t in (await session.list_resource_templates()).resource_templates],
                    [p.name for p in (await session.list_prompts()).prompts])
    lists = [("tool", listed.tools), ("prompt", (await session.list_prompts()).prompts)]
    lists += [("resource", (await session.list_resources()).resources)]
    for kind, items in lists:
        for item in items:  # as listed, but for FastMCP's empty `_meta.fastmcp` block, which ToolDock leaves out
            dumped = item.model_dump(mode="json", by_alias=True, exclude_none=True)
            meta = dumped.pop("_meta", None) or {}
            if meta.get("fastmcp") == {"tags": []}:
                meta.pop("fastmcp")
            out[f"list {kind} {item.name}"] = {**dumped, "_meta": meta}
    for label, method, args in asks:
        try:
            result = await method(*args)
        except MCPError as err:
            out[label] = ("error", err.error.code, err.error.message)
        else:
            dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
            dumped.pop("_meta", None)
            out[label] = dumped
    return out


def fastmcp_server(path: Path) -> Any:
    """The tool file served by a FastMCP server of its own, as its author would serve it without ToolDock."""
    from fastmcp import FastMCP
    from fastmcp.decorators import get_fastmcp_meta

    spec = importlib.util.spec_from_file_location("like_fastmcp", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server = FastMCP("direct")
    for obj in vars(module).values():  # in the file's order, as its decorators would on a server
        kind = getattr(get_fastmcp_meta(obj), "type", None)
        if kind == "tool":
            server.add_tool(obj)
        elif kind in ("resource", "template"):
            server.add_resource(obj)
        elif kind == "prompt":
            server.add_prompt(obj)
    return server


def _direct(path: Path, answers: Callable[[Any], Awaitable[dict[str, Any]]] | None = None) -> dict[str, Any]:
    """What `answers` (`_answers`) reads from the file served by FastMCP in process, through the same client."""
    from fastmcp import Client

    async def main() -> dict[str, Any]:
        async with Client(fastmcp_server(path)) as client:  # in memory; its session is the SDK's ClientSession
            return await (answers or _answers)(client.session)

    return anyio.run(main)


@pytest.fixture
def served(make_gateway, tmp_path: Path):
    """Listing schemas as FastMCP's default does, `$ref`s inlined (TOOLDOCK_INLINE_SCHEMA_REFS)."""
    (tmp_path / "src" / "alike").mkdir(parents=True)
    (tmp_path / "src" / "alike" / "alike.py").write_text(FILE)
    return make_gateway(tmp_path / "src", env={"TOOLDOCK_INLINE_SCHEMA_REFS": "true"})


def test_resources_and_prompts_answer_as_fastmcp_answers(served, tmp_path: Path):
    through = run_mcp(served, "alike", _answers)
    direct = _direct(tmp_path / "src" / "alike" / "alike.py")
    assert set(through) == set(direct)
    assert through["order"][0] == ["moved", "soft", "soft_ctx", "decorated", *PLAIN]  # not alphabetical: as written
    for label in direct:
        assert through[label] == direct[label], label
    # the failures are among them, worded as FastMCP words them (no ToolDock code in front)
    assert through["read data://fail"] == ("error", -32603, "Error reading resource 'data://fail': nope")
    # a tool's `ToolResult(is_error=True)` is its own failure, sent as it made it (it was sent as a success),
    # on the SDK's path (the first call), the lean path (the second) and a Context tool's stream
    soft = {"content": [{"type": "text", "text": "no stock for 3"}], "structuredContent": {"x": 3}, "isError": True,
            "resultType": "complete"}
    assert through["call soft"] == through["call soft_ctx"] == soft
    # a tool described by `@tool(description=...)` instead of a docstring is served, with that description
    assert through["list tool decorated"]["description"] == "Described by its decorator, not a docstring."
    # the author's `_meta`, and the tags as FastMCP lists them (its clients filter by them)
    assert through["list tool decorated"]["_meta"] == {"openai/outputTemplate": "ui://w.html",
                                                       "fastmcp": {"tags": ["demo", "ui"]}}
    assert through["list prompt greet"]["_meta"] == {"fastmcp": {"tags": ["social"]}}
    assert through["list resource config"]["_meta"] == {"fastmcp": {"tags": ["settings"]}}
    assert through["list tool soft"]["_meta"] == {}  # FastMCP's `{"tags": []}` is left out
    # schemas with their `$ref`s inlined, as FastMCP's default lists them (the listing above equals its own)
    assert '"$ref"' not in json.dumps(through["list tool moved"]) and through["call moved"]["structuredContent"] == {"x": 3, "y": 0}
    assert through["list tool moved"]["inputSchema"]["properties"]["by"]["description"] == "an offset"


def test_schemas_are_listed_as_declared_unless_asked(make_gateway, tmp_path: Path):
    """By default `$defs` and `$ref`s are kept, as the spec asks (SEP-1613; the conformance suite checks it);
    REST's OpenAPI document keeps them either way (as components)."""
    (tmp_path / "src" / "alike").mkdir(parents=True)
    (tmp_path / "src" / "alike" / "alike.py").write_text(FILE)
    inlined = make_gateway(tmp_path / "src", env={"TOOLDOCK_INLINE_SCHEMA_REFS": "true"})
    declared = make_gateway(tmp_path / "src")

    async def listed(session: Any) -> dict[str, Any]:
        return {t.name: t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in (await session.list_tools()).tools}

    flat, kept = run_mcp(inlined, "alike", listed)["moved"], run_mcp(declared, "alike", listed)["moved"]
    assert kept["inputSchema"]["properties"]["p"] == {"$ref": "#/$defs/Point"} and "Point" in kept["inputSchema"]["$defs"]
    assert flat["inputSchema"]["properties"]["p"]["properties"]["x"] == {"type": "integer"}
    assert "$defs" not in flat["inputSchema"] and flat["outputSchema"] == kept["outputSchema"]  # no $ref in it
    for gateway in (inlined, declared):
        document = gateway.get("/openapi.json", "alike").json()
        assert "Point" in json.dumps(document.get("components", {}))


def test_a_result_that_says_it_failed_is_a_rest_failure(served):
    for name in ("soft", "soft_ctx"):
        answer = served.post(f"/tools/{name}", "alike", {"x": 3})
        assert answer.status_code == 500, answer.text
        assert answer.json()["error"] == {"code": "internal_error", "message": "no stock for 3"}


def test_an_unknown_prompt_names_the_ones_there_are(served):
    async def body(session: Any) -> MCPError:
        with pytest.raises(MCPError) as caught:
            await session.get_prompt("nope", {})
        return caught.value

    error = run_mcp(served, "alike", body)
    assert error.error.code == -32602
    assert error.error.message == "no prompt named 'nope' in namespace 'alike'; available: convo, greet, refuses"


VERSIONED = VERSIONED_CALC + '''

@tool
def plain(x: int) -> int:
    """No versions."""
    return x
'''


def test_each_version_of_a_tool_can_be_called(make_gateway, tmp_path: Path):
    """FastMCP's client asks for a version with `call_tool(..., version=...)` (`_meta.fastmcp.version`). The
    highest is listed, with all the versions, as FastMCP lists it, and each runs when asked for (the highest
    ran in its place, and later any other was refused), on the SDK's path (a session's first call) and the
    lean path (after a list); a version the tool does not have is refused with those it has, as a version
    asked of a tool that has none is."""
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    (tmp_path / "src" / "ver").mkdir(parents=True)
    (tmp_path / "src" / "ver" / "ver.py").write_text(VERSIONED)
    gateway = make_gateway(tmp_path / "src")

    async def main() -> tuple[dict[str, Any], dict[str, Any]]:
        out: dict[str, Any] = {}

        async def call(label: str, name: str, version: str | None) -> None:
            try:
                out[label] = (await client.call_tool(name, {"x": 3}, version=version)).structured_content
            except Exception as exc:  # the client raises the JSON-RPC error
                out[label] = str(exc)

        transport = StreamableHttpTransport(f"{gateway.url}/mcp", headers=gateway.headers("ver"))
        async with Client(transport) as client:
            await call("sdk path", "calc", "1")
            listed = {t.name: t.meta for t in await client.list_tools()}
            for label, name, version in (("lean path", "calc", "1"), ("served", "calc", "2"), ("unasked", "calc", None),
                                         ("not there", "calc", "3"), ("none there", "plain", "1")):
                await call(label, name, version)
        return listed, out

    listed, out = anyio.run(main)
    assert listed["calc"] == {"fastmcp": {"version": "2", "versions": ["2", "1"]}} and not listed["plain"]
    assert out["sdk path"] == out["lean path"] == {"result": 3}, out  # version 1 returns x
    assert out["served"] == out["unasked"] == {"result": 6}
    assert out["not there"] == "tool 'calc' has no version '3' here: its versions are '2', '1'; call it without " \
                              "a version (the highest), or with one of them"
    assert out["none there"] == "tool 'plain' has no versions here, so no version '1': call it without one"


DEPENDENT = '''from fastmcp.dependencies import Depends, Progress
from fastmcp.resources import resource
from fastmcp.server.dependencies import get_context as current
from fastmcp.tools import tool
from fastmcp.utilities.authorization import require_scopes


def connection() -> str:
    return "conn"


@tool
def with_db(x: int, db: str = Depends(connection)) -> str:
    """A dependency fastmcp resolves."""
    return f"{x}:{db}"


@tool
async def counted(x: int, progress: Progress = Progress()) -> str:
    """Progress as a dependency: it needs the call's Context."""
    await progress.set_total(2)
    await progress.increment()
    return "counted"


@tool
def in_context(x: int) -> bool:
    """The call's Context by fastmcp's get_context(), under another name."""
    return current().request_id is not None


@tool(auth=require_scopes("admin"))
def admin_only(x: int) -> int:
    """Admins only."""
    return x


@resource("data://admin", auth=require_scopes("admin"))
def admin_data() -> str:
    """Admins only."""
    return "secret"
'''


async def _dependent(session: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"tools": [t.name for t in (await session.list_tools()).tools],
                           "resources": [str(r.uri) for r in (await session.list_resources()).resources]}
    for name in ("with_db", "counted", "in_context"):
        for path in ("first", "again"):  # a session's first call goes through the SDK, later ones the lean path
            result = await session.call_tool(name, {"x": 2}, progress_callback=_ignore)
            out[f"{name} {path}"] = (result.is_error, result.structured_content)
    return out


async def _ignore(*_: Any) -> None:
    return None


def test_dependencies_and_auth_checks_as_fastmcp_serves_them(make_gateway, tmp_path: Path):
    """A tool whose fastmcp dependencies need the call's Context (`Progress()`, or `get_context()` in its body)
    runs with one, as in FastMCP (it failed: 'Failed to resolve dependency'); a component with an `auth=`
    check, which FastMCP hides from a caller without a token and ToolDock cannot apply, is not served, and
    the namespace says why (it was served to every caller)."""
    (tmp_path / "src" / "deps").mkdir(parents=True)
    (tmp_path / "src" / "deps" / "deps.py").write_text(DEPENDENT)
    gateway = make_gateway(tmp_path / "src")
    through = run_mcp(gateway, "deps", _dependent)
    assert through == _direct(tmp_path / "src" / "deps" / "deps.py", _dependent)
    assert through["tools"] == ["with_db", "counted", "in_context"] and through["resources"] == []
    assert through["counted again"] == (False, {"result": "counted"})
    assert through["in_context first"] == through["in_context again"] == (False, {"result": True})
    problems = {p["line"]: p for p in gateway.get("/namespaces").json()["namespaces"][0]["problems"]}
    assert problems[33]["code"] == "auth_check" and problems[38]["code"] == "auth_check", problems
    assert "tool 'admin_only' has an authorization check (auth=...), which ToolDock cannot apply" in \
        problems[33]["message"]
    assert "resource 'admin_data' has an authorization check" in problems[38]["message"]  # its decorator's line


VERSIONED_OTHERS = '''from fastmcp.prompts import prompt
from fastmcp.resources import resource


@resource("data://motd", version="1")
def motd_v1() -> str:
    """Old message."""
    return "v1"


@resource("data://motd", version="2")
def motd_v2() -> str:
    """New message."""
    return "v2"


@prompt(version="1")
def greet() -> str:
    """Old greeting."""
    return "hello v1"


@prompt(name="greet", version="3")
def greet_v3() -> str:
    """New greeting."""
    return "hello v3"
'''


async def _versioned(session: Any) -> dict[str, Any]:
    read = await session.read_resource("data://motd")
    got = await session.get_prompt("greet", {})
    return {"resources": [(str(r.uri), r.description) for r in (await session.list_resources()).resources],
            "prompts": [(p.name, p.description) for p in (await session.list_prompts()).prompts],
            "read": read.contents[0].text, "get": got.messages[0].content.text}


def test_versions_of_a_resource_or_prompt_serve_the_highest(make_gateway, tmp_path: Path):
    """Versions of one resource or prompt (`version=...`) are one, and the highest is served, as FastMCP
    serves them (the first defined was served, and the others reported as duplicates)."""
    (tmp_path / "src" / "vers").mkdir(parents=True)
    (tmp_path / "src" / "vers" / "vers.py").write_text(VERSIONED_OTHERS)
    gateway = make_gateway(tmp_path / "src")
    through = run_mcp(gateway, "vers", _versioned)
    assert through == _direct(tmp_path / "src" / "vers" / "vers.py", _versioned)
    assert through == {"resources": [("data://motd", "New message.")], "prompts": [("greet", "New greeting.")],
                       "read": "v2", "get": "hello v3"}
    assert gateway.get("/namespaces").json()["namespaces"][0]["problems"] == []


def test_an_upstream_fastmcp_servers_versions_can_be_called(make_gateway, tmp_path: Path):
    """An upstream FastMCP server lists a tool's versions (`_meta.fastmcp.versions`) and serves each; through
    an upstream namespace a FastMCP client's `version=` reaches it (the gateway refused every version but the
    highest, though the listing offered them), on the SDK's path and the lean path, and a version the server
    does not list is refused as before."""
    import shlex
    import sys

    from conftest import FIXTURES
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(FIXTURES / 'upstreams' / 'fastmcp_versions.py'))}"
    (tmp_path / "src" / "up").mkdir(parents=True)
    (tmp_path / "src" / "up" / "tools.toml").write_text(
        f'active_toolsets = ["*"]\n[[servers]]\nnamespace = "v"\ncommand = "{command}"\n'
    )
    gateway = make_gateway(tmp_path / "src")

    async def main() -> dict[str, Any]:
        out: dict[str, Any] = {}

        async def call(label: str, version: str | None) -> None:
            try:
                out[label] = (await client.call_tool("v_calc", {"x": 5}, version=version)).structured_content
            except Exception as exc:  # the client raises the JSON-RPC error
                out[label] = str(exc)

        transport = StreamableHttpTransport(f"{gateway.url}/mcp", headers=gateway.headers("up"))
        async with Client(transport) as client:
            await call("sdk path", "1")
            out["listed"] = {t.name: t.meta for t in await client.list_tools()}["v_calc"]
            for label, version in (("lean path", "1"), ("highest", "2"), ("unasked", None), ("not there", "3")):
                await call(label, version)
        return out

    out = anyio.run(main)
    assert out["listed"]["fastmcp"]["versions"] == ["2", "1"] and out["listed"]["fastmcp"]["version"] == "2"
    assert out["sdk path"] == out["lean path"] == {"result": 6}, out  # version 1's answer: 5 + 1
    assert out["highest"] == out["unasked"] == {"result": 10}
    assert out["not there"] == "tool 'v_calc' has no version '3' here: its versions are '2', '1'; call it " \
                               "without a version (the highest), or with one of them"
