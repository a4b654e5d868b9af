"""`tooldock relay` (issue 14): the stdio MCP server a sandbox runs, driven by the official SDK's stdio
client against a real gateway's relay socket."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import TOOLDOCK, VERSIONED_CALC, Gateway
from relaykit import CONTEXT_TOOL, LATER_TOOL, RELAY_TOOLS, add_namespace, cleanup, relay_env

from tooldock.keys import KeyStore


def relay_gateway(tmp: Path) -> Iterator[tuple[Gateway, Path, KeyStore]]:
    """A gateway over a copy of the relay fixture, with its own relay socket and keys; stopped after."""
    shutil.copytree(RELAY_TOOLS, tmp / "tools")
    env, sock, keys = relay_env()
    gateway = Gateway(tmp / "tools", tmp / "gateway.log", env).start()
    yield gateway, sock, keys
    gateway.stop()
    cleanup(sock)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Gateway, Path, KeyStore]]:
    yield from relay_gateway(tmp_path_factory.mktemp("relayclient"))


def run_relay(sock: Path, key: str | None, body: Any, *args: str, env_name: str = "TOOLDOCK_API_KEY",
              on_message: Any = None, **callbacks: Any) -> tuple[Any, str]:
    """Run `body(session)` against `tooldock relay --socket SOCK`; returns its result and the relay's stderr.
    `callbacks`: more arguments for the SDK's ClientSession."""
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    env = {k: v for k, v in os.environ.items() if k not in ("TOOLDOCK_API_KEY", "OUBLIETTE_API_KEY")}
    if key is not None:
        env[env_name] = key
    params = StdioServerParameters(command=TOOLDOCK, args=["relay", "--socket", str(sock), *args], env=env)
    with tempfile.TemporaryFile("w+") as errlog:
        async def main() -> Any:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, message_handler=on_message, **callbacks) as session:
                    await session.initialize()
                    return await body(session)

        result = asyncio.run(main())
        errlog.seek(0)
        return result, errlog.read()


async def names(session: Any) -> list[str]:
    return sorted(t.name for t in (await session.list_tools()).tools)


def text(result: Any) -> str:
    return " ".join(getattr(c, "text", "") for c in result.content)


def test_lists_the_keys_tools_with_the_prefix_and_calls_them(served):
    gateway, sock, keys = served
    _, key = keys.create("droid", "write", ("project",))
    name = f"droid-{os.getpid()}"

    async def body(session):
        listed = await session.list_tools()
        create = next(t for t in listed.tools if t.name == "oubliette_project_create")
        assert create.input_schema["required"] == ["name"]
        made = await session.call_tool("oubliette_project_create", {"name": name, "description": "via relay"})
        echoed = await session.call_tool("oubliette_project_echo", {"text": "hello"})
        failed = await session.call_tool("oubliette_project_fail", {"message": "boom"})
        return sorted(t.name for t in listed.tools), made, echoed, failed

    (listed, made, echoed, failed), stderr = run_relay(sock, key, body)
    assert listed == ["oubliette_project_create", "oubliette_project_echo", "oubliette_project_fail",
                      "oubliette_project_list_projects", "oubliette_project_slow"]
    assert not made.is_error and made.structured_content["name"] == name
    assert not echoed.is_error and echoed.structured_content == {"result": "hello"}
    assert failed.is_error and "RuntimeError: boom" in text(failed)
    assert key not in stderr and "5 tool(s)" in stderr


def test_prefix_and_the_oubliette_variable(served):
    _, sock, keys = served
    _, key = keys.create("reader", "read", ("billing",))
    listed, stderr = run_relay(sock, key, names, "--prefix", "td_", env_name="OUBLIETTE_API_KEY")
    assert listed == ["td_billing_balance"]


def test_a_read_key_sees_only_read_only_tools(served):
    _, sock, keys = served
    _, key = keys.create("reader", "read")
    listed, _ = run_relay(sock, key, names)
    assert listed == ["oubliette_billing_balance", "oubliette_project_echo", "oubliette_project_list_projects",
                      "oubliette_project_slow"]


