"""The `_meta` a tool's author gives reaches MCP clients as FastMCP serves it: a tool's, resource's and prompt's
(`meta=...`: MCP Apps and the OpenAI Apps SDK link their UI there) and a `ToolResult`'s, on the SDK's path, the
lean path, a Context tool's stream and 2026-07-28 requests. fastmcp's own key (its tags) and the worker's
internal server's `serverInfo` stamp are left out."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_mcp
from test_mcp_lean_modern import post, request

TOOLS = '''from fastmcp import Context
from fastmcp.prompts import prompt
from fastmcp.resources import resource
from fastmcp.tools import ToolResult, tool
from mcp.types import TextContent

UI = {"openai/outputTemplate": "ui://widget/board.html", "ui": {"resourceUri": "ui://widget/board.html"}}


@tool(meta=UI)
def board(size: int) -> ToolResult:
    """A board, with the widget that shows it."""
    return ToolResult(
        content=[TextContent(type="text", text=f"{size}x{size}")],
        structured_content={"size": size},
        meta={"openai/widgetSessionId": f"s{size}"},
    )


@tool
def plain(x: int) -> int:
    """No meta at all."""
    return x


@tool
async def narrated(ctx: Context) -> ToolResult:
    """A Context tool whose result has meta."""
    await ctx.info("drawing")
    return ToolResult(content=[TextContent(type="text", text="done")], meta={"trace": "t-1"})


@resource("ui://widget/board.html", mime_type="text/html+skybridge", meta={"openai/widgetPrefersBorder": True})
def widget() -> str:
    """The board's widget."""
    return "<div id=board></div>"


@prompt(meta={"category": "games"})
def play(opponent: str) -> str:
    """Ask for a game."""
    return f"Play against {opponent}"
'''
UI = {"openai/outputTemplate": "ui://widget/board.html", "ui": {"resourceUri": "ui://widget/board.html"}}


@pytest.fixture
def gateway(make_gateway, tmp_path: Path):
    (tmp_path / "src" / "lean").mkdir(parents=True)
    (tmp_path / "src" / "lean" / "tools.py").write_text(TOOLS)
    return make_gateway(tmp_path / "src")


def test_the_authors_meta_reaches_a_session_on_every_path(gateway):
    async def body(session):
        listed = {t.name: t.meta for t in (await session.list_tools()).tools}
        results = [await session.call_tool("board", {"size": 3}) for _ in range(2)]  # the SDK's path, then lean
        narrated = await session.call_tool("narrated", {})
        plain = await session.call_tool("plain", {"x": 1})
        resources = {str(r.uri): r.meta for r in (await session.list_resources()).resources}
        prompts = {p.name: p.meta for p in (await session.list_prompts()).prompts}
        return listed, results, narrated, plain, resources, prompts

    listed, results, narrated, plain, resources, prompts = run_mcp(gateway, "lean", body)
    assert listed == {"board": UI, "plain": None, "narrated": None}
    for result in results:
        assert result.meta == {"openai/widgetSessionId": "s3"} and result.structured_content == {"size": 3}
    assert narrated.meta == {"trace": "t-1"} and plain.meta is None
    assert resources == {"ui://widget/board.html": {"openai/widgetPrefersBorder": True}}
    assert prompts == {"play": {"category": "games"}}
    assert 'tooldock_mcp_lean_requests_total{method="tools/call"' in gateway.get("/metrics").text


def test_a_2026_07_28_call_carries_the_tools_meta_beside_the_gateways_stamp(gateway):
    # The stamp names the gateway's server for the namespace, never the worker's internal one (a Context tool
    # runs through the worker's own FastMCP server, which stamps its results too).
    for name, arguments, own in (("board", {"size": 4}, {"openai/widgetSessionId": "s4"}),
                                 ("narrated", {}, {"trace": "t-1"})):
        reply = post(gateway, request("tools/call", {"name": name, "arguments": arguments}), name=name)
        assert reply.status_code == 200, reply.text
        meta = reply.json()["result"]["_meta"]
        stamp = meta.pop("io.modelcontextprotocol/serverInfo")
        assert meta == own and stamp["name"] == "tooldock/lean", (name, stamp)
    listed = post(gateway, request("tools/list"))
    assert {t["name"]: t.get("_meta") for t in listed.json()["result"]["tools"]}["board"] == UI
