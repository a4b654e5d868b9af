"""Resumable SSE across replicas (issue 56): a session's events live in a real Redis (Streams), so a client
that lost a call's stream on replica A resumes it with `Last-Event-ID` on replica B: it gets every event it
missed, then the rest as the call on A goes on, then the result, and the stream ends. An event id of another
session, or one that is not an event id at all, replays nothing."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import Gateway
from rediskit import RedisServer
from test_mcp_lean import Session
from test_mcp_lean_stream import events

pytestmark = pytest.mark.slow
TICKER = '''import asyncio

from fastmcp import Context
from fastmcp.tools import tool


@tool
async def tick(n: int, pause: float, ctx: Context) -> int:
    """Report progress n times, `pause` seconds apart."""
    for i in range(n):
        await ctx.report_progress(i + 1, n)
        await asyncio.sleep(pause)
    return n
'''


@pytest.fixture(scope="module", params=["lean", "sdk"])
def pair(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, Gateway]]:
    """Two replicas on one Redis, on the lean path (the default) or the SDK's (TOOLDOCK_LEAN_MCP=false)."""
    tmp = tmp_path_factory.mktemp(f"streams-{request.param}")
    redis = RedisServer(tmp / "redis").start()
    (tmp / "tools" / "ticks").mkdir(parents=True)
    (tmp / "tools" / "ticks" / "ticks.py").write_text(TICKER)
    env = {"TOOLDOCK_STATE_URL": redis.url, "TOOLDOCK_LEAN_MCP": "true" if request.param == "lean" else "false"}
    first = Gateway(tmp / "tools", tmp / "a.log", env).start()
    second = Gateway(tmp / "tools", tmp / "b.log", env).start()
    yield first, second
    first.stop()
    second.stop()
    redis.cleanup()


def _call(rid: int, n: int, pause: float) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": rid, "method": "tools/call", "params": {
        "name": "tick", "arguments": {"n": n, "pause": pause}, "_meta": {"progressToken": "t"}}})


def _resume(session: Session, other: Gateway, last_id: str, timeout: float = 30) -> tuple[list, float, bool]:
    """GET the session's stream on `other` from `last_id`: the events, when the first came, whether it ended."""
    url = f"{other.url}/ns/ticks/mcp"
    found, started, first_at, text = [], time.monotonic(), None, ""
    with session.http.stream("GET", url, headers={"Last-Event-ID": last_id, "Accept": "text/event-stream"},
                             timeout=timeout) as again:
        assert again.status_code == 200, again.read()
        for line in again.iter_lines():
            text += line + "\n"
            if line.startswith("data: ") and first_at is None:
                first_at = time.monotonic() - started
        found = [e for e in events(text + "\n") if e[1] is not None]
    return found, first_at or 0.0, True


def test_a_finished_calls_stream_replays_on_the_other_replica_and_ends(pair):
    first, second = pair
    session = Session(first, "ticks")
    reply = session.http.post(session.url, content=_call(7, 3, 0.01), headers={"Content-Type": "application/json"})
    got = events(reply.text)
    assert got[0][1] is None and got[0][0]  # the priming event, with its id
    found, _, ended = _resume(session, second, got[0][0], timeout=20)
    assert ended and [d for _, d in found] == [d for _, d in got[1:]]  # everything after it, then the end
    assert [i for i, _ in found] == [i for i, _ in got[1:]]  # under the same ids
    assert found[-1][1]["result"]["structuredContent"] == {"result": 3}


def test_a_lost_stream_goes_on_live_on_the_other_replica_up_to_the_result(pair):
    """The client reads two events of a call on A and drops the connection; on B it gets the events it
    missed, then the rest while the call on A runs on, then the result."""
    first, second = pair
    session = Session(first, "ticks")
    seen: list = []
    with session.http.stream("POST", session.url, content=_call(8, 8, 0.5),
                             headers={"Content-Type": "application/json"}) as reply:
        text = ""
        for line in reply.iter_lines():
            text += line + "\n"
            seen = events(text + "\n")
            if len([e for e in seen if e[1] is not None]) >= 2:  # the priming event is the first
                break
    time.sleep(0.8)  # an event or two are sent to nobody meanwhile
    found, first_at, ended = _resume(session, second, seen[-1][0])
    progress = [d["params"]["progress"] for _, d in found if d.get("method") == "notifications/progress"]
    assert seen[-1][1]["params"]["progress"] == 2 and progress == [3, 4, 5, 6, 7, 8], found
    assert found[-1][1]["result"]["structuredContent"] == {"result": 8} and ended
    assert first_at < 1.0  # the missed ones at once, not only when the call ended


def test_an_event_id_of_another_session_or_no_event_id_replays_nothing(pair):
    first, second = pair
    owner, stranger = Session(first, "ticks"), Session(first, "ticks")
    reply = owner.http.post(owner.url, content=_call(9, 2, 0.01), headers={"Content-Type": "application/json"})
    priming = events(reply.text)[0][0]
    for session, last_id in ((stranger, priming), (owner, "bm90LWEtc3RyZWFt.1-0"), (owner, "garbage"),
                             (owner, priming.rsplit(".", 1)[0] + ".99999999999999-0")):
        started = time.monotonic()
        found, _, ended = _resume(session, second, last_id, timeout=20)
        assert found == [] and ended and time.monotonic() - started < 5, last_id


def test_a_call_whose_replica_is_gone_ends_the_resumed_stream_within_its_time_limit(tmp_path):
    """A resumed stream waits for the next event at most the call's time limit and a margin."""
    redis = RedisServer(tmp_path / "redis").start()
    (tmp_path / "tools" / "ticks").mkdir(parents=True)
    (tmp_path / "tools" / "ticks" / "ticks.py").write_text(TICKER)
    (tmp_path / "tools" / "ticks" / "tooldock.yaml").write_text("limits: {timeout: 2}\n")
    env = {"TOOLDOCK_STATE_URL": redis.url}
    first = Gateway(tmp_path / "tools", tmp_path / "a.log", env).start()
    second = Gateway(tmp_path / "tools", tmp_path / "b.log", env).start()
    try:
        session = Session(first, "ticks")
        got: list = []

        def call() -> None:
            text = ""
            try:
                with session.http.stream("POST", session.url, content=_call(5, 100, 1.0),
                                         headers={"Content-Type": "application/json"}) as reply:
                    for line in reply.iter_lines():
                        text += line + "\n"
                        got[:] = events(text + "\n")
            except httpx.HTTPError:  # the replica is killed mid-stream
                pass

        threading.Thread(target=call, daemon=True).start()
        deadline = time.monotonic() + 20
        while len([e for e in got if e[1] is not None]) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert first.proc is not None
        first.proc.kill()  # the replica running the call is gone
        started = time.monotonic()
        found, _, ended = _resume(session, second, got[-1][0], timeout=30)
        assert ended and all("result" not in d for _, d in found)
        assert time.monotonic() - started < 2 + 5 + 3  # the namespace's limit, the margin, slack
    finally:
        first.stop()
        second.stop()
        redis.cleanup()
