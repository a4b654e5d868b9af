"""A Context tool's session state (`ctx.set_state()` / `ctx.get_state()`) lasts for the MCP session that set
it, as FastMCP keeps it: from one call to the session's next, on the SDK's path and the lean path, over
streamable HTTP and legacy SSE, and no other session sees it. Before, every call was a session of its own in
the worker, and what a tool set was gone at the next call. `ctx.session_id` is stable for the session, and
is not its `Mcp-Session-Id`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from conftest import run_mcp

FILE = '''from fastmcp import Context
from fastmcp.tools import tool


@tool
async def remember(value: str, ctx: Context) -> str:
    """Keeps a value for this session."""
    await ctx.set_state("value", value)
    return "kept"


@tool
async def recall(ctx: Context) -> dict:
    """What this session kept, and its id."""
    return {"value": await ctx.get_state("value"), "session": ctx.session_id}
'''


@pytest.fixture
def gateway(make_gateway, tmp_path: Path):
    (tmp_path / "src" / "memo").mkdir(parents=True)
    (tmp_path / "src" / "memo" / "memo.py").write_text(FILE)
    return make_gateway(tmp_path / "src")


async def _session(session: Any) -> list[dict[str, Any]]:
    """Recall before and after remembering, then after a list (the lean path takes a session's calls once
    the SDK has served it a list or a call)."""
    seen = [(await session.call_tool("recall", {})).structured_content]
    await session.call_tool("remember", {"value": "blue"})
    seen.append((await session.call_tool("recall", {})).structured_content)
    await session.list_tools()
    await session.call_tool("remember", {"value": "green"})
    seen.append((await session.call_tool("recall", {})).structured_content)
    return seen


def test_state_lasts_for_the_session_that_set_it(gateway):
    first, second = run_mcp(gateway, "memo", _session), run_mcp(gateway, "memo", _session)
    for seen in (first, second):  # the second session starts with nothing: the first's state is its own
        assert [s["value"] for s in seen] == [None, "blue", "green"], seen
        assert len({s["session"] for s in seen}) == 1  # one id for the whole session
    assert first[0]["session"] != second[0]["session"]
    assert len(first[0]["session"]) == 32  # an opaque scope, not the session's Mcp-Session-Id (a UUID's hex)


def test_state_over_legacy_sse(gateway):
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client

    async def main() -> list[dict[str, Any]]:
        async with sse_client(f"{gateway.url}/sse", headers=gateway.headers("memo")) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return await _session(session)

    seen = asyncio.run(main())
    assert [s["value"] for s in seen] == [None, "blue", "green"], seen


def test_calls_without_a_session_keep_no_state(gateway):
    """REST has no session: a call's state is its own, as FastMCP keeps it for a sessionless client."""
    assert gateway.post("/tools/remember", "memo", {"value": "red"}).status_code == 200
    answer = gateway.post("/tools/recall", "memo", {})
    assert answer.status_code == 200, answer.text
    assert answer.json()["result"]["value"] is None