@pytest.mark.parametrize("case", ["no key", "bad key", "revoked key", "no socket"])
def test_no_tools_and_a_warning_instead_of_a_crash(served, tmp_path: Path, case: str):
    _, sock, keys = served
    record, key = keys.create("gone", "admin")
    presented: str | None = key
    path = sock
    if case == "no key":
        presented = None
    elif case == "bad key":
        presented = "tdk_000000000000_" + "x" * 43
    elif case == "revoked key":
        keys.revoke(record.id)
    else:
        path = tmp_path / "nothing.sock"
    listed, stderr = run_relay(path, presented, names)
    assert listed == []
    assert "warning" in stderr and "serving no tools" in stderr
    assert {"no key": "TOOLDOCK_API_KEY", "bad key": "invalid or expired API key",
            "revoked key": "revoked", "no socket": "cannot reach the relay socket"}[case] in stderr
    assert key not in stderr and "Traceback" not in stderr


def test_a_key_revoked_while_connected_fails_the_next_call(served):
    _, sock, keys = served
    record, key = keys.create("revoke-me", "write", ("project",))

    async def body(session):
        before = await session.call_tool("oubliette_project_echo", {"text": "before"})
        keys.revoke(record.id)
        after = await session.call_tool("oubliette_project_echo", {"text": "after"})
        return before, after

    (before, after), stderr = run_relay(sock, key, body)
    assert not before.is_error and text(before) == "before"
    assert after.is_error and "invalid or expired API key (-32001)" in text(after) and "revoked" in text(after)
    assert text(after).count("invalid or expired API key") == 1, text(after)  # the gateway's reason, said once
    assert key not in text(after) and key not in stderr


def test_a_call_after_the_gateway_told_of_the_revocation_says_so(served):
    """The watch hears of the revocation and the relay lists again (no tools): a call the client makes with
    the name it listed before is the key's refusal, not "unknown tool"."""
    _, sock, keys = served
    record, key = keys.create("told", "write", ("project",))
    changed, on_message = listening()

    async def body(session):
        await names(session)
        keys.revoke(record.id)
        await asyncio.wait_for(changed.wait(), 30)
        return await session.call_tool("oubliette_project_echo", {"text": "after"})

    after, stderr = run_relay(sock, key, body, "--watch", "0", on_message=on_message)
    assert after.is_error and "the relay refused the key" in text(after) and "revoked" in text(after)
    assert key not in text(after) and key not in stderr


