"""Context tool calls handed straight to the worker's fastmcp server (worker/direct.py, issue 16): calls at
the same time each hear only their own log messages, a failed call leaves the next one working, the tool's
server session knows what the calling client declared, and the client's log level holds."""

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
    """Log the tag, wait a little, and say what the client declared."""
    await ctx.info(f"working on {tag}")
    await ctx.debug(f"details of {tag}")
    await asyncio.sleep(0.3)
    capabilities = ctx.session.client_capabilities
    return "elicits" if capabilities is not None and capabilities.elicitation is not None else "plain"


@tool
async def fail_in(ctx: Context) -> str:
    """Log, then fail."""
    await ctx.info("about to fail")
    raise RuntimeError("on purpose")
'''


@pytest.fixture
def gateway(make_gateway, tmp_path: Path):
    (tmp_path / "src" / "direct").mkdir(parents=True)
    (tmp_path / "src" / "direct" / "tools.py").write_text(TOOLS)
    return make_gateway(tmp_path / "src")


async def _client(gateway, body, level=None, **callbacks):
    async with httpx2.AsyncClient(headers=gateway.headers("direct"), timeout=60) as http:
        async with streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write, **callbacks) as session:
                await session.initialize()
                if level is not None:
                    await session.set_logging_level(level)
                return await body(session)


def _text(result) -> str:
    assert not result.is_error, result
    return result.content[0].text


def test_context_calls_keep_their_messages_apart_and_see_their_clients(gateway):
    async def main():
        heard: dict[str, list[str]] = {"a": [], "b": [], "quiet": []}

        def listener(name):
            async def on_log(params):
                heard[name].append(params.data["msg"] if isinstance(params.data, dict) else params.data)

            return on_log

        async def tagged(tag, level="info"):
            async def body(session):
                return _text(await session.call_tool("which", {"tag": tag}))

            return await _client(gateway, body, level, logging_callback=listener(tag))

        assert await asyncio.gather(tagged("a"), tagged("b")) == ["plain", "plain"]
        assert heard["a"] == ["working on a"] and heard["b"] == ["working on b"]  # info and up: no debug line
        assert await tagged("quiet", "warning") == "plain"
        assert heard["quiet"] == []

        async def failing_then_again(session):
            failed = await session.call_tool("fail_in", {})
            assert failed.is_error and "on purpose" in failed.content[0].text
            return [_text(await session.call_tool("which", {"tag": "after"})) for _ in range(2)]

        assert await _client(gateway, failing_then_again) == ["plain", "plain"]

        async def on_elicit(context, params):
            return types.ElicitResult(action="decline")

        async def body(session):
            return _text(await session.call_tool("which", {"tag": "elicit"}))

        assert await _client(gateway, body, elicitation_callback=on_elicit) == "elicits"

    asyncio.run(main())
