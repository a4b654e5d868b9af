"""The HTTP edge (issue 15): bad input is a clear 4xx on REST, MCP and legacy SSE (never a 500 or a
traceback), request ids on every answer and in the worker's log lines, quiet client disconnects, no access
line by default, JSON logs, CORS."""

from __future__ import annotations

import json
import queue
import shutil
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from conftest import EXAMPLES, FIXTURES, Gateway

ORIGIN = "https://app.example.com"
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
ODD_TOOLS = '''
from fastmcp.tools import tool


@tool
def lone_surrogate() -> str:
    """Return a string with a lone surrogate in it."""
    return "a" + chr(0xD800) + "b"


@tool
def too_big() -> float:
    """Return infinity."""
    return float("inf")
'''


@pytest.fixture(scope="module")
def gw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """examples/ + the testing fixture + a namespace whose tools return what JSON cannot carry; CORS on."""
    tmp = tmp_path_factory.mktemp("edge")
    tools = tmp / "tools"
    shutil.copytree(EXAMPLES, tools, ignore=shutil.ignore_patterns("__pycache__", "README.md"))
    shutil.copytree(FIXTURES / "tools" / "testing", tools / "testing", ignore=shutil.ignore_patterns("__pycache__"))
    (tools / "odd").mkdir()
    (tools / "odd" / "odd.py").write_text(ODD_TOOLS)
    env = {"CORS_ORIGINS": f"{ORIGIN},http://localhost:*"}
    gateway = Gateway(tools, tmp / "gateway.log", env).start()
    yield gateway
    gateway.stop()


def _no_traceback(text: str) -> None:
    assert "Traceback" not in text and 'File "' not in text, text[:2000]


