"""Gateway replicas sharing a real Redis (issue 56, its first part): one rate-limit bucket across replicas,
reloads that reach every replica, a Redis lost while serving (a clear 503 / JSON-RPC error within a bound,
the rest serving on, recovery without a restart) and a Redis that is not there at start."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import EXAMPLES, SUITE_STATE_KEY, TOOLDOCK, Gateway
from rediskit import RedisServer, free_port
from test_context_state import FILE as STATE_TOOLS
from test_mcp_clients import mcp1_python  # noqa: F401  (a fixture: the SDK 1.x client's virtualenv)

pytestmark = pytest.mark.slow
INTERNAL = "replica-reload-token-0123"


@pytest.fixture(scope="module")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path_factory.mktemp("redis")).start()
    yield server
    server.cleanup()


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory, redis: RedisServer) -> Iterator[tuple[Gateway, Gateway, Path]]:
    """Two gateways on one tools directory and one Redis: `limited` takes a call every 5 s after a burst of 3."""
    tmp = tmp_path_factory.mktemp("replicas")
    tools = tmp / "tools"
    shutil.copytree(EXAMPLES / "multi-tool", tools / "limited")
    (tools / "limited" / "tooldock.yaml").write_text("limits: {rate: 0.2, burst: 3}\n")
    shutil.copytree(EXAMPLES / "basic-tool", tools / "free")
    shutil.copytree(EXAMPLES / "multi-tool", tools / "sums")
    (tools / "memo").mkdir()
    (tools / "memo" / "memo.py").write_text(STATE_TOOLS)
    env = {"TOOLDOCK_STATE_URL": redis.url, "MANAGER_INTERNAL_TOKEN": INTERNAL}
    first = Gateway(tools, tmp / "a.log", env).start()
    second = Gateway(tools, tmp / "b.log", env).start()
    yield first, second, tools
    first.stop()
    second.stop()


def test_replicas_share_one_rate_limit_bucket(replicas, redis):
    first, second, _ = replicas
    redis.flush()  # a full bucket
    answers = [(first if n % 2 else second).call("limited", "add", a=1, b=n) for n in range(6)]
    statuses = [a.status_code for a in answers]
    assert statuses.count(200) == 3 and statuses.count(429) == 3, statuses  # not 3 per replica
    refused = answers[statuses.index(429)]
    assert refused.json()["error"]["code"] == "rate_limited" and int(refused.headers["Retry-After"]) >= 1
    assert first.call("free", "say_hello", name="x").status_code == 200  # no limit, no bucket


def test_a_reload_on_one_replica_reaches_the_other(replicas):
    first, second, tools = replicas
    shutil.copytree(EXAMPLES / "basic-tool", tools / "added")
    try:
        answer = first.post("/reload", headers={"X-Manager-Token": INTERNAL})
        assert answer.status_code == 200, answer.text
        assert "added" in answer.json()["namespaces"]
        second.wait_for(lambda: "added" in second.logs and second.call("added", "say_hello").status_code == 200,
                        timeout=60, what="the other replica to serve the new namespace")
        assert "reload on " in second.logs
    finally:
        shutil.rmtree(tools / "added")
        first.post("/reload", headers={"X-Manager-Token": INTERNAL})


def test_a_lost_redis_is_a_retryable_503_within_a_bound_and_comes_back(replicas, redis):
    first, second, _ = replicas
    opened = _mcp(second, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        namespace="limited")
    sid = opened.headers["mcp-session-id"]  # opened while Redis is there: served by its replica without it
    assert _mcp(second, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid, "limited").status_code == 202
    redis.stop()
    try:
        started = time.monotonic()
        answer = first.call("limited", "add", a=1, b=2)
        assert time.monotonic() - started < 3.0
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "state_unavailable" and answer.headers["Retry-After"] == "1"
        assert "Traceback" not in answer.text
        assert first.call("free", "say_hello", name="y").json() == {"result": "Hello, y!"}  # needs no Redis
        for _ in range(2):  # the SDK path, then the lean one
            called = _mcp(second, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                   "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}, sid, "limited")
            error = json.loads(called.text if called.text.startswith("{") else next(
                line[5:] for line in called.text.splitlines() if line.startswith("data:") and len(line) > 6))["error"]
            assert error["data"]["code"] == "state_unavailable" and error["data"]["retryAfterSeconds"] == 1
    finally:
        redis.start()
    assert first.call("limited", "add", a=2, b=2).json() == {"result": 4}  # no restart


def test_a_gateway_that_cannot_reach_its_redis_does_not_start(tmp_path):
    port = free_port()  # nothing listens there
    url = f"redis://:hunter2-redis-password@127.0.0.1:{port}/0"
    (tmp_path / "tools").mkdir()
    started = time.monotonic()
    done = subprocess.run(
        [TOOLDOCK, "serve", str(tmp_path / "tools"), "--port", "0"],
        capture_output=True, text=True, timeout=60,
        env={**Gateway(tmp_path / "tools", tmp_path / "log").env, "TOOLDOCK_STATE_URL": url,
             "TOOLDOCK_STATE_KEY": SUITE_STATE_KEY},
    )
    assert done.returncode == 1 and time.monotonic() - started < 30
    assert "TOOLDOCK_STATE_URL" in done.stderr and f"127.0.0.1:{port}" in done.stderr
    assert "hunter2" not in done.stderr + done.stdout and "Traceback" not in done.stderr
    assert "unset TOOLDOCK_STATE_URL" in done.stderr


def test_health_says_where_the_state_is(replicas):
    first, _, _ = replicas
    assert "shared state in Redis at unix://" in first.logs
    assert httpx.get(f"{first.url}/health", timeout=10).status_code == 200


def test_a_key_revoked_with_the_cli_is_refused_by_every_replica_within_a_second(replicas, tmp_path):
    """Replicas sharing a keys directory (here the suite's TOOLDOCK_KEYS_DIR, as a shared volume would be):
    a key works on both, then `tooldock keys revoke` is refused by both within a second."""
    from tooldock.keys import KeyStore

    first, second, _ = replicas
    keys = KeyStore.from_env()
    record, key = keys.create("replicas", "write", ("free",))
    bearer = {"Authorization": f"Bearer {key}", "X-Namespace": "free"}
    for gateway in (first, second):
        answer = httpx.post(f"{gateway.url}/tools/say_hello", json={"name": "k"}, headers=bearer, timeout=30)
        assert answer.status_code == 200, answer.text
    revoked = subprocess.run([TOOLDOCK, "keys", "revoke", record.id], capture_output=True, text=True, timeout=60)
    assert revoked.returncode == 0, revoked.stderr
    started = time.monotonic()
    for gateway in (first, second):
        while True:
            answer = httpx.post(f"{gateway.url}/tools/say_hello", json={"name": "k"}, headers=bearer, timeout=30)
            if answer.status_code == 401:
                break
            assert time.monotonic() - started < 1.5, f"{gateway.url} still takes the revoked key"
            time.sleep(0.05)
    assert answer.json()["error"]["code"] == "invalid_api_key"


def test_stateless_requests_go_to_any_replica_behind_a_round_robin_balancer(replicas, tmp_path):
    """haproxy round robin, no stickiness: REST calls, `/namespaces` and an SDK 2.x client speaking 2026-07-28
    (no session) are answered right whichever replica each request reaches, and the requests reach both."""
    from balancer import Haproxy
    from test_mcp_clients import MODERN, run_modern_client

    first, second, _ = replicas
    proxy = Haproxy(tmp_path / "haproxy", [first.url, second.url])
    try:
        front = Gateway(tmp_path, tmp_path / "unused.log")
        front.url = proxy.url
        answered_by = {front.get("/namespaces").json()["replica"]["name"] for _ in range(4)}
        assert len(answered_by) == 2, answered_by  # round robin: both replicas answered
        assert [front.call("free", "say_hello", name=str(n)).json() for n in range(4)] == [
            {"result": f"Hello, {n}!"} for n in range(4)]
        before = proxy.requests_per_server()

        async def body(client):
            tools = await client.list_tools()
            sums = [await client.call_tool("add", {"a": n, "b": 1}) for n in range(6)]
            return client.protocol_version, [t.name for t in tools.tools], [s.structured_content for s in sums]

        (version, names, sums), _ = run_modern_client(front, "/ns/sums/mcp", None, body, mode=MODERN)
        assert version == MODERN and "add" in names
        assert sums == [{"result": n + 1} for n in range(6)]
        after = proxy.requests_per_server()
        assert all(after[server] - before[server] >= 3 for server in after), (before, after)
    finally:
        proxy.stop()


def _mcp(gateway: Gateway, body: dict, sid: str | None = None, namespace: str = "sums",
         method: str = "POST") -> httpx.Response:
    headers = {**gateway.headers(namespace), "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "MCP-Protocol-Version": "2025-11-25"}
    if sid:
        headers["Mcp-Session-Id"] = sid
    return httpx.request(method, f"{gateway.url}/mcp", headers=headers, json=body if method == "POST" else None,
                         timeout=30)


def _result(answer: httpx.Response) -> dict:
    """A JSON-RPC answer's `result`, from a JSON body or the `data:` line of an SSE one."""
    text = answer.text
    data = json.loads(text) if text.lstrip().startswith("{") else json.loads(
        next(line[5:] for line in text.splitlines() if line.startswith("data:") and len(line) > 6))
    assert "result" in data, data
    return data["result"]


def test_a_session_opened_on_one_replica_is_served_by_the_other_and_ended_everywhere(replicas):
    """initialize on A; initialized, tools/list and tools/call on B; a call on A again; DELETE on B: then
    the session id is 404 on both."""
    first, second, _ = replicas
    opened = _mcp(first, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert opened.status_code == 200, opened.text
    sid = opened.headers["mcp-session-id"]
    assert _mcp(second, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid).status_code == 202
    listed = _result(_mcp(second, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid))
    assert "add" in [tool["name"] for tool in listed["tools"]]
    for n, gateway in enumerate((second, first, second)):
        called = _mcp(gateway, {"jsonrpc": "2.0", "id": 3 + n, "method": "tools/call",
                                "params": {"name": "add", "arguments": {"a": n, "b": 10}}}, sid)
        assert _result(called)["structuredContent"] == {"result": n + 10}
    assert f"MCP session {sid[:12]} of sums adopted from another replica" in second.logs
    ended = _mcp(second, {}, sid, method="DELETE")
    assert ended.status_code in (200, 204), ended.text
    for gateway in (first, second):
        gone = time.monotonic() + 5
        while _mcp(gateway, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, sid).status_code != 404:
            assert time.monotonic() < gone, f"{gateway.url} still serves the ended session"
            time.sleep(0.05)


def test_a_session_is_not_adopted_for_another_key_or_an_unknown_id(replicas):
    from tooldock.keys import KeyStore

    first, second, _ = replicas
    opened = _mcp(first, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    sid = opened.headers["mcp-session-id"]
    _, key = KeyStore.from_env().create("other-caller", "write", ("sums",))
    stranger = Gateway(first.tools_dir, first.log_path)
    stranger.url, stranger.token = second.url, key
    assert _mcp(stranger, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid).status_code == 404
    assert _mcp(second, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, "0" * 32).status_code == 404
    assert _mcp(second, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, sid).status_code == 200


def test_an_sdk_session_through_a_round_robin_balancer_with_no_stickiness(replicas, tmp_path):
    """The official SDK client (2.x, on 2025-11-25 with its initialize handshake and session) behind haproxy
    round robin: its requests land on both replicas (haproxy's counters), and every answer is right."""
    from balancer import Haproxy
    from test_mcp_clients import HANDSHAKE, run_modern_client

    first, second, _ = replicas
    proxy = Haproxy(tmp_path / "haproxy", [first.url, second.url])
    try:
        front = Gateway(tmp_path, tmp_path / "unused.log")
        front.url = proxy.url
        before = proxy.requests_per_server()

        async def body(client):
            tools = await client.list_tools()
            sums = [await client.call_tool("add", {"a": n, "b": 2}) for n in range(6)]
            return client.protocol_version, [t.name for t in tools.tools], [s.structured_content for s in sums]

        (version, names, sums), exchanges = run_modern_client(front, "/ns/sums/mcp", None, body, mode="legacy")
        assert version == HANDSHAKE and "add" in names
        assert sums == [{"result": n + 2} for n in range(6)]
        assert len({e["request"].get("mcp-session-id") for e in exchanges} - {None}) == 1  # one session
        after = proxy.requests_per_server()
        assert all(after[server] - before[server] >= 3 for server in after), (before, after)
    finally:
        proxy.stop()


def test_a_session_outlives_the_replica_that_opened_it(tmp_path, redis):
    """The replica holding a session is SIGKILLed: the session's next requests, sent to the other replica,
    are served there (its facts are in Redis); nothing to initialize again."""
    tools = tmp_path / "tools"
    shutil.copytree(EXAMPLES / "multi-tool", tools / "sums")
    env = {"TOOLDOCK_STATE_URL": redis.url}
    doomed = Gateway(tools, tmp_path / "a.log", env).start()
    survivor = Gateway(tools, tmp_path / "b.log", env).start()
    try:
        opened = _mcp(doomed, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {"sampling": {}},
            "clientInfo": {"name": "t", "version": "1"}}})
        sid = opened.headers["mcp-session-id"]
        assert _mcp(doomed, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid).status_code == 202
        assert doomed.proc is not None
        doomed.proc.kill()
        doomed.proc.wait(10)
        called = _mcp(survivor, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                 "params": {"name": "add", "arguments": {"a": 20, "b": 22}}}, sid)
        assert _result(called)["structuredContent"] == {"result": 42}
    finally:
        doomed.stop()
        survivor.stop()


