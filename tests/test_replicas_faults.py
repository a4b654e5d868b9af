"""Replicas under load behind a real haproxy (issue 56): a rolling restart of every replica fails no call,
and a replica SIGKILLed mid-load loses no session (only the calls it had in flight fail, with a clear
status, never a hang). Sessions live in a real Redis; each client's requests alternate between replicas."""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from balancer import Haproxy
from conftest import EXAMPLES, TOKEN, Gateway
from rediskit import RedisServer, free_port

pytestmark = pytest.mark.slow
CLIENTS = 6


class Replica:
    """A gateway on a fixed port, so it can be restarted where the balancer expects it."""

    def __init__(self, tools: Path, folder: Path, name: str, env: dict[str, str]) -> None:
        self.tools, self.folder, self.name, self.env = tools, folder, name, env
        self.port, self.starts = free_port(), 0
        self.gateway = self.start()

    def start(self) -> Gateway:
        self.starts += 1
        log = self.folder / f"{self.name}-{self.starts}.log"
        self.gateway = Gateway(self.tools, log, self.env, args=("--port", str(self.port))).start()
        return self.gateway

    def stop(self, how: int = signal.SIGTERM) -> None:
        proc = self.gateway.proc
        assert proc is not None
        proc.send_signal(how)
        proc.wait(60)


class Load(threading.Thread):
    """One MCP client (a 2025-11-25 session, opened through the balancer) calling `add` until told to stop;
    it counts answers that are right and keeps what went wrong."""

    def __init__(self, url: str, n: int) -> None:
        super().__init__(daemon=True)
        self.url, self.n = url, n
        self.headers = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": "sums", "MCP-Protocol-Version":
                        "2025-11-25", "Accept": "application/json, text/event-stream",
                        "Content-Type": "application/json"}
        self.ok, self.failed, self.last_ok = 0, [], False
        self.halt = threading.Event()

    def post(self, client: httpx.Client, body: dict) -> httpx.Response:
        return client.post(f"{self.url}/mcp", headers=self.headers, json=body, timeout=30)

    def run(self) -> None:
        with httpx.Client() as client:
            opened = self.post(client, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "load", "version": "1"}}})
            self.headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
            self.post(client, {"jsonrpc": "2.0", "method": "notifications/initialized"})
            x = 0
            while not self.halt.is_set():
                x += 1
                status = "-"
                try:
                    answer = self.post(client, {"jsonrpc": "2.0", "id": x, "method": "tools/call",
                                                "params": {"name": "add", "arguments": {"a": x, "b": self.n}}})
                    status, text = str(answer.status_code), answer.text
                    data = json.loads(text if text.startswith("{") else next(
                        line[5:] for line in text.splitlines() if line.startswith("data:") and len(line) > 6))
                    good = answer.status_code == 200 and data["result"]["structuredContent"] == {"result": x + self.n}
                except Exception as exc:  # a transport error, a body that is not an answer
                    good, text = False, f"{type(exc).__name__}: {exc}"
                if good:
                    self.ok += 1
                else:
                    self.failed.append(f"{status} {text[:200]}")
                self.last_ok = good


