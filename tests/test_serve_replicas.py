"""`tooldock serve --replicas N` (issue 56, its second part): N gateway processes on one port, supervised by the
`serve` process, sharing a store (TOOLDOCK_STATE_URL, or a private redis-server that `serve` starts and stops).
Real processes throughout: the gateway, its replicas, Debian's redis-server."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import EXAMPLES, TOOLDOCK, Gateway, require
from rediskit import RedisServer

pytestmark = pytest.mark.slow
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}


def _tools(tmp: Path) -> Path:
    tools = tmp / "tools"
    shutil.copytree(EXAMPLES / "basic-tool", tools / "hello", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(EXAMPLES / "multi-tool", tools / "sums", ignore=shutil.ignore_patterns("__pycache__"))
    return tools


def _pids(gateway: Gateway) -> dict[str, int]:
    """The latest pid of each replica, from the parent's lines ("replica r2 started (pid N)")."""
    return {name: int(pid) for name, pid in re.findall(r"tooldock: replica (r\d+) started \(pid (\d+)\)", gateway.logs)}


def _health(gateway: Gateway) -> dict:
    with httpx.Client(timeout=30) as fresh:  # a new connection each time: any replica may take it
        return fresh.get(f"{gateway.url}/health").json()


def _mcp(gateway: Gateway, body: dict, sid: str | None = None) -> httpx.Response:
    headers = {**gateway.headers("sums"), "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "MCP-Protocol-Version": "2025-11-25",
               **({"Mcp-Session-Id": sid} if sid else {})}
    with httpx.Client(timeout=60) as fresh:
        return fresh.post(f"{gateway.url}/mcp", headers=headers, content=json.dumps(body))


def _result(answer: httpx.Response) -> dict:
    text = answer.text
    if not text.startswith("{"):  # an SSE answer: its data line
        text = next(line[5:] for line in text.splitlines() if line.startswith("data:") and len(line) > 6)
    return json.loads(text)


@pytest.fixture(scope="module")
def replicas(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Gateway]:
    """`serve --replicas 2` with no TOOLDOCK_STATE_URL: it starts a private redis-server."""
    require("redis-server")
    tmp = tmp_path_factory.mktemp("replicas")
    env = {"TOOLDOCK_STATE_URL": "", "TOOLDOCK_STATE_URL_FILE": ""}
    gateway = Gateway(_tools(tmp), tmp / "serve.log", env, ("--replicas", "2")).start()
    yield gateway
    gateway.stop()


def test_both_replicas_answer_on_the_one_port(replicas):
    assert "2 replicas" in replicas.logs and set(_pids(replicas)) == {"r1", "r2"}
    names: set[str] = set()
    for _ in range(300):
        names.add(_health(replicas)["replica"])
        if len(names) == 2:
            break
    assert len(names) == 2, names  # two processes took connections on the one port
    assert {int(name.rsplit(":", 1)[1]) for name in names} == set(_pids(replicas).values())
    assert _health(replicas)["state"] == "redis"
    assert "[r1] " in replicas.logs and "[r2] " in replicas.logs  # each replica's stderr says which it is
    assert replicas.call("hello", "say_hello", name="r").json() == {"result": "Hello, r!"}


