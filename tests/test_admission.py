"""Admission controls (issue 15): per-namespace and per-key rate limits (token buckets) answered 429 with
Retry-After on REST, an error result on MCP and -32000 on the relay socket; and a namespace's
`tools: {allow, deny}` hiding tools from every listing and refusing their calls."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import time

import httpx
import pytest
from conftest import EXAMPLES, Gateway, run_mcp
from mcp.shared.exceptions import MCPError
from rediskit import RedisServer
from relaykit import RELAY_TOOLS, Line, cleanup, relay_env

from tooldock.errors import RateLimited
from tooldock.runtime.admission import Admission
from tooldock.state import open_store
from tooldock.state.memory import Bucket

pytestmark = pytest.mark.slow


def test_a_bucket_admits_its_burst_then_its_rate():
    bucket = Bucket(rate=2.0, burst=3.0, tokens=3.0, stamp=0.0)
    assert [bucket.take(0.0) for _ in range(3)] == [(1, 0.0)] * 3
    assert bucket.take(0.0) == (0, pytest.approx(0.5))  # one token comes back every 0.5 s
    assert bucket.take(0.5) == (1, 0.0) and bucket.take(0.5)[1] > 0
    assert bucket.take(100.0) == (1, 0.0) and bucket.tokens == pytest.approx(2.0)  # never more than the burst
    assert bucket.take(100.0, want=5) == (2, 0.0)  # a batch: what there is, up to what was asked


async def _admitted(admissions, calls: int, rate: float, burst: float, spread: bool = False) -> int:
    """Admit `calls` calls in waves of 50 at once, alternating between the replicas' admissions: how many
    passed."""

    async def one(n: int) -> bool:
        try:
            await admissions[n % len(admissions)].admit("namespace", "ns", rate, burst)
        except RateLimited:
            return False
        return True

    passed = 0
    for start in range(0, calls, 50):
        passed += sum(await asyncio.gather(*(one(n) for n in range(start, min(calls, start + 50)))))
        if spread:
            await asyncio.sleep(0.001)
    return passed


def test_replicas_take_tokens_in_batches_and_never_pass_more_than_the_bucket(tmp_path):
    """Two replicas' admissions on one real Redis: a busy replica takes its tokens in batches (far fewer
    round trips than calls), an idle one a token at a time, and together they pass at most the bucket."""
    redis = RedisServer(tmp_path / "redis", tcp=True).start()

    async def go() -> None:
        stores = [open_store(redis.url), open_store(redis.url)]
        try:
            admissions = [Admission(store) for store in stores]
            assert all(a.batching for a in admissions)
            before = _evalsha_calls(redis)
            assert await _admitted(admissions, 2000, 1e6, 1e6, spread=True) == 2000  # nothing refused
            round_trips = _evalsha_calls(redis) - before
            assert round_trips < 2000 / 5, round_trips  # batches

            redis.flush()
            passed = await _admitted(admissions, 600, 0.001, 200.0)  # no refill to speak of: 200 calls in all
            assert 150 <= passed <= 200, passed  # never over; a few taken ahead may go unused

            redis.flush()
            alone, results = Admission(stores[0]), []  # an idle replica: one token at a time, exactly
            for _ in range(4):
                try:
                    await alone.admit("namespace", "slow", 0.2, 3.0)
                    results.append(True)
                except RateLimited:
                    results.append(False)
                await asyncio.sleep(0.05)
            assert results == [True, True, True, False]
        finally:
            for store in stores:
                await store.close()

    try:
        asyncio.run(go())
    finally:
        redis.cleanup()


def _evalsha_calls(redis: RedisServer) -> int:
    out = subprocess.run(["redis-cli", "-p", str(redis.port), "INFO", "commandstats"], capture_output=True,
                         text=True, timeout=10, check=True).stdout
    return sum(int(line.split("calls=")[1].split(",")[0]) for line in out.splitlines()
               if line.startswith(("cmdstat_evalsha:", "cmdstat_eval:")))


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("admission")
    tools = tmp / "tools"
    shutil.copytree(EXAMPLES / "multi-tool", tools / "slowly")
    (tools / "slowly" / "tooldock.yaml").write_text("limits: {rate: 2, burst: 2}\n")
    shutil.copytree(EXAMPLES / "multi-tool", tools / "narrow")
    (tools / "narrow" / "tooldock.yaml").write_text("tools: {allow: ['*'], deny: ['multiply', 'word_*']}\n")
    shutil.copytree(RELAY_TOOLS / "project", tools / "project")
    env, sock, keys = relay_env()
    gw = Gateway(tools, tmp / "gateway.log", env).start()
    gw.sock, gw.keys = sock, keys  # type: ignore[attr-defined]
    yield gw
    gw.stop()
    cleanup(sock)


def test_a_namespace_rate_limit_answers_429_with_retry_after_then_admits_again(limited):
    time.sleep(1.1)  # a full bucket
    answers = [limited.call("slowly", "add", a=1, b=2) for _ in range(3)]
    assert [a.status_code for a in answers[:2]] == [200, 200]
    refused = answers[2]
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert refused.headers["retry-after"] == "1" and "2 calls/s" in refused.json()["error"]["message"]
    assert 0 < refused.json()["error"]["details"]["retry_after_seconds"] <= 0.5
    time.sleep(0.6)
    assert limited.call("slowly", "add", a=1, b=2).status_code == 200
    # other namespaces are not limited
    assert all(limited.call("narrow", "add", a=1, b=2).status_code == 200 for _ in range(5))


def test_a_rate_limit_on_mcp_is_an_error_result(limited):
    time.sleep(1.1)

    async def body(session):
        return [await session.call_tool("add", {"a": 1, "b": 1}) for _ in range(3)]

    results = run_mcp(limited, "slowly", body)
    assert [r.is_error for r in results] == [False, False, True]
    assert "rate_limited" in results[2].content[0].text


def test_a_key_rate_limit_on_the_relay_socket_and_rest(limited):
    _, key = limited.keys.create("slow-key", "write", ("project",), (), None, 1.0)
    line = Line(limited.sock)
    first = line.call(key, "project_echo", text="a")
    second = line.call(key, "project_echo", text="b", rid=2)
    line.close()
    assert "result" in first and second["error"]["code"] == -32000
    assert "rate_limited" in second["error"]["message"] and "key" in second["error"]["message"]
    time.sleep(1.1)
    headers = {"Authorization": f"Bearer {key}", "X-Namespace": "project"}
    codes = [httpx.post(f"{limited.url}/tools/echo", json={"text": "x"}, headers=headers).status_code for _ in range(2)]
    assert codes == [200, 429]
    # the bearer token has no key limit
    assert all(limited.call("project", "echo", text="x").status_code == 200 for _ in range(3))


def test_denied_tools_are_hidden_everywhere_and_refused(limited):
    listed = limited.get("/tools", "narrow").json()["tools"]
    assert sorted(t["name"] for t in listed) == ["add", "reverse_text"]
    refused = limited.call("narrow", "multiply", a=2, b=3)
    assert refused.status_code == 404 and refused.json()["error"]["code"] == "tool_not_found"
    assert "multiply" not in refused.json()["error"]["message"].split("available:")[1]
    paths = limited.get("/openapi.json", "narrow").json()["paths"]
    assert not any("multiply" in p or "word_count" in p for p in paths) and any("add" in p for p in paths)
    (entry,) = [n for n in limited.get("/namespaces").json()["namespaces"] if n["name"] == "narrow"]
    assert sorted(entry["tools"]) == ["add", "reverse_text"] and entry["tool_count"] == 2

    async def body(session):
        names = [t.name for t in (await session.list_tools()).tools]
        try:
            await session.call_tool("word_count", {"text": "a b"})
        except MCPError as err:
            return names, err.error.message
        return names, "answered"

    names, refusal = run_mcp(limited, "narrow", body)
    assert sorted(names) == ["add", "reverse_text"]
    assert refusal == "no tool named 'word_count' in namespace 'narrow'; available: add, reverse_text"
