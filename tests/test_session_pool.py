"""Warm sessions for Context tools (worker/sessionpool.py, issue 16): a Context tool's next call reuses the
worker's in-memory session instead of opening one; calls at the same time get sessions of their own and
each caller hears only its own log messages; a tool error leaves the session usable; clients that support
different things (here: elicitation) get different sessions."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx2
import mcp_types as types
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

TOOLS = '''import asyncio

from fastmcp import Context
from fastmcp.tools import tool


@tool
async def which(tag: str, ctx: Context) -> str:
    """Log the tag, wait a little, and say which session served the call."""
    await ctx.info(f"working on {tag}")
    await asyncio.sleep(0.3)
    session = ctx.session
    return str(id(getattr(session, "_connection", session)))  # the connection: SDK 2.x wraps it per request


@tool
async def fail_in(ctx: Context) -> str:
    """Log, then fail."""
    await ctx.info("about to fail")
    raise RuntimeError("on purpose")
'''


@pytest.fixture
def gateway(make_gateway, tmp_path: Path):
    (tmp_path / "src" / "pooled").mkdir(parents=True)
    (tmp_path / "src" / "pooled" / "tools.py").write_text(TOOLS)
    return make_gateway(tmp_path / "src")


async def _client(gateway, body, **callbacks):
    async with httpx2.AsyncClient(headers=gateway.headers("pooled"), timeout=60) as http:
        async with streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write, **callbacks) as session:
                await session.initialize()
                return await body(session)


def _text(result) -> str:
    assert not result.is_error, result
    return result.content[0].text


def test_context_calls_reuse_warm_sessions_and_keep_their_messages_apart(gateway):
    async def main():
        heard: dict[str, list[str]] = {"a": [], "b": []}

        def listener(name):
            async def on_log(params):
                heard[name].append(params.data["msg"] if isinstance(params.data, dict) else params.data)

            return on_log

        async def one_after_another(session):
            first = _text(await session.call_tool("which", {"tag": "first"}))
            second = _text(await session.call_tool("which", {"tag": "second"}))
            return first, second

        first, second = await _client(gateway, one_after_another)
        assert first == second  # the second call reused the first call's warm session

        async def tagged(tag):
            async def body(session):
                return _text(await session.call_tool("which", {"tag": tag}))

            return await _client(gateway, body, logging_callback=listener(tag))

        ids = await asyncio.gather(tagged("a"), tagged("b"))
        assert ids[0] != ids[1]  # at the same time: a session each
        assert heard == {"a": ["working on a"], "b": ["working on b"]}

        async def failing_then_again(session):
            failed = await session.call_tool("fail_in", {})
            assert failed.is_error
            return [_text(await session.call_tool("which", {"tag": "after"})) for _ in range(2)]

        after = await _client(gateway, failing_then_again)
        assert after[0] == after[1]

        async def on_elicit(context, params):
            return types.ElicitResult(action="decline")

        async def body(session):
            return _text(await session.call_tool("which", {"tag": "elicit"}))

        other_kind = await _client(gateway, body, elicitation_callback=on_elicit)
        assert other_kind not in (first, *ids, *after)  # a client that can elicit: a session that declared it

    asyncio.run(main())
