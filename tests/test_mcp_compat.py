"""The 2025-03-26 compatibility fallback in front of the SDK (tooldock/runtime/mcp/compat.py): json-only
Accept and JSON-RPC batches, by hand over HTTP."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tooldock.runtime.mcp.compat import MAX_BATCH

NS = "multi-tool"
JSON_ONLY = "application/json"
BOTH = "application/json, text/event-stream"


def init(request_id=1, version="2025-03-26"):
    return {
        "jsonrpc": "2.0", "id": request_id, "method": "initialize",
        "params": {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "compat", "version": "1"}},
    }


def post(gateway, payload, accept=JSON_ONLY, **headers):
    content = payload if isinstance(payload, bytes) else json.dumps(payload)
    base = {**gateway.headers(NS), "Content-Type": "application/json", "Accept": accept, **headers}
    return httpx.post(f"{gateway.url}/mcp", content=content, headers=base, timeout=60)


def open_session(gateway):
    """initialize + notifications/initialized, both as 2025-03-26 json-only single messages."""
    reply = post(gateway, init())
    assert reply.status_code == 200, reply.text
    sid = reply.headers["mcp-session-id"]
    note = post(gateway, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **{"Mcp-Session-Id": sid})
    assert note.status_code == 202 and note.content == b""
    return sid


def test_json_only_accept_without_a_version_header(gateway):
    reply = post(gateway, init())
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    body = reply.json()
    assert body["id"] == 1 and body["result"]["protocolVersion"] == "2025-03-26"
    assert body["result"]["serverInfo"]["name"] == "tooldock/multi-tool"
    sid = reply.headers["mcp-session-id"]
    note = post(gateway, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **{"Mcp-Session-Id": sid})
    assert note.status_code == 202
    listed = post(gateway, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, **{"Mcp-Session-Id": sid})
    assert listed.status_code == 200, listed.text
    assert listed.headers["content-type"].startswith("application/json")
    assert listed.headers["mcp-session-id"] == sid
    assert listed.json()["id"] == 2
    assert {t["name"] for t in listed.json()["result"]["tools"]} == {"add", "multiply", "reverse_text", "word_count"}
    called = post(gateway, {"jsonrpc": "2.0", "id": "c", "method": "tools/call",
                            "params": {"name": "add", "arguments": {"a": 2, "b": 3}}}, **{"Mcp-Session-Id": sid})
    assert called.status_code == 200 and called.json()["id"] == "c"
    assert called.json()["result"]["structuredContent"] == {"result": 5}


def test_json_only_single_message_errors_pass_through(gateway):
    unknown = post(gateway, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, **{"Mcp-Session-Id": "nope"})
    assert unknown.status_code == 404
    garbled = post(gateway, b'{"jsonrpc": "2.0", "id": 1, "method": "initia')
    assert garbled.status_code == 400 and garbled.json()["error"]["code"] == -32700
    # The explicit 2025-03-26 header gets the same leniency.
    explicit = post(gateway, init(), **{"MCP-Protocol-Version": "2025-03-26"})
    assert explicit.status_code == 200 and explicit.json()["result"]["protocolVersion"] == "2025-03-26"


def test_batches_in_order_with_the_session_carried(gateway):
    opened = post(gateway, [init(request_id="i")])
    assert opened.status_code == 200, opened.text
    assert opened.headers["content-type"].startswith("application/json")
    [answer] = opened.json()
    assert answer["id"] == "i" and answer["result"]["protocolVersion"] == "2025-03-26"
    sid = opened.headers["mcp-session-id"]

    batch = [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 7, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 4, "b": 5}}},
    ]
    reply = post(gateway, batch, **{"Mcp-Session-Id": sid})
    assert reply.status_code == 200, reply.text
    assert reply.headers["mcp-session-id"] == sid
    listed, called = reply.json()
    assert listed["id"] == 7 and "add" in {t["name"] for t in listed["result"]["tools"]}
    assert called["id"] == 8 and called["result"]["structuredContent"] == {"result": 9}


def test_batch_with_both_accept_types_and_initialize_inside(gateway):
    """A batch that accepts SSE too still goes through the adapter; initialize issues the session the rest
    of the batch uses."""
    batch = [
        init(request_id=1),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "reverse_text", "arguments": {"text": "abc"}}},
    ]
    reply = post(gateway, b"  \n" + json.dumps(batch).encode(), accept=BOTH)
    assert reply.status_code == 200, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    initialized, called = reply.json()
    assert initialized["id"] == 1 and "result" in initialized
    assert called["id"] == 2 and called["result"]["structuredContent"] == {"result": "cba"}
    assert reply.headers["mcp-session-id"]


def test_newer_versions_keep_the_strict_rules(gateway):
    sid = open_session(gateway)
    batch = [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]
    strict = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-06-18"}
    assert post(gateway, batch, accept=BOTH, **strict).status_code == 400
    assert post(gateway, batch, **strict).status_code == 406
    latest = {"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"}
    assert post(gateway, batch[0], **latest).status_code == 406
    assert post(gateway, batch[0], accept=BOTH, **latest).status_code == 200
    # No header: an initialize is judged by the version it asks for.
    assert post(gateway, init(version="2025-11-25")).status_code == 406
    assert post(gateway, [init(version="2025-06-18")], accept=BOTH).status_code == 400


def test_empty_and_oversized_batches(gateway):
    empty = post(gateway, [])
    assert empty.status_code == 400
    assert empty.json()["error"]["code"] == -32600 and "empty batch" in empty.json()["error"]["message"]
    sid = open_session(gateway)
    too_many = [{"jsonrpc": "2.0", "id": n, "method": "ping"} for n in range(MAX_BATCH + 1)]
    big = post(gateway, too_many, **{"Mcp-Session-Id": sid})
    assert big.status_code == 400
    assert big.json()["error"]["code"] == -32600
    assert f"at most {MAX_BATCH}" in big.json()["error"]["message"]


def test_malformed_batch_elements_get_their_own_errors(gateway):
    sid = open_session(gateway)
    batch = [
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
        42,
        {"jsonrpc": "1.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "multiply", "arguments": {"a": 3, "b": 4}}},
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "nope", "arguments": {}}},
    ]
    reply = post(gateway, batch, **{"Mcp-Session-Id": sid})
    assert reply.status_code == 200, reply.text
    answers = reply.json()
    assert [a["id"] for a in answers] == [1, None, 2, 3, 4, 5]
    assert "result" in answers[0]
    for bad in answers[1:4]:
        assert bad["error"]["code"] == -32600, bad
    assert answers[4]["result"]["structuredContent"] == {"result": 12}
    assert answers[5]["error"]["code"] == -32602 and "nope" in answers[5]["error"]["message"]


def test_batch_of_only_notifications_is_202(gateway):
    opened = post(gateway, init())
    sid = opened.headers["mcp-session-id"]
    batch = [
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 99}},
    ]
    reply = post(gateway, batch, **{"Mcp-Session-Id": sid})
    assert reply.status_code == 202 and reply.content == b""
    assert reply.headers["mcp-session-id"] == sid


@pytest.mark.parametrize("accept", [JSON_ONLY, BOTH])
def test_batch_for_an_unknown_session_is_404(gateway, accept):
    reply = post(gateway, [{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}], accept=accept,
                 **{"Mcp-Session-Id": "no-such-session"})
    assert reply.status_code == 404


def test_sse_clients_are_untouched(gateway):
    """A single message that accepts both types is the SDK's own answer: an SSE stream."""
    reply = post(gateway, init(), accept=BOTH)
    assert reply.status_code == 200
    assert reply.headers["content-type"].startswith("text/event-stream")


