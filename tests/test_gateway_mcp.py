"""MCP streamable HTTP through the official SDK client, and the HTTP rules in front of it."""

from __future__ import annotations

import json

import httpx
import mcp_types as types
import pytest
from conftest import run_mcp
from mcp.shared.exceptions import MCPError

INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}
ACCEPT = "application/json, text/event-stream"


def test_sdk_client_lists_multi_tool_with_input_schemas(gateway):
    async def body(session):
        return await session.list_tools()

    tools = {t.name: t for t in run_mcp(gateway, "multi-tool", body).tools}
    assert set(tools) == {"add", "multiply", "reverse_text", "word_count"}
    assert tools["add"].input_schema["properties"] == {
        "a": {"type": "number", "description": "First number."},
        "b": {"type": "number", "description": "Second number."},
    }
    assert tools["add"].input_schema["required"] == ["a", "b"]
    assert tools["reverse_text"].input_schema["properties"]["text"]["type"] == "string"
    assert tools["add"].title == "Add" and tools["add"].description == "Add two numbers together."
    assert tools["add"].output_schema["properties"]["result"]["type"] == "number"


def test_sdk_client_calls_add(gateway):
    async def body(session):
        return await session.call_tool("add", {"a": 2, "b": 3})

    result = run_mcp(gateway, "multi-tool", body)
    assert result.is_error is False
    assert result.structured_content == {"result": 5}
    assert result.content[0].text == "5.0"


def test_tool_failures_are_is_error_results(gateway):
    async def body(session):
        return await session.call_tool("add", {"a": "two", "b": 3})

    bad_args = run_mcp(gateway, "multi-tool", body)
    assert bad_args.is_error is True
    assert bad_args.structured_content["error"]["code"] == "invalid_arguments"
    said = "invalid_arguments: argument 'a': Input should be a valid number, unable to parse string as a number"
    assert bad_args.content[0].text == said + " (got 'two')"

    async def boom(session):
        return await session.call_tool("boom", {"message": "kaput"})

    raised = run_mcp(gateway, "testing", boom)
    assert raised.is_error is True
    assert raised.structured_content == {
        "error": {"code": "internal_error", "message": "ValueError: kaput", "details": {"exception": "ValueError"}}
    }
    assert "ValueError: kaput" in raised.content[0].text


def test_timeout_is_an_is_error_result(gateway):
    async def body(session):
        return await session.call_tool("nap", {"seconds": 5})

    result = run_mcp(gateway, "limited", body)
    assert result.is_error and result.structured_content["error"]["code"] == "execution_timeout"


def test_unknown_tool_is_a_protocol_error(gateway):
    async def body(session):
        with pytest.raises(MCPError) as caught:
            await session.call_tool("nope", {})
        return caught.value

    error = run_mcp(gateway, "multi-tool", body)
    assert error.code == types.INVALID_PARAMS and "nope" in error.message


