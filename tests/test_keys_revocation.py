"""What lives on after its API key was checked ends when the key is revoked or expires (issue 14): every
new request checks its key, and these are the answers and calls that would otherwise outlive the check.

- Each kind of event stream the gateway serves is opened over raw HTTP, the key revoked, and the stream must
  end (cleanly: its last chunk sent) within a few seconds, the gateway logging why; the client's next
  request is refused. A stream whose key stays valid stays open.
- A call in flight (REST, MCP, the relay socket) is stopped, its worker told, and answered with the reason.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from conftest import TOKEN, Gateway
from relaykit import RELAY_TOOLS, cleanup, relay_env

from tooldock.keys import KeyStore

ENDS_WITHIN = 8.0  # seconds: the gateway looks at the keys file once a second


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, KeyStore]]:
    tmp = tmp_path_factory.mktemp("revocation")
    shutil.copytree(RELAY_TOOLS, tmp / "tools")
    env, sock, keys = relay_env()
    gw = Gateway(tmp / "tools", tmp / "gateway.log", env).start()
    yield gw, keys
    gw.stop()
    cleanup(sock)


class Stream(threading.Thread):
    """One streamed answer, read on a thread until it ends: its status, content type, lines, and how it ended."""

    def __init__(self, method: str, url: str, headers: dict[str, str], body: Any = None) -> None:
        super().__init__(daemon=True)
        self.args = method, url, headers, body
        self.opened = threading.Event()
        self.status, self.content_type, self.lines = 0, "", []
        self.error: Exception | None = None
        self.ended_at = 0.0

    def run(self) -> None:
        method, url, headers, body = self.args
        try:
            with httpx.stream(method, url, headers=headers, json=body, timeout=httpx.Timeout(10, read=60)) as reply:
                self.status, self.content_type = reply.status_code, reply.headers.get("content-type", "")
                self.opened.set()
                for line in reply.iter_lines():
                    self.lines.append(line)
        except Exception as exc:  # noqa: BLE001 - reported by the test
            self.error = exc
        finally:
            self.ended_at = time.monotonic()
            self.opened.set()

    def open(self) -> Stream:
        self.start()
        assert self.opened.wait(30), "the stream never opened"
        assert self.status == 200 and self.content_type.startswith("text/event-stream"), (self.status, self.lines)
        return self


def _mcp_headers(key: str, version: str = "2025-06-18", **more: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": version, **more}


def _session(gw: Gateway, key: str) -> str:
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "streams", "version": "1"}}}
    reply = httpx.post(f"{gw.url}/ns/project/mcp", json=init, headers=_mcp_headers(key), timeout=30)
    assert reply.status_code == 200, reply.text
    session = reply.headers["mcp-session-id"]
    done = {"jsonrpc": "2.0", "method": "notifications/initialized"}
    httpx.post(f"{gw.url}/ns/project/mcp", json=done, headers=_mcp_headers(key, **{"Mcp-Session-Id": session}),
               timeout=30)
    return session


def open_stream(gw: Gateway, kind: str, key: str) -> Stream:
    """Open one of the gateway's kinds of event stream with `key`; it is open (headers read) on return."""
    url = f"{gw.url}/ns/project"
    if kind == "mcp-get-stream":  # streamable HTTP: the session's stream for server-initiated messages
        session = _session(gw, key)
        headers = _mcp_headers(key, **{"Mcp-Session-Id": session, "Accept": "text/event-stream"})
        return Stream("GET", f"{url}/mcp", headers).open()
    if kind == "mcp-call":  # a long call, answered as an event stream
        session = _session(gw, key)
        call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "slow", "arguments": {"seconds": 60}}}
        return Stream("POST", f"{url}/mcp", _mcp_headers(key, **{"Mcp-Session-Id": session}), call).open()
    if kind == "listen":  # 2026-07-28: subscriptions/listen
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}
        listen = {"jsonrpc": "2.0", "id": 3, "method": "subscriptions/listen",
                  "params": {"notifications": {"toolsListChanged": True}, "_meta": meta}}
        headers = _mcp_headers(key, "2026-07-28", **{"Mcp-Method": "subscriptions/listen"})
        return Stream("POST", f"{url}/mcp", headers, listen).open()
    assert kind == "legacy-sse"  # 2024-11-05: the stream every answer rides
    return Stream("GET", f"{url}/sse", {"Authorization": f"Bearer {key}"}).open()


