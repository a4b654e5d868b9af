"""Context tools (fastmcp `Context`): the worker's progress, log messages and client requests reach the
MCP client that made the call, through worker protocol 2 and the gateway's relay; cancellation reaches
the worker. The conformance suite (test_conformance.py) covers sampling, progress and the elicitation
schemas; these cover what it does not."""

from __future__ import annotations

import asyncio
import time

import anyio
import httpx2
import mcp_types as types
from conftest import run_mcp
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client


def _session(gateway, namespace, **callbacks):
    async def open_session(body):
        async with httpx2.AsyncClient(headers=gateway.headers(namespace), timeout=60) as http:
            async with streamable_http_client(f"{gateway.url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write, **callbacks) as session:
                    await session.initialize()
                    return await body(session)

    return open_session


def test_elicitation_round_trips_through_the_gateway(gateway):
    asked: list[str] = []

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"value": "Ada"})

    async def body(session):
        return await session.call_tool("ask_name", {})

    result = asyncio.run(_session(gateway, "testing", elicitation_callback=on_elicit)(body))
    assert asked == ["What is your name?"]
    assert result.is_error is False and result.content[0].text == "hello Ada"


def test_a_client_without_elicitation_gets_a_clear_tool_error(gateway):
    async def body(session):
        return await session.call_tool("ask_name", {})

    result = run_mcp(gateway, "testing", body)  # this client declares no elicitation capability
    assert result.is_error is True
    assert "elicitation" in result.content[0].text.lower()


def test_log_messages_respect_the_sessions_level(gateway):
    heard: list[tuple[str, str]] = []

    async def on_log(params):
        heard.append((params.level, params.data["msg"] if isinstance(params.data, dict) else params.data))

    async def body(session):
        await session.set_logging_level("warning")
        return await session.call_tool("chatty", {})

    result = asyncio.run(_session(gateway, "testing", logging_callback=on_log)(body))
    assert result.content[0].text == "done"
    assert heard == [("warning", "a warning line")]


def test_context_tools_work_over_rest_without_an_mcp_client(gateway):
    reply = gateway.call("testing", "chatty")
    assert reply.status_code == 200, reply.text
    assert reply.json()["result"] == "done"
    refused = gateway.call("testing", "ask_name")
    assert refused.status_code == 500 and "elicitation" in refused.text.lower()


def test_cancelling_a_call_cancels_the_tool_in_the_worker(gateway, tmp_path):
    marker = tmp_path / "cancelled.txt"
    progressed: asyncio.Event | None = None  # made inside the client's event loop

    async def body(session):
        nonlocal progressed
        progressed = asyncio.Event()

        async def on_progress(value, total, message):
            progressed.set()

        async with anyio.create_task_group() as tg:
            async def call():
                await session.call_tool("watch_cancel", {"marker": str(marker)}, progress_callback=on_progress)

            tg.start_soon(call)
            await asyncio.wait_for(progressed.wait(), 30)  # the tool is running in the worker
            tg.cancel_scope.cancel()  # the SDK client sends notifications/cancelled
        await session.send_ping()  # the session is still usable
        return True

    started = time.monotonic()
    assert asyncio.run(_session(gateway, "testing")(body))
    deadline = time.monotonic() + 10
    while not marker.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.read_text() == "cancelled"
    assert time.monotonic() - started < 25  # nobody waited for the tool's 30 s
