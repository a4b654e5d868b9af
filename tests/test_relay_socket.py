"""The relay socket (issue 14, seed 002's testing strategy): discovery and calls with a valid, an invalid,
an expired, a revoked and an insufficient key; malformed and huge lines; many connections; answers
multiplexed by id; every call logged with the key's id and never the key."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import TOKEN, Gateway
from relaykit import CONTEXT_TOOL, RELAY_TOOLS, Line, add_namespace, cleanup, relay_env

from tooldock.keys import KeyStore

MAX_LINE = 65536
MAX_CONNECTIONS = 6
ALL_TOOLS = ["billing_balance", "billing_charge", "project_create", "project_echo", "project_fail",
             "project_list_projects", "project_slow"]


class Relay:
    def __init__(self, gateway: Gateway, sock: Path, keys: KeyStore) -> None:
        self.gateway, self.sock, self.keys = gateway, sock, keys
        self.made: list[str] = []

    def key(self, scope: str, *namespaces: str, tools: tuple[str, ...] = (), expires: float | None = None) -> str:
        _, key = self.keys.create(f"test-{scope}", scope, namespaces, tools, expires)
        self.made.append(key)
        return key

    def line(self) -> Line:
        return Line(self.sock)


@pytest.fixture(scope="module")
def relay(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Relay]:
    tmp = tmp_path_factory.mktemp("relay")
    shutil.copytree(RELAY_TOOLS, tmp / "tools")
    env, sock, keys = relay_env(TOOLDOCK_MAX_BODY_BYTES=str(MAX_LINE),
                                TOOLDOCK_RELAY_MAX_CONNECTIONS=str(MAX_CONNECTIONS))
    gateway = Gateway(tmp / "tools", tmp / "gateway.log", env).start()
    yield Relay(gateway, sock, keys)
    gateway.stop()
    cleanup(sock)


def error_of(answer: dict) -> tuple[int, str]:
    assert "error" in answer, answer
    return answer["error"]["code"], answer["error"]["message"]


def test_the_socket_is_owner_and_group_only(relay: Relay):
    assert stat.S_ISSOCK(os.stat(relay.sock).st_mode)
    assert stat.S_IMODE(os.stat(relay.sock).st_mode) == 0o660
    assert f"relay socket at {relay.sock}" in relay.gateway.logs


def test_discovery_is_filtered_by_scope(relay: Relay):
    line = relay.line()
    assert line.tools(relay.key("admin")) == ALL_TOOLS
    assert line.tools(relay.key("write", "project")) == [t for t in ALL_TOOLS if t.startswith("project_")]
    # read: only the tools annotated readOnlyHint: true, in every namespace
    assert line.tools(relay.key("read")) == ["billing_balance", "project_echo", "project_list_projects", "project_slow"]
    assert line.tools(relay.key("read", "bill*")) == ["billing_balance"]
    assert line.tools(relay.key("write", tools=("project/c*", "balance"))) == ["billing_balance", "project_create"]
    assert line.tools(relay.key("write", "nothing-here")) == []
    descriptor = next(t for t in line.rpc("oubliette_tools", api_key=relay.key("admin"))["result"]["tools"]
                      if t["name"] == "project_create")
    assert descriptor["inputSchema"]["required"] == ["name"] and descriptor["description"].startswith("Create")
    line.close()


def test_discovery_and_calls_with_an_invalid_key_fail(relay: Relay):
    line = relay.line()
    good = relay.key("admin")
    for bad in ("oub_xxx", "tdk_000000000000_nope", good[:-2] + "xx", ""):
        for answer in (line.rpc("oubliette_tools", api_key=bad), line.call(bad, "project_echo", text="hi")):
            assert error_of(answer) == (-32001, "invalid or expired API key")
    assert error_of(line.rpc("oubliette_tools"))[0] == -32001  # no api_key at all
    assert error_of(line.call(None, "project_echo", text="hi"))[0] == -32001
    line.close()


def test_an_expired_key_fails(relay: Relay):
    key = relay.key("admin", expires=1)
    line = relay.line()
    assert line.tools(key) == ALL_TOOLS
    time.sleep(2.1)  # its expiry rounds up to the second: it lives 1-2 s
    answer = line.rpc("oubliette_tools", api_key=key)
    assert error_of(answer)[0] == -32001 and "expired" in answer["error"]["data"]["reason"]
    line.close()


def test_a_revoked_key_fails_on_the_next_call(relay: Relay):
    key = relay.key("write", "project")
    line = relay.line()
    assert line.call(key, "project_echo", text="before")["result"]["content"][0]["text"] == "before"
    relay.keys.revoke(key.split("_")[1])
    answer = line.call(key, "project_echo", text="after")
    assert error_of(answer)[0] == -32001 and "revoked" in answer["error"]["data"]["reason"]
    line.close()


def test_calls_with_a_valid_key(relay: Relay):
    line = relay.line()
    key = relay.key("write", "project")
    name = f"droid-{os.getpid()}-{time.monotonic_ns()}"
    answer = line.call(key, "project_create", name=name, description="made through the relay")
    result = answer["result"]
    assert result["isError"] is False
    assert json.loads(result["content"][0]["text"])["name"] == name
    assert result["structuredContent"]["name"] == name
    assert name in line.call(key, "project_list_projects")["result"]["structuredContent"]["result"]
    failed = line.call(key, "project_create", name=name)["result"]  # a tool's own error: isError, not -32000
    assert failed["isError"] is True and "already exists" in failed["content"][0]["text"]
    failed = line.call(key, "project_fail", message="boom")["result"]
    assert failed["isError"] is True and "RuntimeError: boom" in failed["content"][0]["text"]
    line.close()


def test_calls_beyond_the_scope_are_refused(relay: Relay):
    line = relay.line()
    reader, project = relay.key("read"), relay.key("write", "project")
    for key, tool, arguments in ((reader, "project_create", {"name": "x"}), (reader, "billing_charge", {"amount": 1}),
                                 (project, "billing_balance", {}), (project, "billing_nosuch", {})):
        answer = line.call(key, tool, **arguments)
        assert error_of(answer) == (-32002, "tool not allowed for this token scope"), answer
        assert answer["error"]["data"]["reason"]
    assert line.call(reader, "project_echo", text="ok")["result"]["content"][0]["text"] == "ok"
    line.close()


def test_bad_params_and_unknown_tools(relay: Relay):
    line = relay.line()
    key = relay.key("admin")
    code, message = error_of(line.call(key, "project_nosuch"))
    assert code == -32602 and "no tool named 'nosuch'" in message and "create" in message
    assert error_of(line.call(key, "nosuchnamespace_tool"))[0] == -32602
    assert error_of(line.call(key, "echo", text="x"))[0] == -32602  # no namespace part
    assert error_of(line.rpc("oubliette_call_tool", api_key=key, tool="project_echo", arguments=[1]))[0] == -32602
    assert error_of(line.rpc("oubliette_call_tool", api_key=key, tool=7))[0] == -32602
    answer = line.call(key, "project_echo", wrong="x")
    assert answer["result"]["isError"] is True and "invalid_arguments" in answer["result"]["content"][0]["text"]
    line.close()


@pytest.mark.parametrize("raw, code", [
    (b"{not json\n", -32700),
    (b"\xff\xfe\n", -32700),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "oubliette_tools", "params": {"x": NaN}}\n', -32700),
    (b"[1, 2]\n", -32600),
    (b'"just a string"\n', -32600),
    (b'{"id": 1, "method": "oubliette_tools"}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": 1}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "oubliette_tools"}\n', -32600),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}\n', -32601),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "oubliette_tools", "params": [1]}\n', -32602),
])
def test_malformed_lines_get_errors_and_the_connection_goes_on(relay: Relay, raw: bytes, code: int):
    line = relay.line()
    line.send(raw)
    answer = line.read()
    assert answer["jsonrpc"] == "2.0" and error_of(answer)[0] == code, answer
    assert "Traceback" not in json.dumps(answer)
    assert line.tools(relay.key("read", "billing")) == ["billing_balance"]
    line.close()


def test_a_huge_line_is_skipped_and_answered(relay: Relay):
    line = relay.line()
    key = relay.key("admin")
    for size in (MAX_LINE + 1, MAX_LINE * 40):
        line.send(json.dumps({"jsonrpc": "2.0", "id": 9, "method": "oubliette_call_tool",
                              "params": {"api_key": key, "tool": "project_echo",
                                         "arguments": {"text": "x" * size}}}).encode() + b"\n")
        code, message = error_of(line.read())
        assert code == -32600 and f"longer than {MAX_LINE} bytes" in message
        assert line.call(key, "project_echo", rid=10, text="still here")["result"]["content"][0]["text"] == "still here"
    just_fits = "y" * (MAX_LINE - 300)
    assert line.call(key, "project_echo", text=just_fits)["result"]["content"][0]["text"] == just_fits
    line.close()


def test_answers_are_multiplexed_by_id(relay: Relay):
    line = relay.line()
    key = relay.key("read", "project")
    requests = [{"jsonrpc": "2.0", "id": "slow", "method": "oubliette_call_tool",
                 "params": {"api_key": key, "tool": "project_slow", "arguments": {"seconds": 1.5}}},
                {"jsonrpc": "2.0", "id": 2, "method": "oubliette_call_tool",
                 "params": {"api_key": key, "tool": "project_echo", "arguments": {"text": "fast"}}},
                {"jsonrpc": "2.0", "method": "oubliette_tools", "params": {"api_key": key}},  # notification
                {"jsonrpc": "2.0", "id": 3, "method": "oubliette_tools", "params": {"api_key": key}}]
    line.send(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
    order = [line.read() for _ in range(3)]
    assert [a["id"] for a in order][-1] == "slow"  # the slow call answers last; the notification never
    assert {a["id"] for a in order} == {"slow", 2, 3}
    assert order[-1]["result"]["structuredContent"] == {"result": 1.5}
    line.close()


def test_many_connections_are_limited(relay: Relay):
    key = relay.key("read", "billing")
    open_lines = [relay.line() for _ in range(MAX_CONNECTIONS)]
    for line in open_lines:
        assert line.tools(key) == ["billing_balance"]
    extra = relay.line()
    code, message = error_of(extra.read())
    assert code == -32000 and "too many connections" in message
    assert extra.file.readline() == b""  # and closed
    extra.close()
    open_lines.pop().close()
    deadline = time.monotonic() + 10
    while True:  # the gateway notices the closed connection
        again = relay.line()
        again.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "oubliette_tools",
                               "params": {"api_key": key}}).encode() + b"\n")
        answer = again.read()
        again.close()
        if "result" in answer or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert answer["result"]["tools"][0]["name"] == "billing_balance"
    for line in open_lines:
        line.close()


def test_concurrent_connections_and_calls(relay: Relay):
    key = relay.key("read", "project")

    def client(i: int) -> list[str]:
        line = relay.line()
        try:
            return [line.call(key, "project_echo", rid=j, text=f"{i}-{j}")["result"]["content"][0]["text"]
                    for j in range(10)]
        finally:
            line.close()

    with ThreadPoolExecutor(MAX_CONNECTIONS - 1) as pool:
        results = list(pool.map(client, range(MAX_CONNECTIONS - 1)))
    assert results == [[f"{i}-{j}" for j in range(10)] for i in range(MAX_CONNECTIONS - 1)]


def test_a_client_that_disconnects_mid_call_does_not_hurt_the_gateway(relay: Relay):
    key = relay.key("read", "project")
    raw = socket.socket(socket.AF_UNIX)
    raw.connect(str(relay.sock))
    raw.sendall(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "oubliette_call_tool",
                            "params": {"api_key": key, "tool": "project_slow", "arguments": {"seconds": 2}}}).encode()
                + b"\n")
    raw.close()
    line = relay.line()
    assert line.call(key, "project_echo", text="fine")["result"]["content"][0]["text"] == "fine"
    line.close()


def test_every_call_is_logged_with_the_key_id_never_the_key(relay: Relay):
    key = relay.key("write", "project")
    line = relay.line()
    line.call(key, "project_echo", text="logged")
    line.call(key, "billing_balance")
    line.close()
    key_id = key.split("_")[1]
    relay.gateway.wait_for(lambda: f"key {key_id}" in relay.gateway.logs and "billing_balance" in relay.gateway.logs,
                           what="the relay's log lines")
    logs = relay.gateway.logs
    assert f"key {key_id} (test-write, write) relay project_echo: ok" in logs
    assert f"key {key_id} (test-write, write) relay billing_balance: not_in_scope" in logs
    for made in relay.made:
        assert made not in logs and made.split("_", 2)[2] not in logs


def test_a_name_a_client_sends_cannot_forge_a_log_line(relay: Relay):
    """Tool names and URL paths reach the access lines: their line breaks and escape sequences are escaped,
    so no client writes a line of its own (a forged "key ... (admin, admin)" line) or drives a terminal."""
    key = relay.key("write", "project")
    line = relay.line()
    forged = "project_echo\nINFO:     key 000000000000 (forged, admin) relay project_create: ok\x1b[31m" + "x" * 900
    assert "error" in line.rpc("oubliette_call_tool", api_key=key, tool=forged, arguments={})
    line.close()
    path = "/tools/echo%0AINFO:%20%20%20%20%20forged%20over%20http%0D"
    assert relay.gateway.post(path, "project", {"text": "x"}, headers={"Authorization": f"Bearer {key}"}).status_code == 404
    key_id = key.split("_")[1]
    relay.gateway.wait_for(lambda: "forged over http" in relay.gateway.logs, what="the HTTP line")
    logs = relay.gateway.logs
    assert f"relay project_echo\\nINFO:     key 000000000000 (forged, admin) relay project_create: ok\\x1b[31m" in logs
    assert "x" * 600 not in logs and "\x1b" not in logs  # cut, and no escape sequence reached the terminal
    assert not any(ln.startswith("INFO:     key 000000000000") or "forged over http" in ln and not ln.startswith(
        ("INFO:", "WARNING:")) for ln in logs.splitlines()), logs[-2000:]
    assert key_id in logs


def test_a_client_that_goes_away_has_its_calls_cancelled_and_one_that_half_closes_gets_its_answers(relay: Relay):
    key = relay.key("write", "project")
    gone = relay.line()
    for rid in ("gone-1", "gone-2"):
        gone.send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "oubliette_call_tool", "params": {
            "api_key": key, "tool": "project_slow", "arguments": {"seconds": 8}, "request_id": rid}}).encode() + b"\n")
    time.sleep(1)
    gone.close()
    mine = f"key {key.split('_')[1]} (test-write, write) relay project_slow"
    relay.gateway.wait_for(lambda: relay.gateway.logs.count(f"{mine}: cancelled") >= 2, timeout=5,
                           what="both calls cancelled at once, not run to their end")
    assert "request gone-1)" in relay.gateway.logs and f"{mine}: ok" not in relay.gateway.logs

    half = relay.line()
    half.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "oubliette_call_tool", "params": {
        "api_key": key, "tool": "project_slow", "arguments": {"seconds": 1}}}).encode() + b"\n")
    half.sock.shutdown(socket.SHUT_WR)  # done asking, still reading (`nc -N`)
    answer = half.read()
    assert answer["id"] == 7 and answer["result"]["isError"] is False, answer
    half.close()


def test_a_second_gateway_on_the_same_socket_leaves_it_alone(relay: Relay, tmp_path: Path):
    shutil.copytree(RELAY_TOOLS / "billing", tmp_path / "tools" / "billing")
    env = {"TOOLDOCK_KEYS_DIR": str(relay.keys.directory), "TOOLDOCK_RELAY_SOCKET": str(relay.sock)}
    second = Gateway(tmp_path / "tools", tmp_path / "second.log", env).start()
    try:
        assert "is served by another gateway; this one serves no relay" in second.logs
        line = relay.line()
        assert line.tools(relay.key("admin")) == ALL_TOOLS  # still the first gateway's
        line.close()
    finally:
        second.stop()
    assert relay.sock.exists()


def test_relay_calls_carry_a_request_id_to_the_worker_and_the_logs(relay: Relay):
    """As over HTTP: the caller's `request_id` (when safe to log) or a new one names the call in the worker's
    line about a failure, the access line and an error's data."""
    key = relay.key("write", "project")
    line = relay.line()
    failed = line.rpc("oubliette_call_tool", 1, api_key=key, tool="project_fail", arguments={"message": "traced"},
                      request_id="relay-req-42")
    assert failed["result"]["isError"] is True
    refused = line.rpc("oubliette_call_tool", 2, api_key=key, tool="billing_balance", request_id="bad id\nx")
    generated = refused["error"]["data"]["request_id"]
    assert len(generated) == 24 and all(c in "0123456789abcdef" for c in generated)
    line.close()
    key_id = key.split("_")[1]
    relay.gateway.wait_for(lambda: "relay-req-42" in relay.gateway.logs and generated in relay.gateway.logs,
                           what="the relay call's log lines")
    logs = relay.gateway.logs
    assert "tool 'fail' failed (request relay-req-42)" in logs
    assert f"key {key_id} (test-write, write) relay project_fail: internal_error (" in logs
    assert ", request relay-req-42)" in logs and f"request {generated})" in logs
    assert "bad id" not in logs