KINDS = ["mcp-get-stream", "mcp-call", "listen", "legacy-sse"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_open_stream_ends_when_its_key_is_revoked(gateway: tuple[Gateway, KeyStore], kind: str):
    gw, keys = gateway
    record, key = keys.create(f"streaming-{kind}", "read", ("project",))
    stream = open_stream(gw, kind, key)
    time.sleep(2.5)  # two looks at the keys file: a valid key's stream stays open
    assert stream.is_alive(), (stream.error, stream.lines)
    if kind == "mcp-call":
        assert _in_flight(gw) == 1
    keys.revoke(record.id)
    revoked = time.monotonic()
    stream.join(ENDS_WITHIN)
    assert not stream.is_alive(), f"the stream was still open {ENDS_WITHIN} s after its key was revoked"
    assert stream.error is None, stream.error  # ended with its last chunk, not cut off
    assert stream.ended_at - revoked < ENDS_WITHIN
    if kind == "mcp-call":  # the 60 s call was stopped, and its stream ended with the answer saying why
        answer = json.loads(next(line for line in reversed(stream.lines) if line.startswith("data:"))[5:])
        assert answer["id"] == 2 and answer["result"]["isError"], answer
        assert answer["result"]["structuredContent"]["error"] == {
            "code": "invalid_api_key", "details": {"key_id": record.id},
            "message": f"tool 'slow' was stopped: API key {record.id} was revoked or expired while it ran"}
        gw.wait_for(lambda: _in_flight(gw) == 0, timeout=10, what="no call in flight")
    else:
        line = f"key {record.id} refused on http {'POST' if kind == 'listen' else 'GET'} /ns/project/"
        gw.wait_for(lambda: line in gw.logs and "event stream was open: ended" in gw.logs, what="the log line")
    assert key not in gw.logs
    again = httpx.get(f"{gw.url}/ns/project/tools", headers={"Authorization": f"Bearer {key}"}, timeout=30)
    assert again.status_code == 401


def _in_flight(gw: Gateway) -> float:
    text = httpx.get(f"{gw.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).text
    found = [line for line in text.splitlines() if line.startswith('tooldock_calls_in_flight{namespace="project"}')]
    assert len(found) == 1, text
    return float(found[0].split()[-1])


def test_a_stream_ends_when_its_key_expires_and_others_stay_open(gateway: tuple[Gateway, KeyStore]):
    gw, keys = gateway
    _, staying = keys.create("staying", "read", ("project",))
    made = time.monotonic()
    _, expiring = keys.create("expiring", "read", ("project",), expires_in=3)
    stays, goes = open_stream(gw, "mcp-get-stream", staying), open_stream(gw, "legacy-sse", expiring)
    other, _ = keys.create("other", "read")
    keys.revoke(other.id)  # the keys file changes: the open streams' keys are checked again, and are valid
    goes.join(3 + ENDS_WITHIN)
    assert not goes.is_alive() and goes.error is None
    assert goes.ended_at - made >= 3 - 0.1  # not before it expired (its expiry rounds up to the second)
    time.sleep(1.5)
    assert stays.is_alive(), (stays.error, stays.lines)
    data = [json.loads(line[5:]) for line in stays.lines if line.startswith("data:") and line[5:].strip()]
    assert not [m for m in data if "error" in m], data


def test_a_rest_call_in_flight_is_stopped_when_its_key_is_revoked(gateway: tuple[Gateway, KeyStore]):
    gw, keys = gateway
    record, key = keys.create("rest-caller", "read", ("project",))
    answer: dict[str, Any] = {}

    def call() -> None:
        reply = httpx.post(f"{gw.url}/ns/project/tools/slow", json={"seconds": 60},
                           headers={"Authorization": f"Bearer {key}"}, timeout=90)
        answer.update(status=reply.status_code, body=reply.json(), at=time.monotonic())

    caller = threading.Thread(target=call, daemon=True)
    caller.start()
    gw.wait_for(lambda: _in_flight(gw) == 1, timeout=30, what="the call in flight")
    keys.revoke(record.id)
    revoked = time.monotonic()
    caller.join(ENDS_WITHIN)
    assert answer, f"the call was still running {ENDS_WITHIN} s after its key was revoked"
    assert answer["status"] == 401 and answer["at"] - revoked < ENDS_WITHIN, answer
    error = answer["body"]["error"]
    assert error["code"] == "invalid_api_key" and error["details"] == {"key_id": record.id}
    assert f"tool 'slow' was stopped: API key {record.id} was revoked or expired while it ran" in error["message"]
    gw.wait_for(lambda: _in_flight(gw) == 0, timeout=10, what="no call in flight")