def _mcp_session(gw: Gateway, namespace: str = "multi-tool") -> dict[str, str]:
    """Headers of an initialized 2025-11-25 session."""
    headers = {**gw.headers(namespace), **MCP_HEADERS, "MCP-Protocol-Version": "2025-11-25"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "edge-test", "version": "1"}}}
    reply = httpx.post(f"{gw.url}/mcp", headers=headers, json=init, timeout=30)
    assert reply.status_code == 200, reply.text
    headers["Mcp-Session-Id"] = reply.headers["mcp-session-id"]
    httpx.post(f"{gw.url}/mcp", headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    return headers


def _rpc_answer(reply: httpx.Response) -> dict:
    """The JSON-RPC answer of a POST /mcp, from a JSON body or the last `data:` of an SSE body."""
    if reply.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in reply.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return json.loads(data[-1])
    return reply.json()


def call_body(name: str, arguments: str, rid: int = 7) -> str:
    return (f'{{"jsonrpc":"2.0","id":{rid},"method":"tools/call",'
            f'"params":{{"name":"{name}","arguments":{arguments}}}}}')


# -- bad input -----------------------------------------------------------------------------------------

REST_CASES = [
    ("deep array", "[" * 100_000, "nested too deeply"),
    ("deep argument", '{"a": ' + "[" * 100_000 + "}", "nested too deeply"),
    ("deep but closed", '{"a": ' + "[" * 150 + "]" * 150 + ', "b": 1}', "nested too deeply"),
    ("lone surrogate", '{"text": "\\ud800"}', "lone surrogate"),
    ("lone low surrogate in a key", '{"\\udc00": 1}', "lone surrogate"),
    ("1e999", '{"a": 1e999, "b": 1}', "too large for a 64-bit float"),
    ("-1e999", '{"a": -1e999, "b": 1}', "too large for a 64-bit float"),
    ("NaN", '{"a": NaN, "b": 1}', "NaN is not a JSON number"),
    ("Infinity", '{"a": Infinity, "b": 1}', "Infinity is not a JSON number"),
    ("-Infinity", '{"a": -Infinity, "b": 1}', "-Infinity is not a JSON number"),
    ("5000-digit integer", '{"a": ' + "9" * 5000 + ', "b": 1}', "5000 digits is too long"),
    ("not UTF-8", b'{"a": "\xff\xfe"}', "not valid UTF-8"),
]


@pytest.mark.parametrize("path", ["/tools/add", "/ns/multi-tool/tools/add", "/tools/call"])
@pytest.mark.parametrize("case, body, says", REST_CASES, ids=[c[0] for c in REST_CASES])
def test_bad_json_is_a_clear_400_on_rest(gw, path, case, body, says):
    if path == "/tools/call":  # Tool Vault's shape: the bad part inside "arguments"
        raw = body if isinstance(body, bytes) else body.encode()
        body = b'{"name": "add", "arguments": ' + raw + b"}"
    reply = gw.post(path, "multi-tool", content=body, headers={"Content-Type": "application/json"})
    assert reply.status_code == 400, reply.text[:500]
    error = reply.json()["error"]
    assert error["code"] == "invalid_json" and says in error["message"], error
    _no_traceback(reply.text)


def test_valid_edge_values_still_work_on_rest(gw):
    """What JSON allows passes: a surrogate pair, 100 levels, big finite numbers, and 4000 digits."""
    assert gw.post("/tools/reverse_text", "multi-tool", content='{"text": "a\\ud83d\\ude00b"}').json() == {
        "result": "b\U0001F600a"}
    nested = "[" * 98 + "]" * 98  # with the two objects around it: 100 levels, the most allowed
    assert gw.post("/tools/echo", "testing", content=f'{{"value": {{"x": {nested}}}}}').status_code == 200
    deeper = gw.post("/tools/echo", "testing", content=f'{{"value": {{"x": [{nested}]}}}}')
    assert deeper.status_code == 400 and "at most 100 levels" in deeper.json()["error"]["message"]
    assert gw.post("/tools/add", "multi-tool", content='{"a": 1.5e308, "b": -1e308}').json() == {"result": 5e307}
    assert gw.post("/tools/add", "multi-tool", content='{"a": 1e-400, "b": 1}').json() == {"result": 1.0}


def test_results_json_cannot_carry_have_a_defined_answer(gw):
    """A tool's lone surrogate arrives as U+FFFD; a tool's infinity as null (MCP's serializer does the
    same), and a sum that overflows too; never a 500 or a call that hangs."""
    assert gw.post("/tools/lone_surrogate", "odd", content="{}").json() == {"result": "a\ufffdb"}
    assert gw.post("/tools/too_big", "odd", content="{}").json() == {"result": None}
    assert gw.post("/tools/add", "multi-tool", content='{"a": 1e308, "b": 1e308}').json() == {"result": None}
    headers = _mcp_session(gw, "odd")
    answer = _rpc_answer(httpx.post(f"{gw.url}/mcp", headers=headers, content=call_body("lone_surrogate", "{}")))
    assert answer["result"]["structuredContent"] == {"result": "a\ufffdb"}


MCP_PARSE_CASES = [
    ("deep array", "[" * 100_000),
    ("deep argument", call_body("add", '{"a": ' + "[" * 100_000 + "}")),
    ("lone surrogate", call_body("reverse_text", '{"text": "\\ud800"}')),
]
MCP_PARAM_CASES = [
    ("1e999", call_body("add", '{"a": 1e999, "b": 1}'), "arguments.a is inf"),
    ("NaN", call_body("add", '{"a": NaN, "b": 1}'), "arguments.a is nan"),
    ("-Infinity in a list", call_body("add", '{"a": [1, -Infinity], "b": 1}'), "arguments.a[1] is -inf"),
]


@pytest.mark.parametrize("flavour", ["2025-11-25", "2025-03-26 json", "legacy sse"])
def test_bad_json_on_mcp_is_a_parse_error_or_invalid_params(gw, flavour):
    """Deep nesting and lone surrogates: JSON-RPC parse errors (-32700); NaN and infinities, which the SDK's
    parser takes as numbers: invalid params (-32602) naming the argument. Each transport, each case."""
    if flavour == "legacy sse":
        answers = _legacy_answers(gw, [b for _, b in MCP_PARSE_CASES] + [b for _, b, _ in MCP_PARAM_CASES])
        for status, body in answers[: len(MCP_PARSE_CASES)]:
            assert status == 400 and "Could not parse message" in body, body[:300]
        for (_, _, says), (status, body) in zip(MCP_PARAM_CASES, answers[len(MCP_PARSE_CASES):], strict=True):
            assert status == 202
            error = json.loads(body)["error"]
            assert error["code"] == -32602 and says in error["message"], error
        return
    if flavour == "2025-11-25":
        headers = _mcp_session(gw)
    else:  # no version header, JSON only: the 2025-03-26 adapter
        headers = {**gw.headers("multi-tool"), "Content-Type": "application/json", "Accept": "application/json"}
        init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
        reply = httpx.post(f"{gw.url}/mcp", headers=headers, json=init)
        headers["Mcp-Session-Id"] = reply.headers["mcp-session-id"]
    for _, body in MCP_PARSE_CASES + [("batch", "[" + call_body("add", "[" * 5000) + "]")]:
        reply = httpx.post(f"{gw.url}/mcp", headers=headers, content=body, timeout=30)
        assert reply.status_code == 400, reply.text[:300]
        assert reply.json()["error"]["code"] == -32700
        _no_traceback(reply.text)
    for _, body, says in MCP_PARAM_CASES:
        reply = httpx.post(f"{gw.url}/mcp", headers=headers, content=body, timeout=30)
        error = _rpc_answer(reply)["error"]
        assert error["code"] == -32602 and says in error["message"], error
    ok = httpx.post(f"{gw.url}/mcp", headers=headers, content=call_body("add", '{"a": 2, "b": 3}'), timeout=30)
    assert _rpc_answer(ok)["result"]["structuredContent"] == {"result": 5.0}


def _legacy_answers(gw: Gateway, bodies: list[str]) -> list[tuple[int, str]]:
    """Open a legacy SSE session, initialize, POST each body: (status, the answer from the stream or the
    POST's own body when it was refused)."""
    events: queue.Queue[str] = queue.Queue()
    endpoint: queue.Queue[str] = queue.Queue()

    def listen() -> None:
        try:
            with httpx.stream("GET", f"{gw.url}/sse", headers=gw.headers("multi-tool"), timeout=60) as stream:
                event = ""
                for line in stream.iter_lines():
                    if line.startswith("event:"):
                        event = line[6:].strip()
                    elif line.startswith("data:"):
                        (endpoint if event == "endpoint" else events).put(line[5:].strip())
        except httpx.HTTPError:  # the gateway stopped at the end of the module
            pass

    threading.Thread(target=listen, daemon=True).start()
    url = gw.url + endpoint.get(timeout=30)
    headers = {**gw.headers("multi-tool"), "Content-Type": "application/json"}
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    assert httpx.post(url, headers=headers, json=init).status_code == 202
    events.get(timeout=30)
    httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    answers = []
    for body in bodies:
        reply = httpx.post(url, headers=headers, content=body, timeout=30)
        _no_traceback(reply.text)
        answers.append((reply.status_code, events.get(timeout=30) if reply.status_code == 202 else reply.text))
    return answers


# -- request ids ---------------------------------------------------------------------------------------

def test_request_ids_are_taken_or_generated_and_echoed_everywhere(gw):
    mine = {"X-Request-Id": "client-42.a:b/c"}
    answers = {
        "REST 200": gw.post("/tools/add", "multi-tool", json_body={"a": 1, "b": 2}, headers=mine),
        "REST 400": gw.post("/tools/add", "multi-tool", content="{", headers=mine),
        "REST 404": httpx.get(f"{gw.url}/nowhere", headers={**gw.headers(), **mine}),
        "401": httpx.get(f"{gw.url}/tools", headers=mine),
        "health": httpx.get(f"{gw.url}/health", headers=mine),
        "openapi": httpx.get(f"{gw.url}/openapi.json", headers={**gw.headers(), **mine}),
        "docs": httpx.get(f"{gw.url}/docs", headers=mine),
        "MCP": httpx.post(f"{gw.url}/mcp", headers={**gw.headers("multi-tool"), **MCP_HEADERS, **mine},
                          content=call_body("add", "{}")),
        "MCP 415": httpx.post(f"{gw.url}/mcp", headers={**gw.headers("multi-tool"), **mine}, content="x"),
        "messages 404": httpx.post(f"{gw.url}/messages?session_id=0123456789abcdef0123456789abcdef",
                                   headers={**gw.headers("multi-tool"), **mine}, content="{}"),
    }
    for what, reply in answers.items():
        assert reply.headers.get("x-request-id") == "client-42.a:b/c", what
    with httpx.stream("GET", f"{gw.url}/sse", headers={**gw.headers("multi-tool"), **mine}, timeout=30) as sse:
        assert sse.status_code == 200 and sse.headers["x-request-id"] == "client-42.a:b/c"
    generated = {gw.get("/tools", "multi-tool").headers["x-request-id"] for _ in range(3)}
    assert len(generated) == 3 and all(len(g) == 24 for g in generated)
    for bad in ("has space", "x" * 129, "quote\"", "", "new\tline", "é"):
        reply = httpx.get(f"{gw.url}/health", headers={"X-Request-Id": bad.encode("utf-8")})
        assert reply.headers["x-request-id"] != bad and len(reply.headers["x-request-id"]) == 24, bad


def test_request_id_reaches_the_worker_and_error_lines(gw):
    """A failing call's id is in the worker's line about it and in the gateway's line about the 500,
    over REST and over MCP."""
    reply = gw.post("/tools/boom", "testing", json_body={"message": "rest-kaboom"}, headers={"X-Request-Id": "rid-rest-1"})
    assert reply.status_code == 500 and reply.headers["x-request-id"] == "rid-rest-1"
    headers = {**_mcp_session(gw, "testing"), "X-Request-Id": "rid-mcp-1"}
    answer = _rpc_answer(httpx.post(f"{gw.url}/mcp", headers=headers,
                                    content=call_body("boom", '{"message": "mcp-kaboom"}')))
    assert answer["result"]["isError"] is True
    gw.wait_for(lambda: "(request rid-mcp-1)" in gw.logs, 10, "the worker's line for the MCP call")
    assert "[testing] tool 'boom' failed (request rid-rest-1): ValueError: rest-kaboom" in gw.logs
    assert "[testing] tool 'boom' failed (request rid-mcp-1): ValueError: mcp-kaboom" in gw.logs
    assert "POST /tools/boom answered 500 internal_error (request rid-rest-1)" in gw.logs


# -- disconnects and logs ------------------------------------------------------------------------------

def _leave_mid_request(gw: Gateway, path: str, extra: dict[str, str] | None = None) -> None:
    """Send the headers and part of the body, then go away."""
    headers = {"X-Namespace": "multi-tool", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "X-Request-Id": f"gone-{path.strip('/').replace('/', '-')}", **(extra or {})}
    gw.post_and_leave(path, headers, '{"a": 1', wait=0.3, length=1000)


def test_a_client_leaving_mid_request_is_one_quiet_line(gw):
    cases = [("/tools/add", None), ("/tools/call", None), ("/mcp", None),
             ("/mcp", {"MCP-Protocol-Version": "2025-11-25"}), ("/mcp", {"MCP-Protocol-Version": "2026-07-28"})]
    before = len(gw.logs)
    for path, extra in cases:
        _leave_mid_request(gw, path, extra)
    gw.wait_for(lambda: gw.logs[before:].count("client disconnected before the answer") >= len(cases), 10,
                "a line per disconnect")
    time.sleep(0.5)
    new = gw.logs[before:]
    assert new.count("client disconnected before the answer") == len(cases), new
    assert "client disconnected before the answer: POST /tools/add (request gone-tools-add)" in new
    assert "Exception in ASGI application" not in new and "Traceback" not in new and "ClientDisconnect" not in new
    assert gw.call("multi-tool", "add", a=1, b=1).json() == {"result": 2.0}


def test_no_access_line_by_default(gw):
    gw.post("/tools/add", "multi-tool", json_body={"a": 1, "b": 2}, headers={"X-Request-Id": "quiet-1"})
    assert '"POST /tools/add HTTP/1.1" 200' not in gw.logs
    assert "quiet-1" not in gw.logs


def test_json_logs_and_access_log_when_asked(tmp_path):
    tools = tmp_path / "tools"
    shutil.copytree(EXAMPLES / "multi-tool", tools / "multi-tool", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(FIXTURES / "tools" / "testing", tools / "testing", ignore=shutil.ignore_patterns("__pycache__"))
    gw = Gateway(tools, tmp_path / "gateway.log", {"TOOLDOCK_LOG_FORMAT": "json", "TOOLDOCK_ACCESS_LOG": "true"})
    try:
        gw.start()
        gw.post("/tools/add", "multi-tool", json_body={"a": 1, "b": 2}, headers={"X-Request-Id": "json-1"})
        gw.post("/tools/boom", "testing", json_body={"message": "json-kaboom"}, headers={"X-Request-Id": "json-2"})
        _leave_mid_request(gw, "/tools/add")
        gw.wait_for(lambda: "client disconnected" in gw.logs, 10, "the disconnect line")
    finally:
        gw.stop()
    lines = [json.loads(line) for line in gw.logs.splitlines() if line.strip()]  # every line is JSON
    assert all({"time", "level", "logger", "message"} <= set(e) for e in lines)
    access = [e for e in lines if e["logger"] == "uvicorn.access" and e.get("path") == "/tools/add"]
    assert access and access[0]["status"] == 200 and access[0]["method"] == "POST"
    assert any(e.get("request_id") == "json-2" and "answered 500" in e["message"] for e in lines)
    assert any("tool 'boom' failed (request json-2)" in e["message"] for e in lines)
    assert any(e["message"].startswith("tooldock: ready on") for e in lines)
    assert any(e["level"] == "info" and "client disconnected" in e["message"] for e in lines)


# -- CORS ----------------------------------------------------------------------------------------------

def test_cors_preflight_needs_no_token_and_answers_carry_cors_headers(gw):
    preflight = httpx.options(f"{gw.url}/tools/add", headers={
        "Origin": ORIGIN, "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type, x-namespace"})
    assert preflight.status_code == 200, preflight.text
    assert preflight.headers["access-control-allow-origin"] == ORIGIN
    assert "POST" in preflight.headers["access-control-allow-methods"]
    assert "x-namespace" in preflight.headers["access-control-allow-headers"].lower()
    call = gw.post("/tools/add", "multi-tool", json_body={"a": 1, "b": 2}, headers={"Origin": ORIGIN})
    assert call.headers["access-control-allow-origin"] == ORIGIN
    assert "X-Request-Id" in call.headers["access-control-expose-headers"]
    refused = httpx.get(f"{gw.url}/openapi.json", headers={"Origin": ORIGIN})  # no token: a 401 a page can read
    assert refused.status_code == 401 and refused.headers["access-control-allow-origin"] == ORIGIN
    port_wildcard = httpx.get(f"{gw.url}/ns/multi-tool/openapi.json",
                              headers={**gw.headers(), "Origin": "http://localhost:5173"})
    assert port_wildcard.headers["access-control-allow-origin"] == "http://localhost:5173"
    foreign = httpx.options(f"{gw.url}/tools/add", headers={
        "Origin": "https://evil.example", "Access-Control-Request-Method": "POST"})
    assert foreign.status_code == 400 and "access-control-allow-origin" not in foreign.headers
    other = gw.post("/tools/add", "multi-tool", json_body={"a": 1, "b": 2}, headers={"Origin": "https://evil.example"})
    assert other.status_code == 200 and "access-control-allow-origin" not in other.headers


def test_no_cors_headers_when_unset(make_gateway):
    gw = make_gateway(EXAMPLES)
    reply = gw.post("/tools/add", "multi-tool", json_body={"a": 1, "b": 2}, headers={"Origin": ORIGIN})
    assert reply.status_code == 200 and "access-control-allow-origin" not in reply.headers
    preflight = httpx.options(f"{gw.url}/tools/add", headers={"Origin": ORIGIN, "Access-Control-Request-Method": "POST"})
    assert "access-control-allow-origin" not in preflight.headers


@pytest.mark.parametrize("variable, value, says", [
    ("CORS_ORIGINS", "app.example.com", "CORS_ORIGINS: 'app.example.com' is not an origin"),
    ("CORS_ORIGINS", "https://a.example/path", "is not an origin"),
    ("TOOLDOCK_LOG_FORMAT", "xml", "use one of text, json"),
    ("TOOLDOCK_ACCESS_LOG", "maybe", "use true or false"),
])
def test_bad_settings_stop_start_up_with_their_name(variable, value, says):
    from tooldock.runtime.settings import Settings, SettingsError

    with pytest.raises(SettingsError, match=says.replace("(", r"\(").replace("*", r"\*")):
        Settings.from_env({"TOOLDOCK_BEARER_TOKEN": "x" * 16, variable: value})
    ok = Settings.from_env({"TOOLDOCK_BEARER_TOKEN": "x" * 16, "CORS_ORIGINS": "*", "TOOLDOCK_LOG_FORMAT": "JSON"})
    assert ok.cors_origins == ("*",) and ok.log_format == "json" and ok.access_log is False


def test_an_unhandled_exception_is_a_500_in_the_error_shape_without_traceback(caplog):
    """In-process: whatever escapes the app becomes ToolDock's error shape with the request id; the
    traceback goes to the log only."""
    import asyncio

    from tooldock.runtime.http.edge import RequestEdge

    async def broken(scope, receive, send):
        raise RuntimeError("boom inside")

    async def main() -> httpx.Response:
        transport = httpx.ASGITransport(app=RequestEdge(broken))
        async with httpx.AsyncClient(transport=transport, base_url="http://edge") as client:
            return await client.get("/x", headers={"X-Request-Id": "unhandled-1"})

    reply = asyncio.run(main())
    assert reply.status_code == 500 and reply.headers["x-request-id"] == "unhandled-1"
    error = reply.json()["error"]
    assert error["code"] == "internal_error" and error["details"] == {"request_id": "unhandled-1"}
    _no_traceback(reply.text)
    assert "boom inside" not in reply.text
    assert "GET /x: unhandled RuntimeError (request unhandled-1): boom inside" in caplog.text


@pytest.mark.parametrize("path", ["/tools/watch_cancel", "/tools/call"])
def test_a_rest_client_that_goes_away_cancels_its_call(gw, tmp_path, path):
    """As an MCP client's notifications/cancelled does: the worker is told to stop the tool, and the
    gateway says so in one quiet line (the hot route and the Tool Vault alias alike)."""
    marker = tmp_path / "cancelled.txt"
    arguments = {"marker": str(marker)}
    body = json.dumps(arguments if path != "/tools/call" else {"name": "watch_cancel", "arguments": arguments})
    before = len(gw.logs)
    headers = {"X-Namespace": "testing", "Content-Type": "application/json", "X-Request-Id": "rest-gone-1"}
    gw.post_and_leave(path, headers, body)  # after 1 s the tool is running (it waits 30 s unless cancelled)
    gw.wait_for(lambda: marker.exists() and marker.read_text() == "cancelled", 15, "the tool to be cancelled")
    gw.wait_for(lambda: f"client disconnected before the answer: POST {path} (request rest-gone-1)"
                in gw.logs[before:], 10, "the disconnect line")
    assert "Traceback" not in gw.logs[before:]
    assert gw.call("multi-tool", "add", a=1, b=2).json() == {"result": 3}


# -- the SDK's line per refused request ----------------------------------------------------------------

def test_refused_origins_are_logged_once_a_minute_whatever_origin_they_send(make_gateway):
    """The SDK logs `Invalid Origin header: <origin>` for every request it refuses: a client retrying in a
    loop (or varying its Origin) would flood the log. One line a minute of each kind reaches it."""
    gw = make_gateway(EXAMPLES)
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "edge-test", "version": "1"}}}
    for i in range(30):
        reply = httpx.post(f"{gw.url}/ns/multi-tool/mcp", json=init, timeout=30,
                           headers={**gw.headers(), **MCP_HEADERS, "Origin": f"http://evil{i}.example"})
        assert reply.status_code == 403, reply.text
    lines = [line for line in gw.logs.splitlines() if "Invalid Origin header" in line]
    assert len(lines) == 1, lines
    assert "http://evil0.example" in lines[0]


def test_once_per_window_counts_what_it_held_back():
    import logging

    from tooldock.runtime.logs import OncePerWindow

    now = [100.0]
    limit = OncePerWindow(window=60, clock=lambda: now[0])

    def record(message: str) -> logging.LogRecord:
        return logging.LogRecord("mcp.server.transport_security", logging.WARNING, __file__, 1, message, (), None)

    assert limit.filter(record("Invalid Origin header: http://a.example"))
    assert not limit.filter(record("Invalid Origin header: http://b.example"))  # same kind, same minute
    assert limit.filter(record("Invalid Host header: evil.example"))  # another kind
    now[0] += 59
    assert not limit.filter(record("Invalid Origin header: http://c.example"))
    now[0] += 2
    later = record("Invalid Origin header: http://d.example")
    assert limit.filter(later)
    assert later.getMessage() == ("Invalid Origin header: http://d.example "
                                  "(and 2 more like it not logged since the last one)")
    now[0] += 61
    quiet = record("Invalid Origin header: http://e.example")
    assert limit.filter(quiet) and quiet.getMessage() == "Invalid Origin header: http://e.example"