def test_opening_a_session_while_redis_is_lost_is_a_retryable_error(replicas, redis):
    first, _, _ = replicas
    redis.stop()
    try:
        started = time.monotonic()
        refused = _mcp(first, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        assert time.monotonic() - started < 3.0
        assert refused.status_code == 503 and refused.headers["Retry-After"] == "1"
        assert refused.json()["error"]["data"]["code"] == "state_unavailable"
    finally:
        redis.start()
    assert _mcp(first, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    ).status_code == 200


def _open(gateway: Gateway, namespace: str) -> str:
    opened = _mcp(gateway, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        namespace=namespace)
    sid = opened.headers["mcp-session-id"]
    assert _mcp(gateway, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid, namespace).status_code == 202
    return sid


def _call(gateway: Gateway, sid: str, namespace: str, tool: str, **arguments: object) -> object:
    answer = _mcp(gateway, {"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                            "params": {"name": tool, "arguments": arguments}}, sid, namespace)
    content = _result(answer)["structuredContent"]
    return content.get("result", content)


def test_what_a_tool_keeps_in_its_session_is_seen_on_every_replica(replicas):
    """`ctx.set_state` on replica A, `ctx.get_state` on B (which adopts the session with what A kept); then
    a change on B reaches A, which held the session all along."""
    first, second, _ = replicas
    sid = _open(first, "memo")
    assert _call(first, sid, "memo", "remember", value="kept on A") == "kept"
    assert _call(second, sid, "memo", "recall")["value"] == "kept on A"
    assert _call(second, sid, "memo", "remember", value="kept on B") == "kept"
    deadline = time.monotonic() + 3
    while (seen := _call(first, sid, "memo", "recall")["value"]) != "kept on B":
        assert time.monotonic() < deadline, f"replica A still sees {seen!r}"
        time.sleep(0.05)
    assert _call(first, sid, "memo", "forget") == "forgotten"
    deadline = time.monotonic() + 3
    while _call(second, sid, "memo", "recall")["value"] is not None:
        assert time.monotonic() < deadline, "replica B still sees the forgotten value"
        time.sleep(0.05)


def test_an_sdk1_session_through_three_replicas_behind_round_robin(replicas, redis, tmp_path, mcp1_python):
    """The official SDK 1.x client (a virtualenv with the latest `mcp<2`) on a 2025-11-25 session through
    haproxy round robin over three replicas: its consecutive requests land on all three (haproxy's counters),
    each adopting the session, and every answer is right; its closing DELETE ends the session everywhere."""
    from balancer import Haproxy
    from test_mcp_clients import run_mcp1

    first, second, tools = replicas
    third = Gateway(tools, tmp_path / "c.log", {"TOOLDOCK_STATE_URL": redis.url,
                                                "MANAGER_INTERNAL_TOKEN": INTERNAL}).start()
    proxy = Haproxy(tmp_path / "haproxy", [first.url, second.url, third.url])
    try:
        before = proxy.requests_per_server()
        out = run_mcp1(mcp1_python, "streamable", f"{proxy.url}/ns/sums/mcp", first.headers(), "add", {"a": 2, "b": 3})
        after = proxy.requests_per_server()
        assert out["protocol_version"] == "2025-11-25" and out["server_info"]["name"] == "tooldock/sums"
        assert out["call"]["structuredContent"] == {"result": 5} and out["ping"] is True
        assert "add" in {t["name"] for t in out["tools"]}
        exchanges = out["exchanges"]
        assert all(e["status"] in (200, 202, 204) for e in exchanges), exchanges
        assert len({e["request_session_id"] for e in exchanges[1:]}) == 1  # one session throughout
        assert all(after[s] - before[s] >= 2 for s in after), (before, after)  # on every replica
        sid = out["session_id"]
        for gateway in (first, second, third):  # the client's DELETE ended it on all of them
            gone = _mcp(gateway, {"jsonrpc": "2.0", "id": 9, "method": "ping"}, sid=sid)
            assert gone.status_code == 404, gone.text
    finally:
        proxy.stop()
        third.stop()


def test_a_session_adopted_by_many_requests_at_once_answers_every_one(replicas):
    """16 requests of a session reach a replica that does not hold it at once: one adopts it, the others
    wait for it to be served there (none finds it half made: a 500 "No read stream writer available")."""
    import threading

    first, second, _ = replicas
    for _ in range(3):
        sid = _open(first, "sums")
        answers: list[object] = []

        def call(n: int, sid: str = sid, answers: list[object] = answers) -> None:
            answer = _mcp(second, {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                                   "params": {"name": "add", "arguments": {"a": n, "b": 1}}}, sid)
            answers.append(_result(answer)["structuredContent"] if answer.status_code == 200 else answer.status_code)

        threads = [threading.Thread(target=call, args=(n,)) for n in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert all(isinstance(a, dict) for a in answers) and len(answers) == 16, answers
        assert sorted(a["result"] for a in answers if isinstance(a, dict)) == list(range(1, 17))
