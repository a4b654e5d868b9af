"""What a Context tool reads of the request it serves is what FastMCP serving the same file shows it: the
request's `_meta` (custom keys, `client_id`, a 2026-07-28 request's client capabilities), the request id,
the protocol version, the client's info and capabilities, the transport. A probe tool returns each, and the
same raw requests go to ToolDock's gateway and to FastMCP serving the file over streamable HTTP
(tests/conformance/serve_fastmcp.py): a 2025-11-25 session (its first call on the SDK's path, the next on
the lean path's stream) and 2026-07-28 requests. The session id is the one attribute that differs by design
(runtime/mcp/scope.py: the tool sees an opaque id of its session, never the `Mcp-Session-Id`): it is
compared by what a tool may rely on, stable within a session and different between sessions.

And a guard that asks a 2026-07-28 client only for what its request declares
(`ctx.request_context.meta["io.modelcontextprotocol/clientCapabilities"]`, the conformance scenario
`input-required-result-capability-check`) asks through the gateway as it asks through FastMCP."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

HERE = Path(__file__).parent
ACCEPT = "application/json, text/event-stream"
MODERN = "2026-07-28"
CAPS = "io.modelcontextprotocol/clientCapabilities"

PROBE = '''from fastmcp import Context
from fastmcp.tools import tool
from mcp.types import ClientCapabilities, CreateMessageRequest, CreateMessageRequestParams, ElicitationCapability
from mcp.types import InputRequiredResult, SamplingCapability, SamplingMessage, TextContent


def _dump(model):
    return model.model_dump(mode="json", by_alias=True, exclude_none=True) if model is not None else None


@tool
async def probe(ctx: Context) -> dict:
    """What this tool reads of the request it serves."""
    rc = ctx.request_context
    params = ctx.session.client_params
    return {
        "meta": dict(rc.meta or {}),
        "request_id": ctx.request_id,
        "client_id": ctx.client_id,
        "session_id": ctx.session_id,
        "protocol": rc.protocol_version,
        "client_info": _dump(params.client_info) if params is not None else None,
        "capabilities": _dump(params.capabilities) if params is not None else None,
        "sampling": ctx.session.check_client_capability(ClientCapabilities(sampling=SamplingCapability())),
        "elicitation": ctx.session.check_client_capability(ClientCapabilities(elicitation=ElicitationCapability())),
        "transport": ctx.transport,
    }


@tool
async def asks_what_is_declared(ctx: Context) -> str:
    """A 2026-07-28 guard that asks only for what the request declares."""
    if ctx.input_responses:
        return "answered: " + ",".join(sorted(ctx.input_responses))
    declared = (ctx.request_context.meta or {}).get("io.modelcontextprotocol/clientCapabilities") or {}
    if "sampling" not in declared:
        return "nothing to ask"
    message = SamplingMessage(role="user", content=TextContent(type="text", text="Pick a colour"))
    ask = CreateMessageRequest(params=CreateMessageRequestParams(messages=[message], max_tokens=20))
    return InputRequiredResult(input_requests={"colour": ask})
'''
CLIENT_INFO = {"name": "probe-client", "title": "Probe Client", "version": "1.2.3"}
CAPABILITIES = {"sampling": {}, "elicitation": {"form": {}}, "roots": {"listChanged": True},
                "experimental": {"acme": {"level": 2}}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "src" / "probe").mkdir(parents=True)
    (tmp_path / "src" / "probe" / "probe.py").write_text(PROBE)
    return tmp_path / "src"


@pytest.fixture
def fastmcp_url(folder: Path) -> Iterator[str]:
    """FastMCP serving the probe file over streamable HTTP (the conformance suite's peer server)."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, str(HERE / "conformance" / "serve_fastmcp.py"), str(port),
                             "--fixture", str(folder / "probe"), "--no-event-store"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None and time.monotonic() < deadline, "FastMCP did not start"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        proc.terminate()
        proc.wait(10)


class Server:
    """One of the two servers, spoken to with raw JSON-RPC over streamable HTTP."""

    def __init__(self, url: str, headers: dict[str, str]) -> None:
        self.url, self.headers = url, headers
        self.gateway: Any = None

    def post(self, body: dict[str, Any], **headers: str) -> httpx.Response:
        sent = {**self.headers, "Content-Type": "application/json", "Accept": ACCEPT, **headers}
        return httpx.post(self.url, content=json.dumps(body), headers=sent, timeout=60)

    def rpc(self, body: dict[str, Any], **headers: str) -> dict[str, Any]:
        """The JSON-RPC response to `body` (from a JSON answer or the SSE stream's messages)."""
        reply = self.post(body, **headers)
        assert reply.status_code == 200, reply.text
        if reply.headers.get("content-type", "").startswith("application/json"):
            return dict(reply.json())
        for line in reply.text.splitlines():
            if line.startswith("data: ") and line[6:].strip():
                message = json.loads(line[6:])
                if message.get("id") == body["id"] and "method" not in message:
                    return dict(message)
        raise AssertionError(f"no response in {reply.text!r}")

    def session(self) -> str:
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": CAPABILITIES, "clientInfo": CLIENT_INFO}}
        reply = self.post(init)
        assert reply.status_code == 200, reply.text
        sid = reply.headers["mcp-session-id"]
        done = self.post({"jsonrpc": "2.0", "method": "notifications/initialized"},
                         **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
        assert done.status_code == 202, done.text
        return sid

    def call(self, rid: Any, tool: str, meta: dict[str, Any] | None, sid: str | None = None,
             **extra: Any) -> dict[str, Any]:
        params: dict[str, Any] = {"name": tool, "arguments": {}, **extra}
        if meta is not None:
            params["_meta"] = meta
        body = {"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": params}
        if sid is not None:
            return self.rpc(body, **{"Mcp-Session-Id": sid, "MCP-Protocol-Version": "2025-11-25"})
        return self.rpc(body, **{"MCP-Protocol-Version": MODERN, "Mcp-Method": "tools/call", "Mcp-Name": tool})


@pytest.fixture
def servers(make_gateway, folder: Path, fastmcp_url: str) -> tuple[Server, Server]:
    gateway = make_gateway(folder)
    assert gateway.namespace("probe")["state"] == "ready", gateway.logs
    ours = Server(f"{gateway.url}/mcp", gateway.headers("probe"))
    ours.gateway = gateway
    return ours, Server(fastmcp_url, {})


def _read(answer: dict[str, Any]) -> dict[str, Any]:
    assert "result" in answer, answer
    result = answer["result"]
    assert not result.get("isError"), result
    return dict(result["structuredContent"])


def test_a_2025_session_reads_what_fastmcp_shows(servers):
    """Two calls on one session (the SDK's path, then the lean path's stream), and one on another session."""
    seen: dict[str, list[dict[str, Any]]] = {}
    meta = {"progressToken": "tok-1", "client_id": "client-7", "acme/trace": {"id": "t-1", "hops": [1, 2]}}
    for label, server in zip(("tooldock", "fastmcp"), servers, strict=True):
        sid, other = server.session(), server.session()
        seen[label] = [_read(server.call(41, "probe", meta, sid)), _read(server.call("req-42", "probe", None, sid)),
                       _read(server.call(43, "probe", {"x": 1}, other))]
    ours, theirs = seen["tooldock"], seen["fastmcp"]
    metrics = servers[0].gateway.get("/metrics").text  # the second call of a session took the lean path
    assert 'tooldock_mcp_lean_requests_total{method="tools/call",protocol="2025-11-25"} 1.0' in metrics
    for mine, fastmcp in zip(ours, theirs, strict=True):
        for name in fastmcp:
            if name != "session_id":
                assert mine[name] == fastmcp[name], f"{name}: ToolDock {mine[name]!r}, FastMCP {fastmcp[name]!r}"
    first, second, other = ours
    assert first["meta"] == meta and first["client_id"] == "client-7" and first["request_id"] == "41"
    assert second["request_id"] == "req-42" and second["meta"] == {}
    assert first["client_info"] == CLIENT_INFO and first["capabilities"]["experimental"] == {"acme": {"level": 2}}
    assert first["protocol"] == "2025-11-25" and first["transport"] == "streamable-http"
    for calls in (ours, theirs):  # stable within a session, another for another session
        assert isinstance(calls[0]["session_id"], str) and calls[0]["session_id"]
        assert calls[0]["session_id"] == calls[1]["session_id"] != calls[2]["session_id"]


def test_a_2026_07_28_request_reads_what_fastmcp_shows(servers):
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, CAPS: {"sampling": {}, "experimental": {"x": {}}},
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO, "acme/tenant": "blue", "client_id": "c-26"}
    ours, theirs = (_read(server.call(7, "probe", meta)) for server in servers)
    for name in theirs:
        if name != "session_id":  # a new one per 2026-07-28 request on both
            assert ours[name] == theirs[name], f"{name}: ToolDock {ours[name]!r}, FastMCP {theirs[name]!r}"
    assert ours["meta"] == meta and ours["protocol"] == MODERN and ours["request_id"] == "7"
    assert ours["sampling"] is True and ours["elicitation"] is False
    assert ours["client_info"] == CLIENT_INFO and ours["client_id"] == "c-26"


@pytest.mark.parametrize("declared", [{"sampling": {}}, {}], ids=["sampling", "nothing"])
def test_a_guard_asks_only_for_what_the_request_declares(servers, declared):
    """The conformance scenario's logic: the capabilities come from the request's `_meta`."""
    meta = {"io.modelcontextprotocol/protocolVersion": MODERN, CAPS: declared,
            "io.modelcontextprotocol/clientInfo": CLIENT_INFO}
    answers = [server.call(9, "asks_what_is_declared", meta)["result"] for server in servers]
    for result in answers:
        if declared:
            assert result["resultType"] == "input_required", result
            assert [r["method"] for r in result["inputRequests"].values()] == ["sampling/createMessage"]
        else:
            assert result["resultType"] == "complete" and result["content"][0]["text"] == "nothing to ask", result
    if declared:  # and the answer's round completes the call
        reply = {"role": "assistant", "content": {"type": "text", "text": "teal"}, "model": "m"}
        done = servers[0].call(10, "asks_what_is_declared", meta, inputResponses={"colour": reply})["result"]
        assert done["content"][0]["text"] == "answered: colour", done
