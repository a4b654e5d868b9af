"""MCP streamable HTTP by hand (httpx against a real gateway): resumable SSE (event ids, priming events
with `retry:`, Last-Event-ID replay), session TTL and limit, the Origin allowlist; the Swagger UI pages;
and the settings behind them."""

from __future__ import annotations

import asyncio
import json
import subprocess

import httpx
import pytest
from conftest import EXAMPLES, TOOLDOCK

from tooldock.runtime.mcp.events import MemoryEventStore, SessionEvents
from tooldock.runtime.mcp.rules import origin_allowed, origin_refused
from tooldock.runtime.settings import Settings, SettingsError

NS = "multi-tool"
PROTOCOL = "2025-11-25"
MANAGER = "manager-token-abcdef"
LIST_CHANGED = ["notifications/tools/list_changed", "notifications/resources/list_changed",
                "notifications/prompts/list_changed"]


def mcp_headers(gw, session: str | None = None, **extra: str) -> dict[str, str]:
    headers = {**gw.headers(NS), "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream", "MCP-Protocol-Version": PROTOCOL}
    if session:
        headers["Mcp-Session-Id"] = session
    return {**headers, **extra}


def parse_sse(lines) -> list[dict[str, str]]:
    """SSE events as dicts of their fields (`data` lines joined); comments skipped."""
    events, current = [], {}
    for line in lines:
        if not line:
            if current:
                events.append(current)
            current = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            current[name] = current[name] + "\n" + value if name == "data" and name in current else value
    if current:
        events.append(current)
    return events