def test_a_json_only_client_is_not_left_waiting_by_a_tool_that_asks_it(gateway):
    """A json-only POST has no stream for the server's requests: a Context tool's question (elicitation
    here, though the client declared it) is refused at once in the client's name, not left to time out."""
    payload = init()
    payload["params"]["capabilities"] = {"elicitation": {}}
    base = {**gateway.headers("testing"), "Content-Type": "application/json", "Accept": JSON_ONLY}
    opened = httpx.post(f"{gateway.url}/mcp", json=payload, headers=base, timeout=60)
    assert opened.status_code == 200, opened.text
    session = {**base, "Mcp-Session-Id": opened.headers["mcp-session-id"]}
    note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert httpx.post(f"{gateway.url}/mcp", json=note, headers=session, timeout=60).status_code == 202
    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "ask_name", "arguments": {}}}
    started = time.monotonic()
    answer = httpx.post(f"{gateway.url}/mcp", json=call, headers=session, timeout=120)
    took = time.monotonic() - started
    assert answer.status_code == 200 and answer.headers["content-type"].startswith("application/json")
    assert took < 10, f"the call waited {took:.1f} s for an answer the client could never send"
    result = answer.json()["result"]
    assert result["isError"] and "cannot be sent elicitation/create during this call" in result["content"][0]["text"]
    # The session is still good: a plain call on it answers as before.
    plain = {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "chatty", "arguments": {}}}
    again = httpx.post(f"{gateway.url}/mcp", json=plain, headers=session, timeout=60)
    assert again.status_code == 200 and not again.json()["result"].get("isError"), again.text
