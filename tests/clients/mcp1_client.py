"""A tiny MCP client on the official SDK 1.x (`mcp>=1.23,<2`), run by tests/test_mcp_clients.py in its own
virtualenv. It connects over streamable HTTP (`streamablehttp_client`, protocol 2025-11-25) or legacy
SSE (`sse_client`, the 2024-11-05 transport), initializes, lists tools, calls one tool, calls an unknown
tool, and prints one JSON object on stdout.

usage: python mcp1_client.py {streamable|sse} URL TOOL ARGS_JSON [HEADER=VALUE ...]
"""

from __future__ import annotations

import asyncio
import json
import sys
import warnings
from importlib.metadata import version
from typing import Any

import httpx
from mcp import ClientSession
from mcp.client.sse import sse_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.exceptions import McpError

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from mcp.client.streamable_http import streamablehttp_client

# Every HTTP exchange the transport made, so the test can see the wire (session ids, versions, statuses).
EXCHANGES: list[dict[str, Any]] = []


async def _record(response: httpx.Response) -> None:
    request = response.request
    EXCHANGES.append(
        {
            "method": request.method,
            "path": request.url.path,
            "status": response.status_code,
            "request_protocol_version": request.headers.get("mcp-protocol-version"),
            "request_session_id": request.headers.get("mcp-session-id"),
            "response_session_id": response.headers.get("mcp-session-id"),
            "content_type": response.headers.get("content-type"),
        }
    )


def recording_client_factory(
    headers: dict[str, str] | None = None,
    timeout: httpx.Timeout | None = None,
    auth: httpx.Auth | None = None,
) -> httpx.AsyncClient:
    client = create_mcp_http_client(headers=headers, timeout=timeout, auth=auth)
    client.event_hooks["response"].append(_record)
    return client


async def exercise(session: ClientSession, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    init = await session.initialize()
    tools = await session.list_tools()
    result = await session.call_tool(tool, arguments)
    try:
        await session.call_tool("no-such-tool", {})
        unknown: dict[str, Any] | None = None
    except McpError as err:
        unknown = {"code": err.error.code, "message": err.error.message}
    return {
        "protocol_version": init.protocolVersion,
        "server_info": init.serverInfo.model_dump(mode="json", exclude_none=True),
        "capabilities": init.capabilities.model_dump(mode="json", by_alias=True, exclude_none=True),
        "tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools.tools],
        "call": result.model_dump(mode="json", by_alias=True, exclude_none=True),
        "unknown_tool_error": unknown,
        "ping": (await session.send_ping()) is not None,
    }


async def main(
    transport: str, url: str, tool: str, arguments: dict[str, Any], headers: dict[str, str]
) -> dict[str, Any]:
    if transport == "streamable":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            context = streamablehttp_client(
                url, headers=headers, httpx_client_factory=recording_client_factory
            )
        async with context as (read, write, get_session_id), ClientSession(read, write) as session:
            out = await exercise(session, tool, arguments)
            out["session_id"] = get_session_id()
    elif transport == "sse":
        sse = sse_client(url, headers=headers, httpx_client_factory=recording_client_factory)
        async with sse as (read, write), ClientSession(read, write) as session:
            out = await exercise(session, tool, arguments)
    else:
        raise SystemExit(f"unknown transport {transport!r}")
    return {"sdk_version": version("mcp"), "transport": transport, **out}


if __name__ == "__main__":
    transport_arg, url_arg, tool_arg, arguments_arg, *header_args = sys.argv[1:]
    extra = dict(h.split("=", 1) for h in header_args)
    output = asyncio.run(main(transport_arg, url_arg, tool_arg, json.loads(arguments_arg), extra))
    # Exchanges after the session closed (e.g. the DELETE that ends a streamable session) are included.
    output["exchanges"] = EXCHANGES
    print(json.dumps(output))