@pytest.mark.parametrize("prefix", ["bad prefix ", "a/b_", "x" * 65])
def test_a_prefix_that_cannot_start_a_tool_name_is_refused(prefix):
    proc = subprocess.run([TOOLDOCK, "relay", "--prefix", prefix], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert proc.returncode == 2 and "--prefix" in proc.stderr and "letters, digits" in proc.stderr


def test_an_unknown_tool_is_an_mcp_error(served):
    _, sock, keys = served
    _, key = keys.create("x", "read", ("billing",))

    async def body(session):
        from mcp.shared.exceptions import MCPError

        try:
            await session.call_tool("oubliette_billing_charge", {"amount": 1})
        except MCPError as exc:
            return str(exc)
        return "no error"

    message, _ = run_relay(sock, key, body)
    assert "unknown tool 'oubliette_billing_charge'" in message


def listening() -> tuple[asyncio.Event, Any]:
    """An event, and the client message handler that sets it on notifications/tools/list_changed."""
    import mcp_types as types

    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            changed.set()

    return changed, on_message


@pytest.fixture
def own(tmp_path: Path) -> Iterator[tuple[Gateway, Path, KeyStore]]:
    """A gateway of the test's own, for tests that change its namespaces or stop it."""
    yield from relay_gateway(tmp_path)


def test_a_relist_shows_tools_added_since_and_none_once_the_key_is_revoked(own):
    """The relay asks the socket again on every tools/list (and before refusing a name it does not know):
    a namespace added while it runs shows up without a restart; a key revoked meanwhile lists nothing."""
    gateway, sock, keys = own
    record, key = keys.create("later", "write", ("later",))

    async def body(session):
        before = await names(session)
        add_namespace(gateway)
        gateway.wait_for(lambda: "later" in gateway.get("/namespaces").text, 60, "the new namespace")
        # Called before the client re-lists: the relay looks the name up again instead of refusing it.
        called = await session.call_tool("oubliette_later_twice", {"x": 21})
        after = await names(session)
        keys.revoke(record.id)
        revoked = await names(session)
        return before, called, after, revoked

    (before, called, after, revoked), stderr = run_relay(sock, key, body)
    assert before == [] and after == ["oubliette_later_twice"] and revoked == []
    assert not called.is_error and called.structured_content == {"result": 42}
    assert stderr.count("the relay refused the key") == 1 and "revoked" in stderr
    assert key not in stderr and "Traceback" not in stderr


def test_the_last_list_stays_while_the_socket_is_gone(own):
    gateway, sock, keys = own
    _, key = keys.create("droid", "write", ("project",))

    async def body(session):
        before = await names(session)
        gateway.stop()
        after = await names(session)
        return before, after, await session.call_tool("oubliette_project_echo", {"text": "x"})

    (before, after, call), stderr = run_relay(sock, key, body)
    assert len(before) == 5 and after == before
    assert "keeping the 5 tool(s) listed before" in stderr
    assert call.is_error and "unreachable" in text(call)


def test_the_relay_tells_its_client_when_the_keys_tools_change(own):
    """With --watch, the relay asks the socket on its own and sends notifications/tools/list_changed when the
    key's tools changed; the client lists again and sees the new tool, and none once the key is revoked."""
    gateway, sock, keys = own
    record, key = keys.create("watcher", "write", ("later",))
    changed, on_message = listening()

    async def body(session):
        caps = session.server_capabilities
        before = await names(session)
        add_namespace(gateway)
        await asyncio.wait_for(changed.wait(), 30)
        after = await names(session)
        changed.clear()  # the same tool with another description: announced too
        add_namespace(gateway, source=LATER_TOOL.replace("Return 2x.", "Double x."))
        await asyncio.wait_for(changed.wait(), 30)
        described = {t.name: t.description for t in (await session.list_tools()).tools}
        changed.clear()
        keys.revoke(record.id)
        await asyncio.wait_for(changed.wait(), 30)
        return caps, before, after, described, await names(session)

    (caps, before, after, described, revoked), _ = run_relay(sock, key, body, "--watch", "0.3", on_message=on_message)
    assert caps.tools.list_changed is True
    assert before == [] and after == ["oubliette_later_twice"]
    assert described["oubliette_later_twice"].startswith("Double x.")
    assert revoked == []


def test_the_key_may_come_from_a_file(served, tmp_path: Path):
    """TOOLDOCK_API_KEY_FILE (a secret mounted into the sandbox): the key is read from it, never shown; a
    file it cannot use (missing, empty, holding something else) leaves a warning naming the variable and the
    path, and no tools, as no key does: the sandbox's MCP client still starts."""
    _, sock, keys = served
    _, key = keys.create("filed", "read", ("billing",))
    (tmp_path / "key").write_text(key + "\n")
    listed, stderr = run_relay(sock, str(tmp_path / "key"), names, env_name="TOOLDOCK_API_KEY_FILE")
    assert listed == ["oubliette_billing_balance"] and key not in stderr
    (tmp_path / "two").write_text("tdk_a tdk_b")
    (tmp_path / "empty").write_text("\n")
    for path, message in ((tmp_path / "missing", "cannot read"), (tmp_path / "two", "must hold only the API key"),
                          (tmp_path / "empty", "is empty")):
        listed, stderr = run_relay(sock, str(path), names, env_name="TOOLDOCK_API_KEY_FILE")
        assert listed == [] and "TOOLDOCK_API_KEY_FILE" in stderr and str(path) in stderr, stderr
        assert message in stderr and "serving no tools" in stderr and "tdk_a" not in stderr


def test_the_gateway_tells_the_relay_at_once_without_a_timer(own):
    """`--watch 0` (no timer): the relay asked the socket to watch the key's tools, so a reload that adds
    one reaches its client as notifications/tools/list_changed within moments, and so does the key's
    revocation (the client lists again and gets no tools)."""
    import time

    gateway, sock, keys = own
    record, key = keys.create("pushed", "write", ("later",))
    changed, on_message = listening()

    async def body(session):
        caps = session.server_capabilities
        before = await names(session)
        add_namespace(gateway)
        started = time.monotonic()
        await asyncio.wait_for(changed.wait(), 30)
        added, waited = await names(session), time.monotonic() - started
        changed.clear()
        keys.revoke(record.id)
        started = time.monotonic()
        await asyncio.wait_for(changed.wait(), 30)
        return caps, before, added, waited, await names(session), time.monotonic() - started

    (caps, before, added, waited, revoked, told), stderr = run_relay(sock, key, body, "--watch", "0",
                                                                     on_message=on_message)
    assert caps.tools.list_changed is True
    assert before == [] and added == ["oubliette_later_twice"] and revoked == []
    assert waited < 15, waited  # the reload's own time; no timer was running
    assert told < 10, told  # the gateway looks at the keys file once a second
    assert "the relay refused the key" in stderr
    assert key not in stderr and "Traceback" not in stderr


def test_an_older_gateway_without_watching_leaves_the_timer(tmp_path: Path):
    """A socket that does not know tooldock_watch_tools (-32601, a gateway before it): with `--watch 0`
    the relay announces no listChanged, and it still serves the key's tools."""
    import json
    import socket
    import threading

    path = Path(tempfile.mkdtemp(prefix="tdo", dir="/tmp")) / "relay.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    server.listen()
    asked: list[str] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn, conn.makefile("rwb") as file:
                for line in file:
                    request = json.loads(line)
                    asked.append(request["method"])
                    if request["method"] == "oubliette_tools":
                        tool = {"name": "old_echo", "inputSchema": {"type": "object"}}
                        answer = {"result": {"tools": [tool]}}
                    else:
                        answer = {"error": {"code": -32601, "message": "method not found"}}
                    file.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **answer}).encode() + b"\n")
                    file.flush()

    threading.Thread(target=serve, daemon=True).start()

    async def body(session):
        return session.server_capabilities, await names(session)

    try:
        (caps, listed), stderr = run_relay(path, "tdk_x_y", body, "--watch", "0")
    finally:
        server.close()
        shutil.rmtree(path.parent, ignore_errors=True)
    assert listed == ["oubliette_old_echo"]
    assert not (caps.tools and caps.tools.list_changed)
    assert asked.count("tooldock_watch_tools") == 1, asked  # asked once, not on every list
    assert "Traceback" not in stderr


