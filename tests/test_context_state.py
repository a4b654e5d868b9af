"""A Context tool's session state (`ctx.set_state()` / `ctx.get_state()`) lasts for the MCP session that set
it, as FastMCP keeps it: from one call to the session's next, on the SDK's path and the lean path, over
streamable HTTP and legacy SSE, and no other session sees it. Before, every call was a session of its own in
the worker, and what a tool set was gone at the next call. `ctx.session_id` is stable for the session, and
is not its `Mcp-Session-Id`."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Any

import pytest
from conftest import run_mcp

FILE = '''from fastmcp import Context
from fastmcp.prompts import prompt
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


@tool
async def forget(ctx: Context) -> str:
    """Drops what this session kept."""
    await ctx.delete_state("value")
    return "forgotten"


@tool
async def hoard(size: int, ctx: Context, key: str = "big") -> str:
    """Keeps a value of `size` characters."""
    await ctx.set_state(key, "x" * size)
    return "hoarded"


@prompt
async def greeting(name: str, ctx: Context) -> str:
    """Remembers who was greeted."""
    await ctx.set_state("value", f"greeted {name}")
    return f"Hello, {name}!"
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


def test_state_outlives_the_worker_and_a_reload(make_gateway, tmp_path: Path):
    """The gateway keeps a session's values: a worker that is killed, or swapped for a new one by a reload,
    comes back with what the session kept (FastMCP's server keeps them for as long as it runs; behind the
    gateway the session outlives its workers)."""
    (tmp_path / "src" / "memo").mkdir(parents=True)
    (tmp_path / "src" / "memo" / "memo.py").write_text(FILE)
    gw = make_gateway(tmp_path / "src", env={"MANAGER_INTERNAL_TOKEN": "manager-token-abcdef"})

    async def recall(session: Any) -> Any:
        return (await session.call_tool("recall", {})).structured_content["value"]

    async def body(session: Any) -> list[Any]:
        await session.call_tool("remember", {"value": "blue"})
        seen = [await recall(session)]
        pid = int(gw.namespace("memo")["pid"])
        os.kill(pid, signal.SIGKILL)
        await asyncio.to_thread(
            gw.wait_for,
            lambda: gw.namespace("memo")["pid"] not in (None, pid) and gw.namespace("memo")["state"] == "ready",
            60,
            "the worker's restart",
        )
        seen.append(await recall(session))
        before = gw.namespace("memo")["pid"]
        (gw.tools_dir / "memo" / "more.py").write_text("from fastmcp.tools import tool\n\n\n@tool\ndef one() -> int:\n"
                                                       "    'One.'\n    return 1\n")
        reloaded = await asyncio.to_thread(gw.post, "/reload", headers={"X-Manager-Token": "manager-token-abcdef"})
        assert reloaded.status_code == 200, reloaded.text
        assert gw.namespace("memo")["pid"] != before  # a new worker
        seen.append(await recall(session))
        await session.call_tool("forget", {})
        seen.append(await recall(session))
        return seen

    assert run_mcp(gw, "memo", body) == ["blue", "blue", "blue", None]


def test_a_prompt_keeps_state_for_its_session(gateway):
    """A prompt (or resource) that takes a Context keeps state for the session, as a tool does."""

    async def body(session: Any) -> Any:
        got = await session.get_prompt("greeting", {"name": "Ada"})
        assert got.messages[0].content.text == "Hello, Ada!"
        return (await session.call_tool("recall", {})).structured_content["value"]

    assert run_mcp(gateway, "memo", body) == "greeted Ada"


def test_a_session_keeps_at_most_a_mebibyte(gateway):
    """A value that would take the session's state over the limit, or a key over its length, fails the
    tool's call with what to do; what the session kept is unchanged."""

    async def body(session: Any) -> tuple[Any, Any, Any, Any]:
        await session.call_tool("remember", {"value": "blue"})
        small = await session.call_tool("hoard", {"size": 1000})
        big = await session.call_tool("hoard", {"size": 2_000_000})
        long_key = await session.call_tool("hoard", {"size": 1, "key": "k" * 2000})
        return small, big, long_key, (await session.call_tool("recall", {})).structured_content["value"]

    small, big, long_key, value = run_mcp(gateway, "memo", body)
    assert not small.is_error
    assert big.is_error and "limited to 1048576 bytes of JSON" in big.content[0].text, big
    assert "ctx.delete_state()" in big.content[0].text
    assert long_key.is_error and "at most 1024 characters" in long_key.content[0].text, long_key
    assert value == "blue"


def test_what_a_worker_reports_of_state_is_checked():
    """A worker runs the namespace's code: a `state` event is taken only in the expected shape and within
    the limit (the relay drops anything else); a null value deletes."""
    from tooldock.runtime.mcp.session import SessionValues
    from tooldock.worker.protocol import MAX_STATE_BYTES

    values = SessionValues()
    assert values.fields() == {}
    values.keep({"key": "a", "value": {"value": 1}})
    for junk in ({"key": 3, "value": {}}, {"key": "b", "value": "text"}, "junk", {"key": "k" * 2000, "value": {}}):
        with pytest.raises(ValueError):
            values.keep(junk)
    with pytest.raises(ValueError, match="limited"):
        values.keep({"key": "b", "value": {"value": "x" * MAX_STATE_BYTES}})
    assert values.fields() == {"state": {"a": {"value": 1}}}
    values.keep({"key": "a", "value": None})
    assert values.fields() == {}