def initialize_body(request_id: int = 0) -> dict:
    return {"jsonrpc": "2.0", "id": request_id, "method": "initialize", "params": {
        "protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "streams-test", "version": "1"}}}


def initialize(gw, **extra: str) -> httpx.Response:
    return httpx.post(f"{gw.url}/mcp", headers=mcp_headers(gw, **extra), json=initialize_body(), timeout=30)


def open_session(gw) -> tuple[str, list[dict[str, str]]]:
    """An initialized session: its id, and the events of the initialize answer."""
    reply = initialize(gw)
    assert reply.status_code == 200, reply.text
    session = reply.headers["mcp-session-id"]
    done = httpx.post(f"{gw.url}/mcp", headers=mcp_headers(gw, session), timeout=30,
                      json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert done.status_code == 202, done.text
    return session, parse_sse(reply.text.splitlines())


def list_tools(gw, session: str) -> httpx.Response:
    return httpx.post(f"{gw.url}/mcp", headers=mcp_headers(gw, session), timeout=30,
                      json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"})


async def read_messages(stream: httpx.Response, count: int, timeout: float = 60) -> list[dict[str, str]]:
    """The next `count` events with a message (priming events, whose data is empty, are left out), or
    fewer if the stream ends first."""
    found: list[dict[str, str]] = []
    current: list[str] = []
    async with asyncio.timeout(timeout):
        async for line in stream.aiter_lines():
            current.append(line)
            if line:
                continue
            found += [e for e in parse_sse(current) if e.get("data")]
            current = []
            if len(found) >= count:
                break
    return found


def method(event: dict[str, str]) -> str:
    return json.loads(event["data"])["method"]


def add_tool(gw, name: str) -> None:
    (gw.tools_dir / NS / f"{name}.py").write_text(
        f"from fastmcp.tools import tool\n\n@tool\ndef {name}(x: float) -> float:\n"
        f'    """Return x."""\n    return x\n')
    reply = gw.post("/reload", headers={"X-Manager-Token": MANAGER})
    assert reply.status_code == 200, reply.text


def test_sse_events_have_ids_and_last_event_id_replays_what_was_missed(make_gateway):
    gw = make_gateway(EXAMPLES, env={"MANAGER_INTERNAL_TOKEN": MANAGER, "MCP_SSE_RETRY_MS": "1500"})
    session, events = open_session(gw)
    # 2025-11-25: a POST's SSE answer starts with a priming event (an id, no data, the retry interval).
    priming, answer = events[0], events[-1]
    assert priming["data"] == "" and priming["id"] and priming["retry"] == "1500"
    assert answer["id"] and answer["id"] != priming["id"] and json.loads(answer["data"])["result"]["protocolVersion"] == PROTOCOL
    listed = parse_sse(list_tools(gw, session).text.splitlines())  # the session now hears change notices
    assert listed[0]["data"] == "" and "retry" in listed[0] and "tools" in json.loads(listed[-1]["data"])["result"]
    url, get_headers = f"{gw.url}/mcp", mcp_headers(gw, session, Accept="text/event-stream")

    async def main() -> tuple[list, list, list, list]:
        async with httpx.AsyncClient(timeout=30) as client:
            async with client.stream("GET", url, headers=get_headers) as stream:
                assert stream.status_code == 200
                await asyncio.to_thread(add_tool, gw, "echo_one")
                live = await read_messages(stream, 3)
            # Disconnected: a second change is stored for the session, then replayed.
            await asyncio.to_thread(add_tool, gw, "echo_two")
            await asyncio.sleep(1)
            async with client.stream("GET", url, headers={**get_headers, "Last-Event-ID": live[0]["id"]}) as stream:
                assert stream.status_code == 200
                replayed = await read_messages(stream, 5)
            # An id the store does not know: an empty stream that ends at once.
            async with client.stream("GET", url, headers={**get_headers, "Last-Event-ID": "no-such-event"}) as stream:
                unknown = await read_messages(stream, 1, timeout=10)
            # Another session cannot replay this session's events.
            other, _ = await asyncio.to_thread(open_session, gw)
            other_headers = {**mcp_headers(gw, other, Accept="text/event-stream"), "Last-Event-ID": live[0]["id"]}
            async with client.stream("GET", url, headers=other_headers) as stream:
                foreign = await read_messages(stream, 1, timeout=10)
            return live, replayed, unknown, foreign

    live, replayed, unknown, foreign = asyncio.run(main())
    assert [method(e) for e in live] == LIST_CHANGED
    assert all(e.get("id") for e in live) and len({e["id"] for e in live}) == 3
    assert [method(e) for e in replayed] == LIST_CHANGED[1:] + LIST_CHANGED
    assert [e["id"] for e in replayed[:2]] == [e["id"] for e in live[1:]]  # the same events, the same ids
    assert unknown == [] and foreign == []


def test_idle_sessions_expire_with_404(make_gateway):
    gw = make_gateway(EXAMPLES, env={"MCP_SESSION_TTL_HOURS": "0.0003"})  # about 1.1 s
    session, _ = open_session(gw)
    assert list_tools(gw, session).status_code == 200
    import time

    time.sleep(3)
    expired = list_tools(gw, session)
    assert expired.status_code == 404, expired.text
    assert initialize(gw).status_code == 200  # a new session works


def test_session_limit_refuses_one_more_initialize(make_gateway):
    gw = make_gateway(EXAMPLES, env={"MCP_MAX_SESSIONS": "1"})
    session, _ = open_session(gw)
    refused = initialize(gw)
    assert refused.status_code == 503 and "mcp-session-id" not in refused.headers
    assert refused.json()["error"]["message"] == "Too many open sessions"
    assert list_tools(gw, session).status_code == 200  # the open one is unaffected
    ended = httpx.delete(f"{gw.url}/mcp", headers=mcp_headers(gw, session), timeout=30)
    assert ended.status_code == 200
    assert initialize(gw).status_code == 200  # room again


def test_origin_allowlist(make_gateway):
    gw = make_gateway(EXAMPLES, env={"MCP_ALLOWED_ORIGINS": "https://app.example.com,http://localhost:*"})
    assert initialize(gw, Origin="https://app.example.com").status_code == 200
    assert initialize(gw, Origin="http://localhost:5173").status_code == 200
    assert initialize(gw).status_code == 200  # no Origin: not a browser
    for origin in ("https://evil.example", "http://127.0.0.1:5173", "https://app.example.com.evil.example"):
        refused = initialize(gw, Origin=origin)
        assert refused.status_code == 403, (origin, refused.text)
        assert "MCP_ALLOWED_ORIGINS" in refused.json()["error"]["message"]
    # The legacy HTTP+SSE endpoints too.
    evil = {**gw.headers(NS), "Origin": "https://evil.example"}
    assert httpx.get(f"{gw.url}/sse", headers=evil, timeout=30).status_code == 403
    assert httpx.post(f"{gw.url}/messages?session_id=abc", headers=evil, json={}, timeout=30).status_code == 403


def test_origin_rules_hold_for_any_bind():
    """Non-loopback binds have no SDK Host/Origin check: the allowlist is ToolDock's own check."""
    allowed = ("https://app.example.com", "http://localhost:*")

    def scope(origin: str | None) -> dict:
        headers = [(b"host", b"gateway.internal:8000")] + ([(b"origin", origin.encode())] if origin else [])
        return {"type": "http", "method": "POST", "headers": headers}

    assert origin_refused(scope("https://app.example.com"), allowed) is None
    assert origin_refused(scope(None), allowed) is None
    assert origin_refused(scope("https://evil.example"), ()) is None  # no allowlist: no check
    assert origin_refused(scope("https://evil.example"), allowed).status_code == 403
    assert origin_allowed("HTTP://LOCALHOST:8080", allowed)
    assert not origin_allowed("http://localhost:8080.evil.example", allowed)
    assert not origin_allowed("http://localhost", allowed)


def note(name: str, size: int = 0):
    from mcp_types import JSONRPCNotification

    return JSONRPCNotification(jsonrpc="2.0", method=name, params={"pad": "x" * size} if size else None)


def test_event_store_bounds_and_replay():
    async def main() -> None:
        store = MemoryEventStore(per_stream=3, total=5)
        ids = [await store.store_event("a", note(f"m{i}")) for i in range(4)]
        assert len(set(ids)) == 4 and len(store) == 3  # the oldest of stream a is gone
        sent: list = []

        async def collect(event) -> None:
            sent.append((event.event_id, event.message.method))

        assert await store.replay_events_after(ids[0], collect) is None and sent == []  # evicted
        assert await store.replay_events_after(ids[1], collect) == "a"
        assert sent == [(ids[2], "m2"), (ids[3], "m3")]
        priming = await store.store_event("b", None)
        b1 = await store.store_event("b", note("b1"))
        assert len(store) == 5
        b2 = await store.store_event("b", note("b2"))  # total bound: the oldest overall goes
        assert len(store) == 5 and store.stream_of(ids[1]) is None and store.stream_of(ids[2]) == "a"
        sent.clear()
        assert await store.replay_events_after(priming, collect) == "b"
        assert sent == [(b1, "b1"), (b2, "b2")]  # priming events are not replayed

        one, two = SessionEvents(store, "s1"), SessionEvents(store, "s2")
        mine = await one.store_event("_GET_stream", None)
        await one.store_event("_GET_stream", note("n"))
        sent.clear()
        assert await two.replay_events_after(mine, collect) is None and sent == []
        assert await one.replay_events_after(mine, collect) == "_GET_stream" and [m for _, m in sent] == ["n"]

        sized = MemoryEventStore(per_stream=100, total=100, max_bytes=10_000)
        kept = [await sized.store_event(f"s{i}", note("big", 3000)) for i in range(5)]
        assert len(sized) == 3 and sized.bytes <= 10_000 and sized.stream_of(kept[1]) is None
        huge = await sized.store_event("s", note("huge", 50_000))  # the newest is kept, alone
        assert len(sized) == 1 and sized.stream_of(huge) == "s"

    asyncio.run(main())


def test_docs_pages(gateway):
    page = httpx.get(f"{gateway.url}/docs", timeout=30)  # no token needed for the page
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert 'var SPEC = "/openapi.json";' in page.text and "swagger-ui-bundle.js" in page.text
    ns_page = httpx.get(f"{gateway.url}/ns/multi-tool/docs", timeout=30)
    assert ns_page.status_code == 200 and 'var SPEC = "/ns/multi-tool/openapi.json";' in ns_page.text
    assert httpx.get(f"{gateway.url}/ns/Not_A_Name/docs", timeout=30).status_code == 401
    # The documents still need the token, and declare the bearer scheme for the Authorize button.
    assert httpx.get(f"{gateway.url}/openapi.json", timeout=30).status_code == 401
    own = gateway.get("/openapi.json").json()
    assert own["components"]["securitySchemes"]["bearer"] == {"type": "http", "scheme": "bearer"}
    assert own["security"] == [{"bearer": []}] and own["paths"]["/health"]["get"]["security"] == []
    typed = gateway.get("/ns/multi-tool/openapi.json").json()
    assert typed["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"


@pytest.mark.parametrize("name, value", [
    ("MCP_SESSION_TTL_HOURS", "abc"), ("MCP_SESSION_TTL_HOURS", "nan"), ("MCP_SESSION_TTL_HOURS", "0"),
    ("MCP_MAX_SESSIONS", "0"), ("MCP_MAX_SESSIONS", "1.5"), ("MCP_EVENT_BUFFER", "-1"),
    ("MCP_SSE_RETRY_MS", "soon"), ("MCP_ALLOWED_ORIGINS", "*"), ("MCP_ALLOWED_ORIGINS", "https://a.example/path"),
])
def test_bad_settings_are_refused(name, value):
    with pytest.raises(SettingsError, match=name):
        Settings.from_env({"TOOLDOCK_BEARER_TOKEN": "x" * 16, name: value})


def test_settings_defaults_and_startup_error(tmp_path):
    settings = Settings.from_env({"TOOLDOCK_BEARER_TOKEN": "x" * 16})
    assert settings.session_ttl == 24 * 3600 and settings.max_sessions == 10_000
    assert settings.event_buffer == 100 and settings.sse_retry_ms == 1000 and settings.allowed_origins == ()
    parsed = Settings.from_env({"TOOLDOCK_BEARER_TOKEN": "x" * 16, "MCP_SESSION_TTL_HOURS": "0.5",
                                "MCP_ALLOWED_ORIGINS": " https://App.Example.com/ , http://localhost:*"})
    assert parsed.session_ttl == 1800 and parsed.allowed_origins == ("https://app.example.com", "http://localhost:*")
    proc = subprocess.run([TOOLDOCK, "serve", str(EXAMPLES), "--port", "0"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "TOOLDOCK_BEARER_TOKEN": "x" * 16, "MCP_SESSION_TTL_HOURS": "abc",
                               "TOOLDOCK_STATE_DIR": str(tmp_path)})
    assert proc.returncode != 0
    assert "MCP_SESSION_TTL_HOURS='abc' is not a valid float" in proc.stderr
    proc = subprocess.run([TOOLDOCK, "serve", str(EXAMPLES), "--port", "0"], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "TOOLDOCK_SWAGGER_UI_DIR": str(tmp_path / "nothing"),
                               "TOOLDOCK_STATE_DIR": str(tmp_path)})
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"TOOLDOCK_SWAGGER_UI_DIR: no swagger-ui-bundle.js in {tmp_path / 'nothing'}" in proc.stderr