# -- tooldock_watch_tools: told when the key's tools change ------------------------------------------

@pytest.fixture
def own_relay(tmp_path: Path) -> Iterator[Relay]:
    """A gateway of the test's own (the test adds a namespace to it)."""
    shutil.copytree(RELAY_TOOLS, tmp_path / "tools")
    env, sock, keys = relay_env()
    gateway = Gateway(tmp_path / "tools", tmp_path / "gateway.log", env).start()
    yield Relay(gateway, sock, keys)
    gateway.stop()
    cleanup(sock)


def _quiet_for(line: Line, seconds: float) -> bool:
    """True when nothing arrives on `line` for `seconds`."""
    line.sock.settimeout(seconds)
    try:
        return not line.file.readline()
    except TimeoutError:
        return True
    finally:
        line.sock.settimeout(60)


def test_a_watching_key_is_told_when_its_tools_change_and_only_then(own_relay: Relay):
    relay = own_relay
    covered, elsewhere, revoked = relay.line(), relay.line(), relay.line()
    assert covered.rpc("tooldock_watch_tools", api_key=relay.key("write", "more*"))["result"] == {"watching": True}
    assert elsewhere.rpc("tooldock_watch_tools", api_key=relay.key("write", "project"))["result"] == {"watching": True}
    record, gone = relay.keys.create("gone", "write", ("more*",))
    assert revoked.rpc("tooldock_watch_tools", api_key=gone)["result"] == {"watching": True}
    relay.keys.revoke(record.id)
    assert revoked.read() == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}  # told once
    code, message = error_of(relay.line().rpc("tooldock_watch_tools", api_key="tdk_nosuchkey"))
    assert code == -32001 and message == "invalid or expired API key"

    add_namespace(relay.gateway, "more")
    told = covered.read()  # no request was sent: this is the announcement
    assert told == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert covered.tools(relay.made[0]) == ["more_twice"]
    assert _quiet_for(elsewhere, 2)  # a reload that left the key's namespaces as they were: nothing to say
    assert _quiet_for(revoked, 0.5)  # revoked since it asked: told then, and no longer watched
    key_id = relay.made[0].split("_")[1]
    assert f"key {key_id} (test-write, write) relay tooldock_watch_tools: watching" in relay.gateway.logs
    assert relay.made[0] not in relay.gateway.logs and gone not in relay.gateway.logs
    for line in (covered, elsewhere, revoked):
        line.close()


