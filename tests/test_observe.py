"""Audit log and metrics (issue 15): one JSON line per call on every front end (REST, MCP, legacy SSE, the
relay socket) with its request id, key id, client and outcome; arguments only when a namespace opts in,
secrets masked; retention; a log directory that cannot be written costs no call; Prometheus `/metrics` for
the bearer token or METRICS_TOKEN."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import EXAMPLES, TOKEN, Gateway, tooldock_cli
from mcp.client.session import ClientSession
from mcp.client.sse import sse_client
from relaykit import RELAY_TOOLS, Line, cleanup, relay_env
from test_upstream_http import secrets_set

METRICS_DOC = Path(__file__).resolve().parents[1] / "docs" / "howto" / "observability.md"

pytestmark = pytest.mark.slow

METRICS_TOKEN = "metrics-token-4f1e2d3c"
SECRET = "observe-secret-9a8b7c6d"
CALC = '''from fastmcp.tools import tool


@tool
def echo_text(text: str) -> str:
    """Echo the text.

    Args:
        text: Any text.
    """
    return text
'''


def lines(log_dir: Path, until: Any = None, timeout: float = 10) -> list[dict[str, Any]]:
    """The audit lines written so far (waiting up to `timeout` until `until(lines)` holds)."""
    deadline = time.monotonic() + timeout
    while True:
        found = []
        for path in sorted(log_dir.glob("*.jsonl")):
            found += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if until is None or until(found) or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


@pytest.fixture(scope="module")
def observed(tmp_path_factory: pytest.TempPathFactory) -> Any:
    tmp = tmp_path_factory.mktemp("observe")
    tools = tmp / "tools"
    shutil.copytree(EXAMPLES / "multi-tool", tools / "multi-tool")
    shutil.copytree(RELAY_TOOLS / "project", tools / "project")
    (tools / "opted").mkdir()
    (tools / "opted" / "calc.py").write_text(CALC)
    (tools / "opted" / "tooldock.yaml").write_text("audit: {arguments: true}\nsecrets: [OBSERVE_SECRET]\n")
    log_dir = tmp / "audit"
    log_dir.mkdir()
    old = dt.date.today() - dt.timedelta(days=40)
    recent = dt.date.today() - dt.timedelta(days=3)
    (log_dir / f"{old.isoformat()}.jsonl").write_text("{}\n")
    (log_dir / f"{recent.isoformat()}.jsonl").write_text("")
    (log_dir / "notes.jsonl").write_text("")  # not a daily file: never removed
    store = {"TOOLDOCK_SECRETS_DIR": str(tmp / "store"), "TOOLDOCK_AGE_KEY_FILE": str(tmp / "age.key")}
    tooldock_cli("secrets", "init", env=store)
    secrets_set(store, "OBSERVE_SECRET", SECRET, "opted")
    env, sock, keys = relay_env()
    env.update(store, TOOLDOCK_LOG_DIR=str(log_dir), LOG_RETENTION_DAYS="30", METRICS_TOKEN=METRICS_TOKEN)
    gw = Gateway(tools, tmp / "gateway.log", env).start()
    gw.log_dir, gw.sock, gw.keys = log_dir, sock, keys  # type: ignore[attr-defined]
    gw.old, gw.recent = old, recent  # type: ignore[attr-defined]
    yield gw
    gw.stop()
    cleanup(sock)


def test_a_rest_call_leaves_one_line_with_its_request_id(observed):
    reply = httpx.post(f"{observed.url}/tools/add", json={"a": 2, "b": 3},
                       headers={**observed.headers("multi-tool"), "X-Request-Id": "audit-rest-1"})
    assert reply.status_code == 200 and reply.headers["x-request-id"] == "audit-rest-1"
    found = lines(observed.log_dir, lambda ls: any(l.get("request_id") == "audit-rest-1" for l in ls))
    line = next(l for l in found if l.get("request_id") == "audit-rest-1")
    assert line["front_end"] == "rest" and line["namespace"] == "multi-tool" and line["tool"] == "add"
    assert line["status"] == "ok" and line["client"] == "127.0.0.1" and line["method"] == "tools/call"
    assert isinstance(line["latency_ms"], float) and line["generation"] >= 1
    assert "arguments" not in line and "key_id" not in line
    assert dt.datetime.fromisoformat(line["time"]).tzinfo is not None


def test_errors_are_recorded_with_their_code(observed):
    headers = observed.headers("multi-tool")
    httpx.post(f"{observed.url}/tools/nope", json={}, headers={**headers, "X-Request-Id": "audit-missing"})
    httpx.post(f"{observed.url}/tools/add", json={"a": "x"}, headers={**headers, "X-Request-Id": "audit-bad"})
    found = lines(observed.log_dir, lambda ls: {"audit-missing", "audit-bad"} <= {l.get("request_id") for l in ls})
    by_id = {l.get("request_id"): l for l in found}
    assert by_id["audit-missing"]["status"] == "tool_not_found" and by_id["audit-missing"]["tool"] == "nope"
    assert by_id["audit-bad"]["status"] in ("invalid_arguments", "tool_error")


def test_mcp_and_legacy_sse_calls_name_their_client_and_protocol(observed):
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    async def go() -> None:
        headers = observed.headers("multi-tool")
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http, streamable_http_client(
            f"{observed.url}/mcp", http_client=http
        ) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool("multiply", {"a": 6, "b": 7})
        async with sse_client(f"{observed.url}/sse", headers=headers) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                await session.call_tool("reverse_text", {"text": "abc"})

    asyncio.run(go())
    found = lines(observed.log_dir, lambda ls: {"multiply", "reverse_text"} <= {l.get("tool") for l in ls})
    mcp = next(l for l in found if l.get("tool") == "multiply")
    sse = next(l for l in found if l.get("tool") == "reverse_text")
    assert mcp["front_end"] == "mcp" and sse["front_end"] == "sse"
    for line in (mcp, sse):
        assert line["client_info"]["name"] == "mcp" and line["protocol"] and line["status"] == "ok"
        assert line["request_id"] and line["client"] == "127.0.0.1"


def test_relay_and_keyed_calls_carry_the_key_id_never_the_key(observed):
    made, key = observed.keys.create("audit", "write", ("project",), (), None)
    key_id = made.id
    line = Line(observed.sock)
    answer = line.call(key, "project_echo", text="hi")
    line.close()
    assert "result" in answer, answer
    reply = httpx.get(f"{observed.url}/tools", headers={"Authorization": f"Bearer {key}", "X-Namespace": "project"})
    assert reply.status_code == 200
    found = lines(observed.log_dir, lambda ls: any(l.get("front_end") == "relay" for l in ls))
    relay = next(l for l in found if l.get("front_end") == "relay")
    assert relay["key_id"] == key_id and relay["namespace"] == "project" and relay["tool"] == "echo"
    assert key not in observed.log_dir.joinpath(f"{dt.date.today().isoformat()}.jsonl").read_text()


def test_arguments_only_when_the_namespace_opts_in_with_secrets_masked(observed):
    reply = httpx.post(f"{observed.url}/tools/echo_text", json={"text": f"value {SECRET} here"},
                       headers={**observed.headers("opted"), "X-Request-Id": "audit-args"})
    assert reply.status_code == 200
    found = lines(observed.log_dir, lambda ls: any(l.get("request_id") == "audit-args" for l in ls))
    line = next(l for l in found if l.get("request_id") == "audit-args")
    assert line["arguments"] == {"text": "value *** here"}
    assert SECRET not in json.dumps(found)


def test_old_daily_files_are_removed(observed):
    httpx.post(f"{observed.url}/tools/add", json={"a": 1, "b": 1}, headers=observed.headers("multi-tool"))
    lines(observed.log_dir, lambda ls: len(ls) > 0)
    assert not (observed.log_dir / f"{observed.old.isoformat()}.jsonl").exists()
    assert (observed.log_dir / f"{observed.recent.isoformat()}.jsonl").exists()
    assert (observed.log_dir / "notes.jsonl").exists()
    assert oct((observed.log_dir / f"{dt.date.today().isoformat()}.jsonl").stat().st_mode & 0o777) == "0o600"


def test_metrics_for_the_bearer_token_or_the_metrics_token(observed):
    headers = observed.headers("multi-tool")
    for _ in range(3):
        httpx.post(f"{observed.url}/tools/add", json={"a": 1, "b": 2}, headers=headers)
    for token in (TOKEN, METRICS_TOKEN):
        reply = httpx.get(f"{observed.url}/metrics", headers={"Authorization": f"Bearer {token}"})
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/plain")
    text = reply.text
    count = next(float(l.rsplit(" ", 1)[1]) for l in text.splitlines() if l.startswith(
        'tooldock_calls_total{front_end="rest",namespace="multi-tool",status="ok",tool="add"}'))
    assert count >= 3
    assert 'tooldock_call_duration_seconds_bucket{front_end="rest",le="0.5",namespace="multi-tool"}' in text
    assert 'tooldock_namespace_state{namespace="multi-tool",state="ready"} 1.0' in text
    assert 'tooldock_reload_duration_seconds_count 1.0' in text
    assert "tooldock_mcp_sessions" in text and "tooldock_calls_in_flight" in text
    assert "tooldock_relay_connections 0.0" in text
    # every metric the gateway exposes is in the docs' table (rate-limit refusals are calls, by status)
    documented = set(re.findall(r"^\| `(tooldock_\w+)`", METRICS_DOC.read_text(), re.M))
    exposed = {name.removesuffix("_total") for name in re.findall(r"^# TYPE (tooldock_\w+) ", text, re.M)
               if not name.endswith("_created")}
    assert exposed and exposed <= {name.removesuffix("_total") for name in documented}, exposed - documented
    assert httpx.get(f"{observed.url}/metrics").status_code == 401
    # the metrics token opens nothing else
    other = httpx.get(f"{observed.url}/namespaces", headers={"Authorization": f"Bearer {METRICS_TOKEN}"})
    assert other.status_code == 401


def test_an_unwritable_log_directory_costs_no_call(tmp_path):
    log_dir = tmp_path / "ro"
    log_dir.mkdir()
    log_dir.chmod(0o500)
    if os.access(log_dir, os.W_OK):  # root ignores the mode: a file where the directory should be instead
        log_dir.chmod(0o700)
        log_dir.rmdir()
        log_dir.write_text("not a directory")
    gw = Gateway(EXAMPLES, tmp_path / "gateway.log", {"TOOLDOCK_LOG_DIR": str(log_dir)}).start()
    try:
        for _ in range(3):
            assert gw.call("multi-tool", "add", a=1, b=2).status_code == 200
        gw.wait_for(lambda: "cannot write the audit log" in gw.logs, what="the warning")
        assert gw.logs.count("cannot write the audit log") == 1
        metrics = httpx.get(f"{gw.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
        dropped = next(float(l.split()[1]) for l in metrics.splitlines() if l.startswith("tooldock_audit_lines_dropped"))
        assert dropped >= 1
    finally:
        gw.stop()


def test_audit_timestamps_read_as_datetime_isoformat_writes_them():
    from tooldock.runtime.observe import timestamp

    for now in (0.0, 1_700_000_000.0, 1_795_435_199.9994, 1_795_435_200.5, 1_795_435_200.0625):
        expected = dt.datetime.fromtimestamp(now, dt.UTC).isoformat(timespec="milliseconds")
        assert timestamp(now) == expected, now
    assert abs(dt.datetime.fromisoformat(timestamp()).timestamp() - time.time()) < 1


def test_a_text_log_record_is_one_line_whatever_its_values_hold():
    import logging

    from tooldock.runtime.logs import MAX_LOGGED_VALUE, OneLine

    record = logging.LogRecord("tooldock.access", logging.INFO, __file__, 1, "key %s %s: %s %d",
                               ("abc", "tool\nINFO:     forged\r\x1b[2J\x85" + "y" * 600, "ok", 7), None)
    assert OneLine().filter(record)
    message = record.getMessage()
    assert "\n" not in message and "\r" not in message and "\x1b" not in message and "\x85" not in message
    assert message.startswith("key abc tool\\nINFO:     forged\\r\\x1b[2J\\x85yyy")
    assert message.endswith("more): ok 7")
    assert len(message) < MAX_LOGGED_VALUE + 100
    formatted = logging.LogRecord("x", logging.INFO, __file__, 1, "already formatted\nsecond line", (), None)
    assert OneLine().filter(formatted) and formatted.getMessage() == "already formatted\\nsecond line"