def test_a_session_opened_on_one_replica_is_served_by_the_other(replicas):
    """SIGSTOP one replica, so the other takes every connection: the session is opened on r1 and its calls
    are served by r2 (and the other way round): the replicas share sessions through the store."""
    pids = _pids(replicas)
    first, second = pids["r1"], pids["r2"]
    os.kill(second, signal.SIGSTOP)
    try:
        assert _health(replicas)["replica"].endswith(f":{first}")
        opened = _mcp(replicas, INIT)
        assert opened.status_code == 200, opened.text
        sid = opened.headers["mcp-session-id"]
        assert _mcp(replicas, {"jsonrpc": "2.0", "method": "notifications/initialized"}, sid).status_code == 202
    finally:
        os.kill(second, signal.SIGCONT)
    os.kill(first, signal.SIGSTOP)
    try:
        assert _health(replicas)["replica"].endswith(f":{second}")
        for n in range(3):
            called = _mcp(replicas, {"jsonrpc": "2.0", "id": 2 + n, "method": "tools/call",
                                     "params": {"name": "add", "arguments": {"a": n, "b": 40}}}, sid)
            assert called.status_code == 200, called.text
            assert _result(called)["result"]["structuredContent"] == {"result": n + 40}
        listed = _mcp(replicas, {"jsonrpc": "2.0", "id": 9, "method": "tools/list"}, sid)
        assert "add" in [tool["name"] for tool in _result(listed)["result"]["tools"]]
    finally:
        os.kill(first, signal.SIGCONT)
    unknown = _mcp(replicas, {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, "no-such-session")
    assert unknown.status_code == 404  # the test above is not passing because any session id would do


def test_a_killed_replica_is_restarted(replicas):
    before = _pids(replicas)
    os.kill(before["r2"], signal.SIGKILL)
    replicas.wait_for(lambda: _pids(replicas)["r2"] != before["r2"], timeout=60, what="r2 to be started again")
    assert re.search(rf"replica r2 \(pid {before['r2']}\) exited unexpectedly \(signal SIGKILL\); restarting",
                     replicas.logs)
    after = _pids(replicas)["r2"]
    replicas.wait_for(lambda: f"replica r2 ready (pid {after})" in replicas.logs, timeout=120,
                      what="the new r2 to be ready")
    seen: set[str] = set()
    for _ in range(300):
        seen.add(_health(replicas)["replica"])
        if any(name.endswith(f":{after}") for name in seen):
            break
    assert any(name.endswith(f":{after}") for name in seen), seen
    assert not any(name.endswith(f":{before['r2']}") for name in seen)
    assert replicas.call("sums", "add", a=2, b=3).json() == {"result": 5}


def test_sigterm_stops_every_replica_and_the_private_redis(replicas):
    """Last in this module: it ends the module's gateway."""
    found = re.search(r"private redis-server \(pid (\d+)\) at unix://(\S+);", replicas.logs)
    assert found, replicas.logs[-3000:]
    redis_pid, sock = int(found.group(1)), Path(found.group(2))
    assert sock.exists() and oct(sock.stat().st_mode & 0o777) == "0o700"
    assert Path(f"/proc/{redis_pid}").exists()
    children = list(_pids(replicas).values())
    assert replicas.proc is not None
    replicas.proc.send_signal(signal.SIGTERM)
    assert replicas.proc.wait(timeout=90) == 0
    assert "every replica has stopped" in replicas.logs
    for pid in [redis_pid, *children]:
        assert not Path(f"/proc/{pid}").exists(), f"pid {pid} outlived the gateway"
    assert not sock.exists() and not sock.parent.exists()


def test_replicas_use_the_given_state_url(tmp_path, make_gateway):
    redis = RedisServer(tmp_path / "redis").start()
    try:
        gateway = make_gateway(_tools(tmp_path / "src"), env={"TOOLDOCK_STATE_URL": redis.url}, args=("--replicas", "2"))
        assert "private redis-server" not in gateway.logs
        for name in ("r1", "r2"):  # each replica said so
            assert f"[{name}] tooldock: shared state in Redis at {redis.url}" in gateway.logs
        sid = _mcp(gateway, INIT).headers["mcp-session-id"]
        keys = subprocess.run(["redis-cli", "-s", str(redis.sock), "--scan"], capture_output=True, text=True,
                              timeout=10, check=True).stdout
        assert sid in keys, keys  # the session is in the Redis it was given
        gateway.stop()
        assert redis._answers()  # not stopped by the gateway: it did not start it
    finally:
        redis.cleanup()


def test_without_redis_server_or_a_state_url_it_says_what_to_install_or_set(tmp_path):
    (tmp_path / "tools").mkdir()
    env = {**Gateway(tmp_path / "tools", tmp_path / "log").env, "PATH": str(Path(sys.executable).parent)}
    env.pop("TOOLDOCK_STATE_URL", None)
    env.pop("TOOLDOCK_STATE_URL_FILE", None)
    done = subprocess.run([TOOLDOCK, "serve", str(tmp_path / "tools"), "--port", "0", "--replicas", "2"],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 1, done.stderr
    assert "redis-server" in done.stderr and "TOOLDOCK_STATE_URL" in done.stderr
    assert "apt-get install redis-server" in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("count", ["0", "-1", "100000"])
def test_replicas_out_of_range_is_a_usage_error(tmp_path, count):
    (tmp_path / "tools").mkdir()
    done = subprocess.run([TOOLDOCK, "serve", str(tmp_path / "tools"), "--port", "0", "--replicas", count],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "--replicas" in done.stderr and "Traceback" not in done.stderr
