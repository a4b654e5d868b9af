"""The lean MCP path (issue 16): on an established session, `tools/call` of a plain tool, `tools/list` and
`ping` are answered as one JSON response without the SDK's machinery. Checked with raw HTTP, answer by
answer, against the same gateway with the path turned off (TOOLDOCK_LEAN_MCP=false): same results, same
errors; Context tools, batches and other methods still go through the SDK; a cancelled call answers
-32800; the audit log records lean calls like the others."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

TOOLS = '''import time

from fastmcp import Context
from fastmcp.tools import tool


@tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


@tool
def boom() -> str:
    """Always fails."""
    raise ValueError("no luck")


@tool
def nap(seconds: float) -> str:
    """Sleep a while."""
    time.sleep(seconds)
    return "rested"


@tool
async def chatty(ctx: Context) -> str:
    """A Context tool: logs a line."""
    await ctx.info("hello")
    return "said"
'''
ACCEPT = "application/json, text/event-stream"


class Session:
    """A raw streamable-HTTP MCP session (2025-11-25)."""

    def __init__(self, gateway, namespace: str = "lean", capabilities: dict | None = None) -> None:
        self.url = f"{gateway.url}/ns/{namespace}/mcp"
        self.http = httpx.Client(headers={**gateway.headers(), "Accept": ACCEPT}, timeout=60)
        self.ids = iter(range(1, 10_000))
        init = {"protocolVersion": "2025-11-25", "capabilities": capabilities or {},
                "clientInfo": {"name": "raw-test", "version": "9"}}
        first = self.post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        self.sid = first.headers["mcp-session-id"]
        self.http.headers.update({"Mcp-Session-Id": self.sid, "MCP-Protocol-Version": "2025-11-25"})
        self.post({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def post(self, message) -> httpx.Response:
        return self.http.post(self.url, content=json.dumps(message), headers={"Content-Type": "application/json"})

    def rpc(self, method: str, params: dict | None = None) -> tuple[str, dict]:
        """(the answer's content type, the JSON-RPC answer without its id)."""
        message = {"jsonrpc": "2.0", "id": next(self.ids), "method": method, **({"params": params} if params else {})}
        reply = self.post(message)
        kind = reply.headers["content-type"].split(";")[0]
        if kind == "text/event-stream":
            datas = [line[5:] for line in reply.text.splitlines() if line.startswith("data:") and line[5:].strip()]
            answer = next(json.loads(d) for d in reversed(datas) if "id" in json.loads(d))
        else:
            answer = reply.json()
        assert answer.pop("id") == message["id"]
        return kind, answer


def cancel_midway(session: Session, rid: int, call: Callable[[], Any], wait: float) -> Any:
    """Run `call` (the JSON-RPC request `rid`) in a thread and send `notifications/cancelled` for it after
    `wait` seconds; its answer, which must come well before the tool would have finished."""
    answers: list = []
    caller = threading.Thread(target=lambda: answers.append(call()))
    started = time.monotonic()
    caller.start()
    time.sleep(wait)
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": rid, "reason": "bored"}}
    assert session.post(cancel).status_code == 202
    caller.join(20)
    assert time.monotonic() - started < 15
    return answers[0]


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    (tmp_path / "src" / "lean").mkdir(parents=True)
    (tmp_path / "src" / "lean" / "tools.py").write_text(TOOLS)
    return tmp_path / "src"


CASES = [
    ("tools/list", None),
    ("tools/call", {"name": "add", "arguments": {"a": 2, "b": 40}}),
    ("tools/call", {"name": "add", "arguments": {"a": "two", "b": 40}}),
    ("tools/call", {"name": "boom", "arguments": {}}),
    ("tools/call", {"name": "missing", "arguments": {}}),
    ("tools/call", {"name": "add"}),
    ("ping", None),
]


def test_lean_answers_are_the_sdks_answers(make_gateway, tools, tmp_path):
    lean = make_gateway(tools, env={"TOOLDOCK_LOG_DIR": str(tmp_path / "audit"), "TOOLDOCK_MAX_BODY_BYTES": "4096"})
    sdk = make_gateway(tools, env={"TOOLDOCK_LEAN_MCP": "false"})
    fast, slow = Session(lean), Session(sdk)
    assert fast.rpc("tools/list")[0] == "text/event-stream"  # a session's first list goes through the SDK
    slow.rpc("tools/list")
    for method, params in CASES:
        (kind, answer), (_, expected) = fast.rpc(method, params), slow.rpc(method, params)
        lean_path = params is None or params["name"] != "missing"  # an unknown tool: the SDK's answer
        assert kind == ("application/json" if lean_path else "text/event-stream"), (method, params)
        if "error" in expected:  # the SDK words its argument validation failures its own way
            assert answer["error"]["code"] == expected["error"]["code"], (answer, expected)
        elif method == "tools/call" and expected["result"].get("isError"):
            assert answer["result"]["isError"] and answer["result"]["content"][0]["text"].split(":")[0] == (
                expected["result"]["content"][0]["text"].split(":")[0]
            )
        else:
            assert answer == expected, (method, params)
    missing = fast.post({"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "add", "arguments": {}}})
    assert missing.json()["result"]["isError"] is True
    raw = '{"jsonrpc": "2.0", "id": 78, "method": "tools/call", "params": {"name": "add", "arguments": {"a": NaN, "b": 1}}}'
    refused = fast.http.post(fast.url, content=raw, headers={"Content-Type": "application/json"})
    assert refused.json()["error"]["code"] == -32602 and "is nan, which is not a JSON number" in refused.json()["error"]["message"]

    # a body over the limit is handed on whole (read part, replayed, the rest unread): the SDK's 413
    big = {"jsonrpc": "2.0", "id": 79, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}},
           "pad": "x" * 8000}
    assert fast.post(big).status_code == 413

    # what the lean path leaves to the SDK: Context tools, other methods, batches, unknown sessions
    assert fast.rpc("tools/call", {"name": "chatty", "arguments": {}})[0] == "text/event-stream"
    assert fast.rpc("resources/list")[0] == "text/event-stream"
    assert fast.rpc("tools/list", {"cursor": "abc"})[0] == "text/event-stream"
    gone = fast.http.post(fast.url, content=json.dumps({"jsonrpc": "2.0", "id": 5, "method": "ping"}),
                          headers={"Content-Type": "application/json", "Mcp-Session-Id": "not-a-session"})
    assert gone.status_code == 404

    deadline = time.monotonic() + 10
    lines: list[dict] = []
    while time.monotonic() < deadline and sum(1 for l in lines if l.get("tool") == "add") < 3:
        time.sleep(0.1)
        lines = [json.loads(l) for f in (tmp_path / "audit").glob("*.jsonl") for l in f.read_text().splitlines()]
    add = [l for l in lines if l.get("tool") == "add"]
    assert add and all(l["front_end"] == "mcp" and l["client_info"] == {"name": "raw-test", "version": "9"} for l in add)
    assert {l["protocol"] for l in add} == {"2025-11-25"}


def test_a_lean_call_is_cancelled_by_notifications_cancelled(make_gateway, tools):
    gateway = make_gateway(tools)
    session = Session(gateway)
    session.rpc("tools/list")
    message = {"jsonrpc": "2.0", "id": 900, "method": "tools/call", "params": {"name": "nap", "arguments": {"seconds": 30}}}
    answer = cancel_midway(session, 900, lambda: session.post(message).json(), 1.0)
    assert answer == {"jsonrpc": "2.0", "id": 900, "error": {"code": -32800, "message": "Request cancelled"}}
    assert session.rpc("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})[1]["result"]["structuredContent"] == {
        "result": 2
    }


def test_lean_requests_get_the_sdks_host_and_origin_checks_every_time(make_gateway, tools):
    """On a loopback bind the SDK refuses a foreign Host (421) or Origin (403), DNS-rebinding protection.
    The lean path remembers the pairs it let in, so a session it has served still has every other pair
    checked: a foreign one after good ones is refused, and good ones after it still pass."""
    gateway = make_gateway(tools)
    session = Session(gateway)
    session.rpc("tools/list")
    call = {"jsonrpc": "2.0", "id": 77, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}
    for _ in range(2):
        assert session.post(call).json()["result"]["structuredContent"] == {"result": 3}
        host = session.http.post(session.url, content=json.dumps(call),
                                 headers={"Content-Type": "application/json", "Host": "rebound.example"})
        assert host.status_code == 421
        origin = session.http.post(session.url, content=json.dumps(call),
                                   headers={"Content-Type": "application/json", "Origin": "http://rebound.example"})
        assert origin.status_code == 403
    allowed = session.http.post(session.url, content=json.dumps(call),
                                headers={"Content-Type": "application/json", "Origin": gateway.url})
    assert allowed.status_code == 200 and allowed.json()["result"]["structuredContent"] == {"result": 3}