@pytest.fixture(params=[False], ids=["operator-drain"])
def cluster(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[tuple[list[Replica], Haproxy]]:
    """Two replicas on one Redis behind haproxy; `request.param`: haproxy checks `/health` and neither
    retries a refused connection nor gives each request a connection of its own: what keeps calls whole is
    the replicas draining themselves on SIGTERM (TOOLDOCK_SHUTDOWN_GRACE's default with a state URL)."""
    redis = RedisServer(tmp_path / "redis").start()
    tools = tmp_path / "tools"
    shutil.copytree(EXAMPLES / "multi-tool", tools / "sums")
    env = {"TOOLDOCK_STATE_URL": redis.url}
    replicas = [Replica(tools, tmp_path, name, env) for name in ("a", "b")]
    proxy = Haproxy(tmp_path / "haproxy", [f"http://127.0.0.1:{r.port}" for r in replicas], redispatch=not request.param,
                    checks=request.param)
    yield replicas, proxy
    proxy.stop()
    for replica in replicas:
        replica.gateway.stop()
    redis.cleanup()


def _loads(url: str) -> list[Load]:
    loads = [Load(url, n) for n in range(CLIENTS)]
    for load in loads:
        load.start()
    deadline = time.monotonic() + 30
    while not all(load.ok >= 3 for load in loads):  # every session open and calling, on both replicas
        assert time.monotonic() < deadline and all(not load.failed for load in loads), [ld.failed for ld in loads]
        time.sleep(0.05)
    return loads


def _finish(loads: list[Load]) -> None:
    time.sleep(1.0)  # calls after the last change
    for load in loads:
        load.halt.set()
    for load in loads:
        load.join(60)
        assert not load.is_alive(), "a client hung"


def test_a_rolling_restart_of_every_replica_fails_no_call(cluster):
    """One replica at a time: the balancer drains it (as an operator, or a Kubernetes readiness probe, does),
    SIGTERM, start again on its port, back in the balancer. The sessions' requests go to the other replica
    meanwhile, which adopts them."""
    replicas, proxy = cluster
    loads = _loads(proxy.url)
    for n, replica in enumerate(replicas):
        before = sum(load.ok for load in loads)
        proxy.drain(f"r{n}")
        replica.stop(signal.SIGTERM)
        replica.start()
        proxy.ready(f"r{n}")
        while sum(load.ok for load in loads) < before + 20:  # calls go on
            time.sleep(0.05)
    _finish(loads)
    failed = [f for load in loads for f in load.failed]
    assert not failed, failed
    assert all(load.last_ok for load in loads)  # no session lost
    assert sum(load.ok for load in loads) >= 100


@pytest.mark.parametrize("cluster", [True], ids=["health-checks"], indirect=True)
def test_a_rolling_restart_behind_health_checks_alone_fails_no_call(cluster):
    """No operator step: each replica is sent SIGTERM and started again. It answers `/health` 503 while it
    drains (2 s with a state URL), the balancer's checks take it out, then it stops accepting and finishes
    its calls in flight; the balancer takes it back once it answers again."""
    replicas, proxy = cluster
    loads = _loads(proxy.url)
    for replica in replicas:
        before = sum(load.ok for load in loads)
        told = time.monotonic()
        replica.stop(signal.SIGTERM)
        assert time.monotonic() - told >= 1.5  # it drained before it stopped
        assert "draining" in replica.gateway.logs
        replica.start()
        time.sleep(1.0)  # the balancer sees it answer again
        while sum(load.ok for load in loads) < before + 20:  # calls go on
            time.sleep(0.05)
    _finish(loads)
    failed = [f for load in loads for f in load.failed]
    assert not failed, failed
    assert all(load.last_ok for load in loads)  # no session lost
    served = proxy.requests_per_server()
    assert all(count > 20 for count in served.values()), served  # both replicas served, before and after


def test_a_replica_killed_under_load_loses_no_session(cluster):
    replicas, proxy = cluster
    loads = _loads(proxy.url)
    replicas[0].stop(signal.SIGKILL)
    time.sleep(1.5)
    _finish(loads)
    failed = [f for load in loads for f in load.failed]
    # At most the calls in flight on the lost replica (one per client), and each client's next one when the
    # balancer connected it while the killed process was being torn down: the kernel took the connection
    # into the listen backlog, then reset it, which a balancer does not retry (the request was sent).
    assert len(failed) <= 2 * CLIENTS, failed
    # each failed at once, as the balancer saw it: a 5xx, or the connection closed with no answer
    assert all(f.startswith(("502", "503", "504", "- RemoteProtocolError")) for f in failed), failed
    assert all(load.last_ok for load in loads), "a session did not go on after the replica was lost"