def test_a_watching_key_is_told_when_it_expires_or_is_revoked(own_relay: Relay):
    """A key's expiry and its revocation (`tooldock keys revoke` rewrites the keys file) are announced within
    moments; the other watchers are told nothing; a key told is no longer watched."""
    relay = own_relay
    expiring, revoked, staying = relay.line(), relay.line(), relay.line()
    started = time.monotonic()
    assert expiring.rpc("tooldock_watch_tools", api_key=relay.key("write", expires=3))["result"] == {"watching": True}
    record, gone = relay.keys.create("gone", "read")
    assert revoked.rpc("tooldock_watch_tools", api_key=gone)["result"] == {"watching": True}
    assert staying.rpc("tooldock_watch_tools", api_key=relay.key("read"))["result"] == {"watching": True}

    told = {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert expiring.read() == told  # not before it expired: the new keys in the file changed nothing for it
    assert 3 <= time.monotonic() - started < 10
    code, _ = error_of(expiring.rpc("oubliette_tools", api_key=relay.made[0]))
    assert code == -32001
    revoking = time.monotonic()
    relay.keys.revoke(record.id)
    assert revoked.read() == told
    assert time.monotonic() - revoking < 5
    time.sleep(0.5)
    assert "billing_balance" in staying.tools(relay.made[1])  # an answer, not an announcement, comes first

    add_namespace(relay.gateway, "more")  # a reload: only the key still watched hears of it
    assert staying.read() == told
    assert _quiet_for(expiring, 0.5) and _quiet_for(revoked, 0.5)
    for line in (expiring, revoked, staying):
        line.close()


def test_a_call_in_flight_is_stopped_when_its_key_is_revoked(relay: Relay):
    line = relay.line()
    record, key = relay.keys.create("relay-caller", "read")
    line.send((json.dumps({"jsonrpc": "2.0", "id": 7, "method": "oubliette_call_tool", "params": {
        "api_key": key, "tool": "project_slow", "arguments": {"seconds": 60}}}) + "\n").encode())
    time.sleep(1.5)  # the call is running (a valid key's call is not stopped by the looks at the keys file)
    revoking = time.monotonic()
    relay.keys.revoke(record.id)
    answer = line.read()
    assert time.monotonic() - revoking < 8 and answer["id"] == 7
    code, message = error_of(answer)
    assert (code, message) == (-32001, "invalid or expired API key")
    reason = answer["error"]["data"]["reason"]
    assert reason == f"tool 'slow' was stopped: API key {record.id} was revoked or expired while it ran"
    line.close()


# -- a call's Context tool progress and log messages (`_meta`) ---------------------------------------

def _with_ctx(relay: Relay) -> tuple[str, Line]:
    """Namespace ctx (relaykit.CONTEXT_TOOL) served, a write key and a connection that lists its tools."""
    key = relay.key("write")
    add_namespace(relay.gateway, "ctx", CONTEXT_TOOL)
    line = relay.line()
    relay.gateway.wait_for(lambda: {"ctx_steps", "ctx_trip"} <= set(line.tools(key)), what="namespace ctx")
    return key, line


def _until_answer(line: Line, rid: int) -> tuple[list[dict], dict]:
    """The notifications that came before the answer to `rid`, and the answer."""
    told = []
    while "id" not in (message := line.read()):
        told.append(message)
    assert message["id"] == rid, message
    return told, message


def test_a_call_asking_for_them_gets_its_progress_and_log_messages_first(own_relay: Relay):
    relay = own_relay
    key, line = _with_ctx(relay)

    meta = {"progressToken": "p1", "tooldock/logLevel": "info"}
    line.send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "oubliette_call_tool",
                          "params": {"api_key": key, "tool": "ctx_steps", "arguments": {}, "_meta": meta}}).encode() + b"\n")
    told, answer = _until_answer(line, 7)
    assert answer["result"]["isError"] is False and answer["result"]["content"][0]["text"] == "done"
    progress = [m["params"] for m in told if m["method"] == "notifications/progress"]
    assert progress == [{"progressToken": "p1", "progress": step, "total": 3, "message": f"step {step}"}
                        for step in (1, 2, 3)]
    logged = [m["params"] for m in told if m["method"] == "notifications/message"]
    # fastmcp's data, as MCP clients of the gateway get it: {"msg": ..., "extra": ...}
    assert [(m["level"], m["data"]["msg"]) for m in logged] == [("info", "an info line"), ("warning", "a warning line")]
    assert all(m["_meta"] == {"tooldock/requestId": 7} for m in logged)  # which call they belong to
    assert len(told) == len(progress) + len(logged)

    # Only progress; then neither: the answer is the next line.
    line.send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "oubliette_call_tool",
                          "params": {"api_key": key, "tool": "ctx_steps", "_meta": {"progressToken": 5}}}).encode() + b"\n")
    told, _ = _until_answer(line, 8)
    assert [m["params"]["progressToken"] for m in told] == [5, 5, 5]
    assert line.call(key, "ctx_steps", rid=9)["result"]["content"][0]["text"] == "done"

    # Nobody to ask: a tool that asks gets an error result, as from an MCP client without elicitation.
    asked = line.call(key, "ctx_ask_name", rid=10)["result"]
    assert asked["isError"] is True and "elicitation" in json.dumps(asked).lower()
    line.close()