def test_an_unknown_resource_has_each_protocol_versions_code(gateway):
    # -32002 up to 2025-11-25; 2026-07-28 retired it for -32602 (SEP-2164). Both carry the URI as data.
    async def body(session):
        with pytest.raises(MCPError) as caught:
            await session.read_resource("data://nope")
        return caught.value

    error = run_mcp(gateway, "multi-tool", body)
    assert (error.code, error.error.data) == (-32002, {"uri": "data://nope"}) and "data://nope" in error.message
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
            "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}
    request = {"jsonrpc": "2.0", "id": 1, "method": "resources/read", "params": {"uri": "data://nope", "_meta": meta}}
    headers = {**gateway.headers("multi-tool"), "Content-Type": "application/json", "Accept": ACCEPT,
               "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "resources/read", "Mcp-Name": "data://nope"}
    reply = httpx.post(f"{gateway.url}/mcp", content=json.dumps(request), headers=headers, timeout=60)
    error = reply.json()["error"]
    assert (error["code"], error.get("data")) == (types.INVALID_PARAMS, {"uri": "data://nope"}), reply.text


def test_ping(gateway):
    async def body(session):
        return await session.send_ping()

    assert run_mcp(gateway, "basic-tool", body) is not None


def post(gateway, namespace, payload, **headers):
    base = {"Content-Type": "application/json", "Accept": ACCEPT, **headers}
    return httpx.post(f"{gateway.url}/mcp", json=payload, headers={**gateway.headers(namespace), **base}, timeout=30)


def test_missing_and_unknown_namespace(gateway):
    missing = post(gateway, None, INIT)
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "missing_namespace"
    unknown = post(gateway, "nope", INIT)
    assert unknown.status_code == 404 and unknown.json()["error"]["code"] == "namespace_not_found"


def test_mcp_needs_the_bearer_token(gateway):
    reply = httpx.post(f"{gateway.url}/mcp", json=INIT, headers={"X-Namespace": "basic-tool", "Accept": ACCEPT})
    assert reply.status_code == 401 and reply.headers["www-authenticate"].startswith("Bearer")


def _session(gateway, namespace):
    reply = post(gateway, namespace, INIT)
    assert reply.status_code == 200, reply.text
    return reply.headers["mcp-session-id"]


def test_session_lifecycle_and_namespace_binding(gateway):
    sid = _session(gateway, "multi-tool")
    proto = {"MCP-Protocol-Version": "2025-11-25", "Mcp-Session-Id": sid}
    note = post(gateway, "multi-tool", {"jsonrpc": "2.0", "method": "notifications/initialized"}, **proto)
    assert note.status_code == 202 and note.content == b""
    listed = post(gateway, "multi-tool", {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, **proto)
    assert listed.status_code == 200 and '"add"' in listed.text
    # A session belongs to the namespace it was opened in.
    other = post(gateway, "basic-tool", {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, **proto)
    assert other.status_code == 404
    ended = httpx.delete(f"{gateway.url}/mcp", headers={**gateway.headers("multi-tool"), **proto})
    assert ended.status_code in (200, 204)
    after = post(gateway, "multi-tool", {"jsonrpc": "2.0", "id": 4, "method": "tools/list"}, **proto)
    assert after.status_code == 404


def test_malformed_json_rpc_body_is_a_clear_error(gateway):
    reply = httpx.post(
        f"{gateway.url}/mcp", content=b'{"jsonrpc": "2.0", "id": 1, "method": "initia',
        headers={**gateway.headers("basic-tool"), "Content-Type": "application/json", "Accept": ACCEPT},
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == types.PARSE_ERROR


def test_legacy_sse_client_lists_and_calls(gateway):
    """Protocol 2024-11-05 through `GET /sse` + `POST /messages`, with the SDK's SSE client."""
    import asyncio

    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client

    async def main():
        async with sse_client(f"{gateway.url}/sse", headers=gateway.headers("multi-tool")) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = await session.list_tools()
                return [t.name for t in tools.tools], await session.call_tool("add", {"a": 2, "b": 3})

    names, result = asyncio.run(main())
    assert names == ["add", "multiply", "reverse_text", "word_count"]
    assert result.structured_content == {"result": 5}


def test_legacy_endpoints_need_namespace_and_token(gateway):
    assert httpx.get(f"{gateway.url}/sse", headers={"X-Namespace": "multi-tool"}).status_code == 401
    missing = httpx.get(f"{gateway.url}/sse", headers=gateway.headers(None))
    assert missing.status_code == 400 and missing.json()["error"]["code"] == "missing_namespace"
    unknown = httpx.post(f"{gateway.url}/messages?session_id=abc", headers=gateway.headers("nope"), json={})
    assert unknown.status_code == 404


def test_mcp_and_legacy_sse_with_the_namespace_in_the_path(gateway):
    import asyncio

    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    plain = {"Authorization": f"Bearer {gateway.token}"}

    async def main():
        async with httpx2.AsyncClient(headers=plain, timeout=60) as http:
            async with streamable_http_client(f"{gateway.url}/ns/multi-tool/mcp", http_client=http) as (r, w):
                async with ClientSession(r, w) as session:
                    await session.initialize()
                    streamable = await session.call_tool("add", {"a": 1, "b": 1})
        async with sse_client(f"{gateway.url}/ns/basic-tool/sse", headers=plain) as (r, w):
            async with ClientSession(r, w) as session:
                await session.initialize()
                legacy = await session.call_tool("say_hello", {"name": "Path"})
        return streamable, legacy

    streamable, legacy = asyncio.run(main())
    assert streamable.structured_content == {"result": 2}
    assert legacy.structured_content == {"result": "Hello, Path!"}


@pytest.mark.parametrize(
    "method, headers, status",
    [
        ("POST", {"Content-Type": "text/plain", "Accept": ACCEPT}, 415),
        ("POST", {"Content-Type": "application/json", "Accept": "text/html"}, 406),
        ("POST", {"Content-Type": "application/json", "Accept": ACCEPT, "MCP-Protocol-Version": "1999-01-01"}, 400),
        ("POST", {"Content-Type": "application/json", "Accept": ACCEPT, "Origin": "http://evil.example"}, 403),
        ("POST", {"Content-Type": "application/json", "Accept": ACCEPT, "Mcp-Session-Id": "no-such-session"}, 404),
        ("GET", {"Accept": "text/html"}, 406),
    ],
)
def test_streamable_http_status_rules(gateway, method, headers, status):
    """Seed 000's HTTP rules for /mcp, one request each, by hand."""
    reply = httpx.request(method, f"{gateway.url}/mcp", content=json.dumps(INIT) if method == "POST" else None,
                          headers={**gateway.headers("multi-tool"), **headers}, timeout=30)
    assert reply.status_code == status, reply.text
    assert reply.text.strip()  # a reason, not an empty body (the SDK's 403 is plain text)


def test_allowed_origin_is_accepted(gateway):
    reply = post(gateway, "multi-tool", INIT, Origin="http://localhost:3000")
    assert reply.status_code == 200
