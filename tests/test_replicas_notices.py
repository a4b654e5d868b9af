"""Notifications reach a session's GET stream on any replica (issue 56): three gateway replicas on one real
Redis, a 2025-11-25 session whose standalone `GET /mcp` stream is held by one replica while a change is made
through another (`toolman_activate` in an upstream namespace: its tool and resource lists change); the
notification arrives on the stream, under an event id a client resumes from with `Last-Event-ID` on a third
replica, which replays what was raised while the client was away and then goes on live. A reload (which
every replica does) is heard once on the stream, not once a replica, and a client that dropped its stream
hears it when it resumes on another replica. The official SDK client behind haproxy round robin hears a
list change whichever replicas its stream and its call land on."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import EXAMPLES, Gateway
from rediskit import RedisServer
from test_mcp_lean import ACCEPT
from test_mcp_lean_stream import events
from test_upstream import DEMO, EMPTY

pytestmark = pytest.mark.slow
NS = "agg"
INTERNAL = "notices-reload-token-0123"
TOOLS_CHANGED = "notifications/tools/list_changed"


@pytest.fixture(scope="module")
def three(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[list[Gateway], Path, RedisServer]]:
    """Three replicas on one Redis, serving an upstream namespace (the SDK's demo server on stdio) and a
    plain one."""
    tmp = tmp_path_factory.mktemp("notices")
    redis = RedisServer(tmp / "redis").start()
    tools = tmp / "tools"
    (tools / NS).mkdir(parents=True)
    (tools / NS / "tools.toml").write_text(
        f'active_toolsets = ["demo_add"]\n[[servers]]\nnamespace = "demo"\ncommand = "{DEMO} --touch"\n')
    shutil.copytree(EXAMPLES / "multi-tool", tools / "sums")
    env = {"TOOLDOCK_STATE_URL": redis.url, "MANAGER_INTERNAL_TOKEN": INTERNAL}
    gateways = [Gateway(tools, tmp / f"{name}.log", env).start() for name in "abc"]
    for gw in gateways:
        gw.wait_for(lambda gw=gw: all(s["state"] != "starting" for s in gw.namespace(NS)["servers"]),
                    what="the upstream server")
    yield gateways, tools, redis
    for gw in gateways:
        gw.stop()
    redis.cleanup()


class Raw:
    """A raw 2025-11-25 session whose requests go to the replica each names."""

    def __init__(self, opener: Gateway, namespace: str = NS) -> None:
        self.namespace = namespace
        self.http = httpx.Client(headers={**opener.headers(), "Accept": ACCEPT}, timeout=60)
        init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}
        first = self.post(opener, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        self.http.headers.update({"Mcp-Session-Id": first.headers["mcp-session-id"],
                                  "MCP-Protocol-Version": "2025-11-25"})
        assert self.post(opener, {"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202

    def url(self, gw: Gateway) -> str:
        return f"{gw.url}/ns/{self.namespace}/mcp"

    def post(self, gw: Gateway, message: dict) -> httpx.Response:
        answer = self.http.post(self.url(gw), content=json.dumps(message), headers={"Content-Type": "application/json"})
        assert answer.status_code in (200, 202), answer.text
        return answer

    def activate(self, gw: Gateway, rid: int, **lists: list[str]) -> None:
        answer = self.post(gw, {"jsonrpc": "2.0", "id": rid, "method": "tools/call",
                                "params": {"name": "toolman_activate", "arguments": {**EMPTY, **lists}}})
        assert '"isError":true' not in answer.text.replace(" ", ""), answer.text

    def listen(self, gw: Gateway, last_id: str | None = None) -> Listener:
        return Listener(self, gw, last_id)


class Stream:
    """A stream read in a thread: waiting for the notifications it has carried so far, and stopping it."""

    _stop: threading.Event

    def methods(self) -> list[str]:
        raise NotImplementedError

    def wait_for(self, method: str, count: int = 1, timeout: float = 10) -> None:
        deadline = time.monotonic() + timeout
        while self.methods().count(method) < count:
            assert time.monotonic() < deadline, f"no {method} on the {type(self).__name__} stream: {self.methods()}"
            time.sleep(0.05)

    def close(self) -> None:
        self._stop.set()


class Listener(Stream):
    """The session's standalone GET stream on one replica, read in a thread: its events (id, message)."""

    def __init__(self, session: Raw, gw: Gateway, last_id: str | None) -> None:
        self.found: list[tuple[str | None, dict]] = []
        self.status: int | None = None
        self._stream: httpx.Response | None = None
        self._stop = threading.Event()
        headers = {"Accept": "text/event-stream", **({"Last-Event-ID": last_id} if last_id else {})}
        self._thread = threading.Thread(target=self._read, args=(session, gw, headers), daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while self.status is None:
            assert time.monotonic() < deadline, "the GET stream did not open"
            time.sleep(0.02)
        assert self.status == 200
        time.sleep(0.3)  # the replica has registered the stream (and its follower has it)

    def _read(self, session: Raw, gw: Gateway, headers: dict) -> None:
        text = ""
        try:
            with session.http.stream("GET", session.url(gw), headers=headers, timeout=60) as stream:
                self.status, self._stream = stream.status_code, stream
                for line in stream.iter_lines():
                    if self._stop.is_set():
                        return
                    text += line + "\n"
                    if not line:
                        self.found = [(i, d) for i, d in events(text) if d is not None]
        except httpx.HTTPError:
            self.status = self.status or -1

    def methods(self) -> list[str]:
        return [d.get("method", "") for _, d in self.found]

    def drop(self) -> None:
        """The connection goes at once (as a client's network does), not at the next event."""
        self._stop.set()
        assert self._stream is not None
        self._stream.extensions["network_stream"].get_extra_info("socket").shutdown(socket.SHUT_RDWR)
        self._thread.join(5)
        assert not self._thread.is_alive()


def test_a_change_through_one_replica_reaches_the_get_stream_on_another_and_resumes_on_a_third(three):
    (a, b, c), _, _ = three
    session = Raw(a)
    held = session.listen(c)  # the GET stream on C
    session.activate(b, 1, tools_on=["demo_wordy"])  # the change through B
    held.wait_for(TOOLS_CHANGED)
    held.wait_for("notifications/resources/list_changed")
    first_id = held.found[held.methods().index(TOOLS_CHANGED)][0]
    assert first_id, held.found  # an id to resume from
    held.close()
    time.sleep(0.3)
    session.activate(b, 2, tools_off=["demo_wordy"])  # while the client has no stream: kept in Redis
    session.activate(a, 3, tools_on=["demo_slow"])
    again = session.listen(a, last_id=first_id)  # resumed on A, the third replica
    again.wait_for(TOOLS_CHANGED, count=2)  # what was raised meanwhile (after the resumed-from event)...
    session.activate(c, 4, tools_off=["demo_slow"])
    again.wait_for(TOOLS_CHANGED, count=3)  # ...then live, raised on C
    assert [i for i, _ in again.found].count(first_id) == 0  # not the event it resumed from
    time.sleep(0.5)
    assert again.methods().count(TOOLS_CHANGED) == 3, again.methods()  # each once
    again.close()


def test_what_toolman_activate_turns_on_is_listed_by_every_replica(three):
    """`toolman_activate` is part of the session's state: a change through B is in the `tools/list` of A and
    B (which held the session) and of C (which adopts it) in the requests right after it, and a change
    through C in A's and B's; the other replicas' `toolman_activate` catalog marks it too."""
    (a, b, c), _, _ = three
    session = Raw(a)
    _listed(session, b)  # A and B hold the session
    session.activate(b, 2, tools_on=["demo_wordy"])
    for gw in (a, c, b):  # consecutive requests, each on another replica
        names = [t["name"] for t in _listed(session, gw)]
        assert "demo_wordy" in names and "demo_add" in names, ("abc"[[a, b, c].index(gw)], names)
    catalog = next(t for t in _listed(session, a) if t["name"] == "toolman_activate")["description"]
    assert "* demo_wordy" in catalog, catalog
    session.activate(c, 3, tools_off=["demo_wordy"], tools_on=["demo_slow"])
    for gw in (b, a, c):
        names = [t["name"] for t in _listed(session, gw)]
        assert "demo_slow" in names and "demo_wordy" not in names, (gw.url, names)
    called = session.post(a, {"jsonrpc": "2.0", "id": 4, "method": "tools/call",  # off on A as well
                              "params": {"name": "demo_wordy", "arguments": {}}})
    assert "is inactive" in called.text, called.text


MODERN = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"}}


def _modern(gw: Gateway, namespace: str, method: str, params: dict, name: str | None = None) -> httpx.Response:
    """One 2026-07-28 request (no session) to replica `gw`."""
    headers = {**gw.headers(), "Content-Type": "application/json", "Accept": ACCEPT,
               "MCP-Protocol-Version": MODERN, "Mcp-Method": method, **({"Mcp-Name": name} if name else {})}
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {**params, "_meta": META}}
    answer = httpx.post(f"{gw.url}/ns/{namespace}/mcp", content=json.dumps(body), headers=headers, timeout=60)
    assert answer.status_code == 200 and '"error"' not in answer.text, answer.text
    return answer


class Listen(Stream):
    """A 2026-07-28 `subscriptions/listen` stream on one replica, read in a thread: its notifications."""

    def __init__(self, gw: Gateway, namespace: str, wanted: dict) -> None:
        self.found: list[dict] = []
        self._stop = threading.Event()
        body = {"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen",
                "params": {"notifications": wanted, "_meta": META}}
        headers = {**gw.headers(), "Accept": ACCEPT, "MCP-Protocol-Version": MODERN,
                   "Mcp-Method": "subscriptions/listen"}
        args = (f"{gw.url}/ns/{namespace}/mcp", body, headers)
        threading.Thread(target=self._read, args=args, daemon=True).start()
        self.wait_for("notifications/subscriptions/acknowledged")
        time.sleep(0.2)

    def _read(self, url: str, body: dict, headers: dict) -> None:
        with httpx.stream("POST", url, json=body, headers=headers, timeout=60) as reply:
            for line in reply.iter_lines():
                if self._stop.is_set():
                    return
                if line.startswith("data:") and line[5:].strip():
                    self.found.append(json.loads(line[5:]))

    def methods(self) -> list[str]:
        return [m.get("method", "") for m in self.found]


def test_a_listen_stream_hears_what_another_replica_raises_and_a_reload_once(three):
    """2026-07-28 listen streams on C: a `toolman_activate` through B (of the view 2026-07-28 clients share)
    and an upstream server's `resources/updated` raised on B reach them; a reload through A (which every
    replica does) is heard once, not once a replica."""
    (a, b, c), tools, _ = three
    listen = Listen(c, NS, {"toolsListChanged": True, "resourceSubscriptions": ["demo_demo://greeting"]})
    plain = Listen(c, "sums", {"toolsListChanged": True})
    try:
        _modern(b, NS, "tools/call", {"name": "toolman_activate", "arguments": {**EMPTY, "tools_on": ["demo_touch"]}},
                "toolman_activate")
        listen.wait_for(TOOLS_CHANGED)
        _modern(b, NS, "tools/call", {"name": "demo_touch", "arguments": {"uri": "demo://greeting"}}, "demo_touch")
        listen.wait_for("notifications/resources/updated")
        updated = [m for m in listen.found if m.get("method") == "notifications/resources/updated"]
        assert updated[0]["params"]["uri"] == "demo_demo://greeting", updated
        (tools / "sums" / "extra.py").write_text(EXTRA)
        answer = a.post("/reload", headers={"X-Manager-Token": INTERNAL})
        assert answer.status_code == 200, answer.text
        plain.wait_for(TOOLS_CHANGED, timeout=30)
        for gw in (b, c):  # the other replicas reload too (announced on Redis)
            gw.wait_for(lambda gw=gw: "triple" in gw.namespace("sums")["tools"],
                        timeout=30, what="the reload on every replica")
        time.sleep(1)
        assert plain.methods().count(TOOLS_CHANGED) == 1, plain.methods()
        assert listen.methods().count(TOOLS_CHANGED) == 1, listen.methods()  # the reload left NS as it was
    finally:
        listen.close()
        plain.close()
        (tools / "sums" / "extra.py").unlink(missing_ok=True)
        a.post("/reload", headers={"X-Manager-Token": INTERNAL})


def test_a_get_stream_hears_other_replicas_again_once_redis_answers_again(three):
    """Redis stops answering (SIGSTOP) while C holds the GET stream: C's reads fail (said once in its log),
    and once Redis answers again a change through B reaches the stream, with no restart."""
    (a, b, c), _, redis = three
    session = Raw(a)
    session.post(b, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"})  # B holds the session
    held = session.listen(c)
    assert redis.proc is not None
    os.kill(redis.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(2.5)  # more than a command's time limit: C's read failed
    finally:
        os.kill(redis.proc.pid, signal.SIGCONT)
    session.activate(b, 7, tools_on=["demo_wordy"])
    held.wait_for(TOOLS_CHANGED, timeout=15)
    assert "other replicas' notifications wait for the store" in c.logs
    held.close()


def test_a_reload_is_heard_once_on_each_get_stream_held_or_resumed_on_another_replica(three):
    """A reload through B (which every replica does) is heard once, not once a replica, on the GET stream A
    holds, and on the one B holds. That client then drops its stream; a second reload (the lists change back)
    reaches the first stream live, and the second client when it resumes with Last-Event-ID on C: once."""
    (a, b, c), tools, _ = three
    session, away_session = Raw(a, "sums"), Raw(c, "sums")
    for gw in (a, b, c):  # every replica holds the session (each reloads and knows it)
        session.post(gw, {"jsonrpc": "2.0", "id": 5, "method": "tools/list"})
    held, away = session.listen(a), away_session.listen(b)
    lists = [TOOLS_CHANGED, "notifications/resources/list_changed", "notifications/prompts/list_changed"]

    def reload(listed: bool) -> None:  # through B, then until every replica lists what it reloaded
        answer = b.post("/reload", headers={"X-Manager-Token": INTERNAL})
        assert answer.status_code == 200, answer.text
        for gw in (a, b, c):
            gw.wait_for(lambda gw=gw: ("triple" in {t["name"] for t in _listed(session, gw)}) == listed,
                        timeout=30, what="the reload on every replica")

    (tools / "sums" / "extra.py").write_text(EXTRA)
    try:
        reload(True)
        away.wait_for(lists[-1], timeout=30)
        held.wait_for(lists[-1], timeout=30)
        time.sleep(1)
        assert held.methods() == lists and away.methods() == lists, (held.methods(), away.methods())
        last_id = away.found[-1][0]
        assert last_id
        away.drop()  # no replica holds its GET stream now
        time.sleep(0.5)
        (tools / "sums" / "extra.py").unlink()
        reload(False)
        held.wait_for(TOOLS_CHANGED, count=2, timeout=30)
        back = away_session.listen(c, last_id=last_id)  # resumed on C, which never held the session
        back.wait_for(lists[-1], timeout=10)
        time.sleep(1)
        assert held.methods() == lists * 2, held.methods()
        assert back.methods() == lists, back.methods()  # what it missed, once
        assert last_id not in [i for i, _ in back.found]
        back.close()
    finally:
        held.close()
        if (tools / "sums" / "extra.py").exists():
            (tools / "sums" / "extra.py").unlink()
            b.post("/reload", headers={"X-Manager-Token": INTERNAL})


EXTRA = 'from fastmcp.tools import tool\n\n\n@tool\ndef triple(x: int) -> int:\n    """Three x."""\n    return 3 * x\n'


def _listed(session: Raw, gw: Gateway) -> list[dict]:
    answer = session.post(gw, {"jsonrpc": "2.0", "id": 6, "method": "tools/list"})
    text = answer.text
    data = json.loads(text) if text.startswith("{") else json.loads(
        next(line[5:] for line in text.splitlines() if line.startswith("data:") and len(line) > 6))
    return list(data["result"]["tools"])


def test_the_sdk_client_behind_round_robin_hears_a_list_change(three, tmp_path):
    """The official SDK 2.x client on a 2025-11-25 session through haproxy round robin over the three
    replicas (its GET stream on one, its requests spread over all): `toolman_activate` changes its lists and
    it hears `tools/list_changed` on its stream."""
    import asyncio

    import httpx2
    from balancer import Haproxy
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    (a, b, c), _, _ = three
    proxy = Haproxy(tmp_path / "haproxy", [a.url, b.url, c.url])
    heard: list[str] = []

    async def on_message(message) -> None:
        method = getattr(getattr(message, "root", message), "method", None)
        if method is not None:
            heard.append(method)

    lists: list[tuple[list[str], dict[str, int]]] = []  # after the activation: names, and where each was served

    async def main() -> list:
        async with httpx2.AsyncClient(headers=a.headers(), timeout=60) as http:
            transport = streamable_http_client(f"{proxy.url}/ns/{NS}/mcp", http_client=http)
            async with Client(transport, mode="legacy", message_handler=on_message) as client:
                sums = [(await client.call_tool("demo_add", {"a": n, "b": 1})).structured_content for n in range(3)]
                await client.call_tool("toolman_activate", {**EMPTY, "tools_on": ["demo_wordy"]})
                for _ in range(3):  # consecutive lists, each on the next replica: all show the activation
                    was = proxy.requests_per_server()
                    names = [t.name for t in (await client.list_tools()).tools]
                    now = proxy.requests_per_server()
                    lists.append((names, {s: now[s] - was[s] for s in now if now[s] != was[s]}))
                deadline = time.monotonic() + 10
                while TOOLS_CHANGED not in heard and time.monotonic() < deadline:
                    await asyncio.sleep(0.05)
                return sums

    try:
        before = proxy.requests_per_server()
        sums = asyncio.run(main())
        after = proxy.requests_per_server()
        assert sums == [{"result": n + 1} for n in range(3)]
        assert TOOLS_CHANGED in heard, heard
        assert all(after[s] - before[s] >= 2 for s in after), (before, after)  # on every replica
        assert all("demo_wordy" in names for names, _ in lists), lists
        served = [next(iter(where)) for _, where in lists if len(where) == 1]  # the replica of each list
        assert len(set(served)) >= 2, lists  # on different replicas (round robin; none sticky)
    finally:
        proxy.stop()
