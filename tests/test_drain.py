"""A gateway told to stop (SIGTERM) drains first (issue 56): `/health` answers 503 `draining` for the grace
period while requests are still served, then it stops accepting connections, lets calls in flight finish,
ends its event streams with an SSE `retry` field, and exits. Ctrl-C skips the grace period."""

from __future__ import annotations

import json
import signal
import socket
import threading
import time
from pathlib import Path

import httpx
import pytest
from conftest import Gateway

NAPS = '''
import time
from fastmcp.tools import tool


@tool
def nap(seconds: float) -> str:
    """Sleep, then say so."""
    time.sleep(seconds)
    return f"slept {seconds}"
'''
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2025-11-25"}


@pytest.fixture
def naps(tmp_path: Path) -> Path:
    (tmp_path / "tools" / "naps").mkdir(parents=True)
    (tmp_path / "tools" / "naps" / "naps.py").write_text(NAPS)
    return tmp_path / "tools"


def _open_session(gateway: Gateway) -> str:
    opened = httpx.post(f"{gateway.url}/mcp", headers={**gateway.headers("naps"), **HEADERS}, timeout=30, json={
        "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
    assert opened.status_code == 200, opened.text
    sid = opened.headers["mcp-session-id"]
    httpx.post(f"{gateway.url}/mcp", headers={**gateway.headers("naps"), **HEADERS, "Mcp-Session-Id": sid},
               json={"jsonrpc": "2.0", "method": "notifications/initialized"}, timeout=30)
    return sid


def _refused(url: str) -> bool:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except OSError:
        return True
    return False


def test_sigterm_drains_then_stops_finishing_calls_and_ending_streams(naps, tmp_path):
    gateway = Gateway(naps, tmp_path / "gw.log", {"TOOLDOCK_SHUTDOWN_GRACE": "2"}).start()
    try:
        assert gateway.call("naps", "nap", seconds=0).status_code == 200  # the worker is up
        sid = _open_session(gateway)
        stream_lines: list[str] = []
        stream_ended = threading.Event()

        def listen() -> None:  # the session's standalone GET stream
            headers = {**gateway.headers("naps"), **HEADERS, "Mcp-Session-Id": sid}
            with httpx.stream("GET", f"{gateway.url}/mcp", headers=headers, timeout=60) as answer:
                assert answer.status_code == 200
                for line in answer.iter_lines():
                    stream_lines.append(line)
            stream_ended.set()

        slow: dict[str, httpx.Response] = {}

        def long_call() -> None:  # in flight when the gateway stops accepting
            slow["answer"] = gateway.call("naps", "nap", seconds=5)

        threading.Thread(target=listen, daemon=True).start()
        time.sleep(0.5)
        caller = threading.Thread(target=long_call, daemon=True)
        caller.start()
        time.sleep(0.5)
        assert gateway.proc is not None
        told = time.monotonic()
        gateway.proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)

        health = httpx.get(f"{gateway.url}/health", timeout=5)  # draining: out of the balancer, still serving
        assert health.status_code == 503 and health.json()["status"] == "draining", health.text
        answer = gateway.call("naps", "nap", seconds=0)
        assert answer.status_code == 200 and answer.headers.get("connection") == "close", answer.headers
        assert not stream_ended.is_set()

        assert stream_ended.wait(10), "the GET stream did not end after the grace period"
        ended_after = time.monotonic() - told
        assert 1.5 < ended_after < 6, ended_after
        assert "retry: 500" in stream_lines, stream_lines  # the client is told when to reconnect
        assert _refused(gateway.url), "still accepting connections after the grace period"
        assert caller.is_alive(), "the long call should still be running"

        caller.join(20)
        assert slow["answer"].status_code == 200, slow["answer"].text  # finished, not cut off
        assert json.loads(slow["answer"].text)["result"] == "slept 5.0"
        gateway.proc.wait(20)
        assert time.monotonic() - told < 15
        assert "draining" in gateway.logs
    finally:
        gateway.stop()


def test_ctrl_c_skips_the_grace_period(naps, tmp_path):
    gateway = Gateway(naps, tmp_path / "gw.log", {"TOOLDOCK_SHUTDOWN_GRACE": "30"}).start()
    try:
        assert gateway.proc is not None
        told = time.monotonic()
        gateway.proc.send_signal(signal.SIGINT)
        gateway.proc.wait(15)
        assert time.monotonic() - told < 10
    finally:
        gateway.stop()


def test_a_grace_period_that_is_not_a_number_is_refused(naps, tmp_path):
    gateway = Gateway(naps, tmp_path / "gw.log", {"TOOLDOCK_SHUTDOWN_GRACE": "soon"})
    with pytest.raises(RuntimeError, match="TOOLDOCK_SHUTDOWN_GRACE"):
        gateway.start(timeout=60)


ORPHANED_WORK_APP = '''
import asyncio, signal, socket, time

import uvicorn

from tooldock.runtime.http import exiting

# uvicorn raises the SIGTERM it handled again once stopped, which ends a process with the default action before
# its loop closes; not the gateway in a container, PID 1, for which the default action is to ignore it. As there:
signal.signal(signal.SIGTERM, signal.SIG_IGN)


async def app(scope, receive, send):
    assert scope["type"] == "lifespan"
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
            print("serving", flush=True)  # uvicorn has its signal handlers by now
        elif message["type"] == "lifespan.shutdown":
            # blocking work on the loop's executor that nobody awaits, as a DNS lookup whose caller gave up
            asyncio.get_running_loop().run_in_executor(None, time.sleep, 300)
            await send({"type": "lifespan.shutdown.complete"})
            return


sock = socket.socket()
sock.bind(("127.0.0.1", 0))
sock.listen()
exiting.run(uvicorn.Server(uvicorn.Config(app, loop="asyncio", log_level="warning")), [sock])
print("the loop closed", flush=True)
'''


def test_the_process_ends_without_waiting_for_work_nobody_awaits(tmp_path):
    """What kept a stopped gateway alive on Docker Swarm until SIGKILL (`swarm down` took 55 s): DNS lookups left
    in the event loop's threads, which closing the loop waits for. A real uvicorn server run by the gateway's
    runner (tooldock.runtime.http.exiting) as PID 1 would run it, its lifespan leaving 300 s of blocking work on
    the loop's executor: after SIGTERM it ends anyway, saying why, without the rest of its exit."""
    import subprocess
    import sys

    script = tmp_path / "orphaned.py"
    script.write_text(ORPHANED_WORK_APP)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "serving"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)  # waiting for the work would take 300 s
    finally:
        proc.kill()
    assert proc.returncode == 0, err
    assert "exiting without them" in err and "the loop closed" not in out
