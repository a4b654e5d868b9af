"""The lean MCP path for 2026-07-28 requests (issue 16): a `tools/call` of a plain tool and a `tools/list`,
each a POST with no session, answered without the SDK's per-request machinery. Checked with raw HTTP,
answer by answer, against the same gateway with the path turned off (TOOLDOCK_LEAN_MCP=false): same status,
same JSON, same audit line. What the path leaves to the SDK (its validation ladder's rejections, `Mcp-Param-*`
headers and the tools that declare them, Context tools, task tools, clients that read tasks) is told apart
by the gateway's own count of lean requests (`tooldock_mcp_lean_requests_total`), and answered the same."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest
from test_mcp_lean import ACCEPT
from test_mcp_lean import TOOLS as SESSION_TOOLS

# The session tests' tools (add, boom, nap, chatty), and three more: a call to cancel, a header declaration,
# a task tool.
TOOLS = SESSION_TOOLS + '''

import asyncio
from pathlib import Path
from typing import Annotated

from pydantic import Field


@tool
async def hold(marker: str) -> str:
    """Wait 30 s; if cancelled, write 'cancelled' to the marker file."""
    try:
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        Path(marker).write_text("cancelled")
        raise
    return "held"


@tool
def region(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    """Echo the region, which a 2026-07-28 client also sends as Mcp-Param-Region."""
    return region


@tool
def nightly_sum(a: int, b: int) -> int:
    """A tool the namespace serves as an optional task."""
    return a + b
'''
CONFIG = 'tasks:\n  optional: ["nightly_*"]\n'
MODERN = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "raw-modern", "version": "7"},
}
LEAN_COUNT = re.compile(r'^tooldock_mcp_lean_requests_total\{method="([^"]+)",protocol="([^"]+)"\} (\S+)$', re.M)


@pytest.fixture
def tools(tmp_path: Path) -> Path:
    (tmp_path / "src" / "lean").mkdir(parents=True)
    (tmp_path / "src" / "lean" / "tools.py").write_text(TOOLS)
    (tmp_path / "src" / "lean" / "tooldock.yaml").write_text(CONFIG)
    return tmp_path / "src"


def post(gateway, body: Any, *, name: str | None = None, extra: list[tuple[str, str]] = (),
         method: str | None = None) -> httpx.Response:
    """A 2026-07-28 POST with the routing headers a client sends (Mcp-Name for a call)."""
    headers = list(gateway.headers().items()) + [("Content-Type", "application/json"), ("Accept", ACCEPT),
                                                 ("MCP-Protocol-Version", MODERN)]
    headers.append(("Mcp-Method", method or body["method"]))
    if name is not None:
        headers.append(("Mcp-Name", name))
    content = json.dumps(body).encode()
    return httpx.post(f"{gateway.url}/ns/lean/mcp", content=content, headers=headers + list(extra), timeout=60)


def request(method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] | None = None, rid: int = 1):
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": {**(params or {}), "_meta": meta or META}}


def lean_counts(gateway) -> dict[tuple[str, str], float]:
    text = httpx.get(f"{gateway.url}/metrics", headers=gateway.headers(), timeout=30).text
    return {(m, p): float(n) for m, p, n in LEAN_COUNT.findall(text)}


def answered(reply: httpx.Response) -> tuple[int, str, Any]:
    return reply.status_code, reply.headers.get("content-type", "").split(";")[0], reply.json()


CALLS = [  # (what is sent, whether the lean path answers it)
    pytest.param(request("tools/list"), None, [], True, id="list"),
    pytest.param(request("tools/call", {"name": "add", "arguments": {"a": 2, "b": 40}}), "add", [], True, id="call"),
    pytest.param(request("tools/call", {"name": "add", "arguments": {"a": "two", "b": 40}}), "add", [], True,
                 id="bad-argument"),
    pytest.param(request("tools/call", {"name": "add"}), "add", [], True, id="no-arguments"),
    pytest.param(request("tools/call", {"name": "boom", "arguments": {}}), "boom", [], True, id="tool-fails"),
    # left to the SDK
    pytest.param(request("tools/call", {"name": "missing", "arguments": {}}), "missing", [], False, id="unknown"),
    pytest.param(request("tools/call", {"name": "chatty", "arguments": {}}), "chatty", [], False, id="context-tool"),
    pytest.param(request("tools/call", {"name": "region", "arguments": {"region": "eu"}}), "region",
                 [("Mcp-Param-Region", "eu")], False, id="declares-a-header"),
    pytest.param(request("tools/call", {"name": "region", "arguments": {"region": "eu"}}), "region", [], False,
                 id="declared-header-missing"),
    pytest.param(request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}), "add",
                 [("Mcp-Param-Other", "x")], False, id="param-header"),
    pytest.param(request("tools/call", {"name": "nightly_sum", "arguments": {"a": 1, "b": 2}}), "nightly_sum", [],
                 False, id="task-tool"),
    pytest.param(request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}},
                         {**META, "io.modelcontextprotocol/clientCapabilities": {
                             "extensions": {"io.modelcontextprotocol/tasks": {}}}}),
                 "add", [], False, id="client-reads-tasks"),
    pytest.param(request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}), "multiply", [], False,
                 id="name-header-differs"),
    pytest.param(request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}}), "add",
                 [("Mcp-Method", "tools/call")], False, id="method-header-twice"),
    pytest.param(request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}},
                         {**META, "io.modelcontextprotocol/clientInfo": "not an object"}), "add", [], False,
                 id="bad-client-info"),
    pytest.param(request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}},
                         {"io.modelcontextprotocol/protocolVersion": MODERN}), "add", [], False, id="no-envelope"),
    pytest.param(request("tools/list", {"cursor": "abc"}), None, [], False, id="cursor"),
]


@pytest.fixture
def pair(make_gateway, tools, tmp_path):
    lean = make_gateway(tools, env={"TOOLDOCK_LOG_DIR": str(tmp_path / "audit-lean")})
    sdk = make_gateway(tools, env={"TOOLDOCK_LEAN_MCP": "false", "TOOLDOCK_LOG_DIR": str(tmp_path / "audit-sdk")})
    return lean, sdk


@pytest.mark.parametrize("body, name, extra, taken", CALLS)
def test_modern_lean_answers_are_the_sdks_answers(pair, body, name, extra, taken):
    lean, sdk = pair
    before = lean_counts(lean)
    got, expected = answered(post(lean, body, name=name, extra=extra)), answered(post(sdk, body, name=name, extra=extra))
    counted = lean_counts(lean).get((body["method"], MODERN), 0) - before.get((body["method"], MODERN), 0)
    assert counted == (1 if taken else 0), (got, expected)
    assert not lean_counts(sdk)  # the other gateway has the path turned off
    assert got[:2] == expected[:2], (got, expected)
    if body["params"].get("arguments", {}).get("a") == "two":  # fastmcp words a validation failure with its input
        assert got[2]["result"]["isError"] and expected[2]["result"]["isError"]
        assert got[2]["result"]["content"][0]["text"].split(":")[0] == expected[2]["result"]["content"][0]["text"].split(":")[0]
    else:
        assert got[2] == expected[2]


def test_modern_lean_calls_are_audited_as_the_sdks(pair, tmp_path):
    lean, sdk = pair
    call = request("tools/call", {"name": "add", "arguments": {"a": 20, "b": 22}}, rid=5)
    for gateway in pair:
        assert post(gateway, call, name="add").json()["result"]["structuredContent"] == {"result": 42}
    assert lean_counts(lean)[("tools/call", MODERN)] == 1

    def audit(folder: str) -> dict:
        path = tmp_path / folder
        lean.wait_for(lambda: any(f.read_text() for f in path.glob("*.jsonl")), 10, f"the audit line in {folder}")
        lines = [json.loads(line) for f in path.glob("*.jsonl") for line in f.read_text().splitlines()]
        (line,) = [entry for entry in lines if entry.get("tool") == "add"]
        return {k: v for k, v in line.items() if k not in ("time", "latency_ms", "request_id", "generation")}

    line = audit("audit-lean")
    assert line == audit("audit-sdk")
    assert line["protocol"] == MODERN and line["client_info"] == {"name": "raw-modern", "version": "7"}
    assert line["front_end"] == "mcp" and line["status"] == "ok" and line["client"] == "127.0.0.1"


def test_a_modern_client_that_goes_away_cancels_its_lean_call(make_gateway, tools, tmp_path):
    """2026-07-28 cancels a request by closing its response stream: the worker is told to stop the tool."""
    gateway = make_gateway(tools)
    marker = tmp_path / "cancelled.txt"
    body = json.dumps(request("tools/call", {"name": "hold", "arguments": {"marker": str(marker)}}))
    headers = {"Content-Type": "application/json", "Accept": ACCEPT, "MCP-Protocol-Version": MODERN,
               "Mcp-Method": "tools/call", "Mcp-Name": "hold", "X-Request-Id": "modern-gone-1"}
    gateway.post_and_leave("/ns/lean/mcp", headers, body)  # after 1 s the tool is running (it waits 30 s)
    gateway.wait_for(lambda: marker.exists() and marker.read_text() == "cancelled", 15, "the tool to be cancelled")
    gateway.wait_for(lambda: "client disconnected before the answer" in gateway.logs, 10, "the disconnect line")
    assert "Traceback" not in gateway.logs
    assert lean_counts(gateway)[("tools/call", MODERN)] == 1
    again = post(gateway, request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}}), name="add")
    assert again.json()["result"]["structuredContent"] == {"result": 2}
