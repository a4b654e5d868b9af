"""Gateway replicas sharing a real Redis (issue 56, its first part): one rate-limit bucket across replicas,
reloads that reach every replica, a Redis lost while serving (a clear 503 / JSON-RPC error within a bound,
the rest serving on, recovery without a restart) and a Redis that is not there at start."""

from __future__ import annotations

import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import EXAMPLES, TOOLDOCK, Gateway, run_mcp
from mcp.shared.exceptions import MCPError
from rediskit import RedisServer, free_port

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
    redis.stop()
    try:
        started = time.monotonic()
        answer = first.call("limited", "add", a=1, b=2)
        assert time.monotonic() - started < 3.0
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "state_unavailable" and answer.headers["Retry-After"] == "1"
        assert "Traceback" not in answer.text
        assert first.call("free", "say_hello", name="y").json() == {"result": "Hello, y!"}  # needs no Redis

        async def over_mcp(session) -> None:
            with pytest.raises(MCPError) as refused:
                await session.call_tool("add", {"a": 1, "b": 2})
            assert refused.value.error.data["code"] == "state_unavailable"
            assert refused.value.error.data["retryAfterSeconds"] == 1

        run_mcp(second, "limited", over_mcp)
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
        env={**Gateway(tmp_path / "tools", tmp_path / "log").env, "TOOLDOCK_STATE_URL": url},
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