def _call_trip(line: Line, key: str, rid: int, can_answer: dict) -> None:
    line.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "oubliette_call_tool", "params": {
        "api_key": key, "tool": "ctx_trip", "arguments": {"city": "Lyon"},
        "_meta": {"tooldock/capabilities": can_answer}}}).encode() + b"\n")


def _answer(line: Line, question: dict, **answer: Any) -> None:
    line.send(json.dumps({"jsonrpc": "2.0", "id": question["id"], **answer}).encode() + b"\n")


def test_a_call_that_declared_them_is_asked_its_tools_questions(own_relay: Relay):
    """Elicitation, sampling and roots: each question arrives on the connection as a JSON-RPC request naming
    its call, and the caller's answer goes to the tool; an error answer reaches the tool as an MCP error."""
    relay = own_relay
    key, line = _with_ctx(relay)
    everything = {"elicitation": {}, "sampling": {}, "roots": {}}

    _call_trip(line, key, 21, everything)
    elicit = line.read()
    assert elicit["method"] == "elicitation/create" and str(elicit["id"]).startswith("tooldock-ask-")
    assert elicit["params"]["message"] == "Who is travelling to Lyon?"
    assert elicit["params"]["_meta"] == {"tooldock/requestId": 21}
    assert line.tools(key)  # the connection serves other requests while a question waits
    _answer(line, elicit, result={"action": "accept", "content": {"value": "Ada"}})
    sample = line.read()
    assert sample["method"] == "sampling/createMessage" and sample["params"]["maxTokens"] == 20
    assert sample["params"]["messages"][0]["content"]["text"] == "One sight in Lyon?"
    _answer(line, sample, result={"role": "assistant", "model": "test-model",
                                  "content": {"type": "text", "text": "the Traboules"}})
    roots = line.read()
    assert roots["method"] == "roots/list" and roots["params"] == {"_meta": {"tooldock/requestId": 21}}
    _answer(line, roots, result={"roots": [{"uri": "file:///home/ada/trips", "name": "trips"}]})
    answer = line.read()
    assert answer["id"] == 21 and answer["result"]["isError"] is False, answer
    assert answer["result"]["structuredContent"] == {
        "traveller": "Ada", "sight": "the Traboules", "roots": ["file:///home/ada/trips"]}

    # Declined; then an error answer; then a capability not declared: no question reaches the caller.
    _call_trip(line, key, 22, everything)
    _answer(line, line.read(), result={"action": "decline"})
    assert line.read()["result"]["structuredContent"] == {"declined": "decline"}
    _call_trip(line, key, 23, everything)
    _answer(line, line.read(), error={"code": -32603, "message": "the user closed the dialog"})
    failed = line.read()
    assert failed["id"] == 23 and failed["result"]["isError"] is True
    assert "the user closed the dialog" in json.dumps(failed["result"])
    _call_trip(line, key, 24, {"elicitation": {}})
    _answer(line, line.read(), result={"action": "accept", "content": {"value": "Ada"}})
    refused = line.read()  # sampling was not declared: the tool is refused it, the caller is not asked
    assert refused["id"] == 24 and refused["result"]["isError"] is True, refused
    assert "sampling" in json.dumps(refused["result"]).lower()

    # An answer no question waits for, and one with a bad result, change nothing else.
    _answer(line, {"id": "tooldock-ask-999"}, result={})
    _call_trip(line, key, 25, everything)
    _answer(line, line.read(), result={"action": "maybe"})
    bad = line.read()
    assert bad["id"] == 25 and bad["result"]["isError"] is True
    assert "done" == line.call(key, "ctx_steps", rid=26)["result"]["content"][0]["text"]
    line.close()


