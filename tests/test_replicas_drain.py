"""A stopping replica waits for its calls to upstream servers too (issue 56): SIGTERM while an MCP call to an
upstream namespace's server streams its answer (progress as SSE), and the call still ends with its result,
as a call to a worker does (test_drain.py), instead of its stream being ended by the drain."""

from __future__ import annotations

import json
import signal
import threading
import time

import httpx
import pytest
from conftest import Gateway
from test_upstream import DEMO

pytestmark = pytest.mark.slow
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json",
           "MCP-Protocol-Version": "2025-11-25"}


def test_sigterm_lets_a_streamed_call_to_an_upstream_server_finish(tmp_path):
    tools = tmp_path / "tools"
    (tools / "up").mkdir(parents=True)
    (tools / "up" / "tools.toml").write_text(
        f'active_toolsets = ["demo_slow"]\n[[servers]]\nnamespace = "demo"\ncommand = "{DEMO}"\n')
    gateway = Gateway(tools, tmp_path / "gw.log", {"TOOLDOCK_SHUTDOWN_GRACE": "1"}).start()
    try:
        gateway.wait_for(lambda: all(s["state"] == "ready" for s in gateway.namespace("up")["servers"]),
                         what="the upstream server")
        url, headers = f"{gateway.url}/ns/up/mcp", {**gateway.headers(), **HEADERS}
        opened = httpx.post(url, headers=headers, timeout=30, json={
            "jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})
        headers["Mcp-Session-Id"] = opened.headers["mcp-session-id"]
        httpx.post(url, headers=headers, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, timeout=30)
        lines: list[str] = []
        done = threading.Event()

        def call() -> None:  # progress every second, then the result: an SSE answer
            body = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
                "name": "demo_slow", "arguments": {"seconds": 4}, "_meta": {"progressToken": "p"}}}
            with httpx.stream("POST", url, headers=headers, json=body, timeout=60) as answer:
                lines.append(answer.headers.get("content-type", ""))
                lines.extend(answer.iter_lines())
            done.set()

        threading.Thread(target=call, daemon=True).start()
        deadline = time.monotonic() + 20
        while not any('"notifications/progress"' in line for line in lines):  # the call runs upstream
            assert time.monotonic() < deadline and not done.is_set(), lines
            time.sleep(0.05)
        assert gateway.proc is not None
        gateway.proc.send_signal(signal.SIGTERM)
        assert done.wait(30), "the call's stream did not end"
        assert lines[0].startswith("text/event-stream")
        answers = [json.loads(line[5:]) for line in lines if line.startswith("data:") and len(line) > 6]
        results = [a for a in answers if a.get("id") == 2]
        assert results and results[-1]["result"]["content"][0]["text"] == "slept 4.0", lines[-6:]
        gateway.proc.wait(30)  # and then it stops (its status: SIGTERM's, as uvicorn raises it again)
        assert "Traceback" not in gateway.logs
    finally:
        gateway.stop()