def test_after_the_gateway_restarts_the_relay_watches_again(own):
    """The watch lasts as long as the socket connection: when the gateway comes back, the relay (even with
    `--watch 0`) asks again within seconds, and the next change still reaches its client."""
    gateway, sock, keys = own
    _, key = keys.create("again", "write", ("later",))
    changed, on_message = listening()

    async def body(session):
        before = await names(session)
        await asyncio.to_thread(gateway.stop)
        await asyncio.to_thread(gateway.start)
        audit = "relay tooldock_watch_tools: watching"
        await asyncio.to_thread(gateway.wait_for, lambda: audit in gateway.logs, 30, "the relay to watch again")
        add_namespace(gateway)
        await asyncio.wait_for(changed.wait(), 30)
        return before, await names(session)

    (before, after), stderr = run_relay(sock, key, body, "--watch", "0", on_message=on_message)
    assert before == [] and after == ["oubliette_later_twice"]
    assert "Traceback" not in stderr


@pytest.mark.filterwarnings("ignore:The logging capability is deprecated")  # logging/setLevel, on purpose
def test_a_context_tools_progress_and_log_messages_reach_the_client(own):
    """Through `tooldock relay`: the SDK client's progress callback gets the tool's progress, its logging
    callback the tool's log messages (all of them, then from the level it set with logging/setLevel)."""
    gateway, sock, keys = own
    _, key = keys.create("context", "write", ("ctx",))
    add_namespace(gateway, "ctx", CONTEXT_TOOL)
    logged: list[tuple[str, Any]] = []

    async def on_log(params: Any) -> None:
        logged.append((params.level, params.data["msg"]))  # fastmcp's data: {"msg": ..., "extra": ...}

    async def body(session):
        for _ in range(300):
            if "oubliette_ctx_steps" in await names(session):
                break
            await asyncio.sleep(0.1)
        progress: list[tuple[float, float | None, str | None]] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            progress.append((value, total, message))

        first = await session.call_tool("oubliette_ctx_steps", {}, progress_callback=on_progress)
        everything = list(logged)
        logged.clear()
        await session.set_logging_level("warning")
        second = await session.call_tool("oubliette_ctx_steps", {})
        return text(first), progress, everything, text(second)

    (first, progress, everything, second), stderr = run_relay(sock, key, body, logging_callback=on_log)
    assert first == second == "done"
    assert progress == [(1.0, 3.0, "step 1"), (2.0, 3.0, "step 2"), (3.0, 3.0, "step 3")]
    assert everything == [("debug", "a debug line"), ("info", "an info line"), ("warning", "a warning line")]
    assert logged == [("warning", "a warning line")]
    assert key not in stderr and "Traceback" not in stderr