def test_a_question_unanswered_ends_with_its_connection(own_relay: Relay):
    relay = own_relay
    key, line = _with_ctx(relay)
    _call_trip(line, key, 31, {"elicitation": {}})
    assert line.read()["method"] == "elicitation/create"
    assert _in_flight(relay.gateway, "ctx") == 1
    line.close()  # never answered: the call ends with the connection, and the gateway serves on
    relay.gateway.wait_for(lambda: _in_flight(relay.gateway, "ctx") == 0, timeout=10, what="the call ended")
    other = relay.line()
    assert other.call(key, "ctx_steps", rid=1)["result"]["content"][0]["text"] == "done"
    other.close()


def _in_flight(gateway: Gateway, namespace: str) -> float:
    text = httpx.get(f"{gateway.url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30).text
    prefix = f'tooldock_calls_in_flight{{namespace="{namespace}"}}'
    found = [line for line in text.splitlines() if line.startswith(prefix)]
    assert len(found) == 1, text
    return float(found[0].split()[-1])


@pytest.mark.parametrize("meta, fragment", [
    ("not an object", '"_meta" must be a JSON object'),
    ({"progressToken": 1.5}, '"_meta.progressToken" must be a string or an integer'),
    ({"progressToken": True}, '"_meta.progressToken" must be a string or an integer'),
    ({"tooldock/logLevel": "loud"}, '"_meta.tooldock/logLevel" must be one of debug, info'),
    ({"tooldock/capabilities": ["sampling"]}, '"_meta.tooldock/capabilities" must be an object such as'),
    ({"tooldock/capabilities": {"sampling": True}}, '"_meta.tooldock/capabilities" must be an object such as'),
])
def test_a_meta_it_cannot_use_is_invalid_params(relay: Relay, meta, fragment):
    answer = relay.line().rpc("oubliette_call_tool", api_key=relay.key("write"), tool="project_echo",
                              arguments={"text": "x"}, _meta=meta)
    code, message = error_of(answer)
    assert code == -32602 and fragment in message