def test_a_context_tools_questions_reach_the_client_that_declared_them(own):
    """Through `tooldock relay`: the tool's elicitation, sampling and roots requests reach the SDK client's
    callbacks as requests of the call, and the answers reach the tool. A client that declared no elicitation
    is never asked: the tool gets the same refusal as from an MCP client without it."""
    import mcp_types as types

    gateway, sock, keys = own
    _, key = keys.create("asking", "write", ("ctx",))
    add_namespace(gateway, "ctx", CONTEXT_TOOL)
    asked: list[str] = []

    async def elicit(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(f"elicitation: {params.message}")
        return types.ElicitResult(action="accept", content={"value": "Ada"})

    async def sample(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(f"sampling: {params.messages[0].content.text}")
        return types.CreateMessageResult(role="assistant", model="test-llm",
                                         content=types.TextContent(type="text", text="the Traboules"))

    async def roots(context: Any) -> types.ListRootsResult:
        asked.append("roots")
        return types.ListRootsResult(roots=[types.Root(uri="file:///home/ada/trips", name="trips")])

    async def body(session):
        for _ in range(300):
            if "oubliette_ctx_trip" in await names(session):
                break
            await asyncio.sleep(0.1)
        return await session.call_tool("oubliette_ctx_trip", {"city": "Lyon"})

    result, stderr = run_relay(sock, key, body, elicitation_callback=elicit, sampling_callback=sample,
                               list_roots_callback=roots)
    assert not result.is_error, text(result)
    assert result.structured_content == {"traveller": "Ada", "sight": "the Traboules",
                                         "roots": ["file:///home/ada/trips"]}
    assert asked == ["elicitation: Who is travelling to Lyon?", "sampling: One sight in Lyon?", "roots"]
    assert key not in stderr and "Traceback" not in stderr

    asked.clear()
    result, _ = run_relay(sock, key, body, sampling_callback=sample, list_roots_callback=roots)
    assert result.is_error and "elicitation" in text(result).lower() and asked == []


def test_each_version_of_a_tool_can_be_called_through_the_relay(own):
    """FastMCP's client asks for a version as `_meta.fastmcp.version`; the relay lists a tool's versions,
    passes the one asked for on to the socket, which runs it, and refuses one not listed, as the gateway's
    MCP paths do (the highest ran for any version asked, and later every other was refused)."""
    from mcp.shared.exceptions import MCPError

    gateway, sock, keys = own
    add_namespace(gateway, "ver", VERSIONED_CALC)
    gateway.wait_for(lambda: "ver" in gateway.get("/namespaces").text, 60, "the new namespace")
    _, key = keys.create("ver", "write", ("ver",))

    async def body(session):
        listed = {t.name: t.meta for t in (await session.list_tools()).tools}
        answers = [(await session.call_tool("oubliette_ver_calc", {"x": 3}, meta={"fastmcp": {"version": v}})
                    ).structured_content for v in ("2", "1")]
        try:
            await session.call_tool("oubliette_ver_calc", {"x": 3}, meta={"fastmcp": {"version": "7"}})
        except MCPError as exc:
            return listed, answers, str(exc)
        return listed, answers, "no error"

    (listed, answers, refused), _ = run_relay(sock, key, body)
    assert listed == {"oubliette_ver_calc": {"fastmcp": {"version": "2", "versions": ["2", "1"]}}}
    assert answers == [{"result": 6}, {"result": 3}]  # version 2 doubles, version 1 returns x
    assert refused == ("tool 'oubliette_ver_calc' has no version '7' here: its versions are '2', '1'; call it "
                       "without a version (the highest), or with one of them")
