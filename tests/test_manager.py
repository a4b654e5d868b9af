"""The manager driven the way an LLM drives it: the official MCP SDK client against `tooldock serve --manager`
(gateway and manager, process backend), through seed 000's flows end to end."""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import httpx
import pytest
from conftest import EXAMPLES, MANAGER_ARGS, TOKEN, manager_url, run_manager, tooldock_cli
from test_secrets_injection import secrets_set

pytestmark = pytest.mark.slow

CALC_V1 = '''"""Arithmetic."""
from fastmcp.tools import tool


@tool
async def add(a: int, b: int) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number.
    """
    return a + b
'''

CALC_V2 = CALC_V1.replace("return a + b", "return a + b + 1000")

NO_HINTS = """from fastmcp.tools import tool


@tool
def shout(text):
    return text.upper()
"""

USES_SIX = '''from fastmcp.tools import tool
import six


@tool
def six_version() -> str:
    """The version of the six package this namespace's environment has."""
    return six.__version__
'''

NEEDS_SECRET = '''import os
from fastmcp.tools import tool


@tool
def token_length() -> int:
    """The length of WEATHER_TOKEN (never the token itself)."""
    return len(os.environ["WEATHER_TOKEN"])


@tool
def leak() -> str:
    """Fails with the token in its message (the gateway must mask it)."""
    token = os.environ["WEATHER_TOKEN"]
    raise RuntimeError(f"cannot use {token}")
'''

# seed 000's manager tools plus ToolDock's; docs/reference/manager-tools.md has a section for each (tests/test_docs.py)
MANAGER_TOOLS = 25
WEATHER_VALUE = "weather-token-5c2e8d14aa"  # distinctive: a search for it cannot match by chance


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    env = {"TOOLDOCK_SECRETS_DIR": str(tmp_path / "store"), "TOOLDOCK_AGE_KEY_FILE": str(tmp_path / "age.key")}
    tooldock_cli("secrets", "init", env=env)
    return env


@pytest.fixture
def pair(make_gateway, store):
    """Gateway + manager over a tools directory holding examples/basic-tool only."""
    gateway = make_gateway(EXAMPLES, env=store, args=MANAGER_ARGS)
    for child in list(gateway.tools_dir.iterdir()):
        if child.name != "basic-tool":
            import shutil

            shutil.rmtree(child)
    return gateway, manager_url(gateway)


def test_an_llm_writes_a_tool_adds_a_requirement_reloads_and_calls_it(pair):
    gateway, url = pair

    async def flow(call):
        steps = {}
        steps["list"] = await call("list_namespaces")
        steps["create"] = await call("create_namespace", name="calc")
        steps["bad"] = await call("write_tool", namespace="calc", filename="shout.py", code=NO_HINTS)
        steps["good"] = await call("write_tool", namespace="calc", filename="arith.py", code=CALC_V1)
        steps["six"] = await call("write_tool", namespace="calc", filename="versions.py", code=USES_SIX)
        steps["req"] = await call("add_requirement", namespace="calc", package="six==1.16.0")
        steps["reqs"] = await call("list_requirements", namespace="calc")
        steps["tools"] = await call("list_tools", namespace="calc")
        steps["reload"] = await call("reload_core")
        steps["test"] = await call("test_tool", namespace="calc", tool_name="add", input={"a": 2, "b": 3})
        steps["src"] = await call("get_tool_source", namespace="calc", filename="arith.py")
        return steps

    steps = run_manager(url, flow)
    assert steps["list"] == (
        False,
        [
            {
                "name": "basic-tool",
                "tool_count": 1,
                "has_requirements": False,
                "secrets_status": "no_secrets_needed",
                "loaded": True,
                "state": "ready",
            },
        ],
    )
    assert steps["create"] == (False, {"created": True, "path": str((gateway.tools_dir / "calc").resolve())})
    # The bad tool is refused with its line, and nothing is on disk.
    error, bad = steps["bad"]
    assert not error and bad["written"] is False and bad["error"] == "Missing type hints"
    assert "line 5" in bad["details"] and "no docstring" in bad["details"]
    assert not (gateway.tools_dir / "calc" / "shout.py").exists()
    assert steps["good"] == (False, {"written": True, "filename": "arith.py", "tools_found": ["add"]})
    assert steps["req"] == (False, {"added": True, "package": "six==1.16.0", "namespace": "calc"})
    assert steps["reqs"] == (False, {"namespace": "calc", "packages": ["six==1.16.0"]})
    assert steps["tools"][1] == [
        {"name": "add", "description": "Add two numbers.", "filename": "arith.py"},
        {
            "name": "six_version",
            "description": "The version of the six package this namespace's environment has.",
            "filename": "versions.py",
        },
    ]
    error, reloaded = steps["reload"]
    assert not error and reloaded["reloaded"] is True and reloaded["failed"] == {}
    assert reloaded["namespaces"] == ["basic-tool", "calc"] and reloaded["workers_restarted"] == ["calc"]
    assert steps["test"] == (False, {"success": True, "result": 5})
    assert steps["src"] == (False, {"filename": "arith.py", "source": CALC_V1})
    # The new tools are served by the gateway to every client, with the requirement installed.
    assert gateway.call("calc", "add", a=40, b=2).json() == {"result": 42}
    assert gateway.call("calc", "six_version").json() == {"result": "1.16.0"}


def test_test_tool_returns_the_error_and_traceback_and_a_bad_package_is_not_added(pair):
    gateway, url = pair
    failing = CALC_V1.replace("return a + b", "return a // b")

    async def flow(call):
        await call("create_namespace", name="calc")
        await call("write_tool", namespace="calc", filename="arith.py", code=failing)
        added = await call("add_requirement", namespace="calc", package="tooldock-no-such-package-xyz==0.0.1")
        await call("reload_core")
        return added, await call("test_tool", namespace="calc", tool_name="add", input={"a": 1, "b": 0})

    (_, added), (error, tested) = run_manager(url, flow)
    assert added["added"] is False and added["error"] == "pip install failed"
    assert "tooldock-no-such-package-xyz" in added["details"]
    assert not (gateway.tools_dir / "calc" / "requirements.txt").exists()  # put back as it was: absent
    assert not error and tested["success"] is False
    assert tested["error"] == "ZeroDivisionError: integer division or modulo by zero"
    assert tested["traceback"].startswith("Traceback") and "arith.py" in tested["traceback"]
    # Other clients get the error without the traceback.
    body = gateway.call("calc", "add", a=1, b=0).json()
    assert "traceback" not in json.dumps(body)


def test_the_secrets_flow_check_prepare_human_sets_reload_satisfied(pair, store):
    gateway, url = pair
    config = "description: needs a token\nsecrets: [WEATHER_TOKEN]\n"

    async def before(call):
        await call("create_namespace", name="weather")
        (gateway.tools_dir / "weather" / "tooldock.yaml").write_text(config)
        shadowing = await call("write_tool", namespace="weather", filename="token.py", code=NEEDS_SECRET)
        assert shadowing[0] and "shadows the standard-library module 'token'" in shadowing[1]
        await call("write_tool", namespace="weather", filename="token_tools.py", code=NEEDS_SECRET)
        return [
            await call("check_secrets", namespace="weather"),
            await call("prepare_secret", key="WEATHER_TOKEN", namespace="weather"),
            await call("check_secrets", namespace="weather"),
            await call("list_namespaces"),
            await call("reload_core"),
            await call("test_tool", namespace="weather", tool_name="token_length"),
        ]

    missing, prepared, placeholder, listed, _, unset_call = [r for _, r in run_manager(url, before)]
    assert missing["missing"] == ["WEATHER_TOKEN"] and missing["satisfied"] == []
    assert "prepare_secret" in missing["next_steps"][0]
    assert prepared["scope"] == "weather" and prepared["status"] == "placeholder"
    assert "tooldock secrets set WEATHER_TOKEN --namespace weather" in prepared["instructions"]
    assert placeholder["placeholders"] == ["WEATHER_TOKEN"]
    assert next(n for n in listed if n["name"] == "weather")["secrets_status"] == "placeholders"
    assert unset_call["success"] is False and "tooldock secrets set WEATHER_TOKEN" in unset_call["error"]

    secrets_set(store, "WEATHER_TOKEN", WEATHER_VALUE, "weather")  # the human, in a terminal

    async def after(call):
        return [
            await call("reload_core"),
            await call("check_secrets", namespace="weather"),
            await call("list_secrets"),
            await call("test_tool", namespace="weather", tool_name="token_length"),
            await call("test_tool", namespace="weather", tool_name="leak"),
            await call("remove_secret", key="WEATHER_TOKEN", namespace="weather"),
            await call("list_secrets", namespace="weather"),
            await call("server_config"),
        ]

    results = run_manager(url, after)
    reloaded, satisfied, listed_secrets, called, leaked, removed, empty, config_shown = [r for _, r in results]
    assert leaked["success"] is False and leaked["error"].startswith("RuntimeError: cannot use ")
    assert "cannot use" in leaked["traceback"] and "leak" in leaked["traceback"]
    assert "weather" in reloaded["workers_restarted"]
    assert satisfied["satisfied"] == ["WEATHER_TOKEN"] and satisfied["missing"] == []
    assert listed_secrets == [{"key": "WEATHER_TOKEN", "scope": "weather", "status": "set"}]
    assert called == {"success": True, "result": len(WEATHER_VALUE)}
    assert removed == {"removed": True, "key": "WEATHER_TOKEN", "scope": "weather"}
    assert empty == []
    everything = json.dumps(results) + gateway.logs
    assert WEATHER_VALUE not in everything and TOKEN not in json.dumps(config_shown)
    assert os.environ.get("MANAGER_INTERNAL_TOKEN", "never-set-here") not in json.dumps(config_shown)


def test_an_llm_alone_declares_the_secrets_its_code_reads_and_the_worker_receives_them(pair, store):
    """No hand-written tooldock.yaml: write_tool and check_secrets name the secret the code reads and does not
    declare, prepare_secret declares it (and, for a name with a global value, only declares it)."""
    gateway, url = pair
    secrets_set(store, "SHARED_TOKEN", WEATHER_VALUE + "-shared")  # global, set by the person earlier
    shared = NEEDS_SECRET.replace("WEATHER_TOKEN", "SHARED_TOKEN")

    async def before(call):
        await call("create_namespace", name="weather")
        written = await call("write_tool", namespace="weather", filename="token_tools.py", code=NEEDS_SECRET)
        await call("create_namespace", name="radar")
        await call("write_tool", namespace="radar", filename="shared_tools.py", code=shared)
        return [
            written,
            await call("check_secrets", namespace="weather"),
            await call("list_namespaces"),
            await call("prepare_secret", key="WEATHER_TOKEN", namespace="weather"),
            await call("check_secrets", namespace="weather"),
            await call("prepare_secret", key="SHARED_TOKEN", namespace="radar"),
            await call("list_secrets", namespace="radar"),
        ]

    written, undeclared, listed, prepared, placeholder, declared, radar_rows = [r for _, r in run_manager(url, before)]
    assert written["undeclared_secrets"] == ["WEATHER_TOKEN"]
    assert "prepare_secret('WEATHER_TOKEN', 'weather')" in written["next_steps"][0]
    assert undeclared["undeclared"] == ["WEATHER_TOKEN"] and undeclared["missing"] == []
    assert next(n for n in listed if n["name"] == "weather")["secrets_status"] == "missing"
    assert prepared["declared_in"] == "weather/tooldock.yaml" and prepared["status"] == "placeholder"
    assert (gateway.tools_dir / "weather" / "tooldock.yaml").read_text() == "secrets:\n  - WEATHER_TOKEN\n"
    assert placeholder["undeclared"] == [] and placeholder["placeholders"] == ["WEATHER_TOKEN"]
    assert declared["scope"] == "global" and declared["status"] == "set" and radar_rows == []

    secrets_set(store, "WEATHER_TOKEN", WEATHER_VALUE, "weather")  # the human, in a terminal

    async def after(call):
        return [
            await call("reload_core"),
            await call("check_secrets", namespace="weather"),
            await call("test_tool", namespace="weather", tool_name="token_length"),
            await call("test_tool", namespace="radar", tool_name="token_length"),
        ]

    results = run_manager(url, after)
    _, satisfied, weather, radar = [r for _, r in results]
    assert satisfied["satisfied"] == ["WEATHER_TOKEN"] and satisfied["next_steps"][0].startswith("every declared")
    assert weather == {"success": True, "result": len(WEATHER_VALUE)}
    assert radar == {"success": True, "result": len(WEATHER_VALUE + "-shared")}
    assert WEATHER_VALUE not in json.dumps(results) + gateway.logs


def test_write_tool_names_the_packages_the_workers_environment_lacks(pair):
    """Against the environment the gateway built for real: a package the base environment has (pydantic) is
    not reported, one it lacks is, with the add_requirement step; reload_core then fails that file."""
    gateway, url = pair
    code = CALC_V1.replace("from fastmcp.tools import tool", "import humanize\nimport pydantic\nfrom fastmcp.tools import tool")

    async def flow(call):
        await call("create_namespace", name="humane")
        written = await call("write_tool", namespace="humane", filename="sizes.py", code=code)
        return written, await call("reload_core")

    (_, written), (_, reloaded) = run_manager(url, flow)
    assert written["missing_packages"] == [{"module": "humanize", "file": "sizes.py", "line": 2, "package": "humanize"}]
    assert "add_requirement('humane', 'humanize')" in written["next_steps"][0]
    assert "No module named 'humanize'" in json.dumps(reloaded["problems"]["humane"])


def test_deleting_a_namespace_and_a_tool_file(pair):
    gateway, url = pair

    async def flow(call):
        await call("create_namespace", name="calc")
        await call("write_tool", namespace="calc", filename="arith.py", code=CALC_V1)
        await call("reload_core")
        deleted_ns = await call("delete_namespace", name="basic-tool")
        deleted_file = await call("delete_tool", namespace="calc", filename="arith.py")
        again = await call("delete_tool", namespace="calc", filename="arith.py")
        return deleted_ns, deleted_file, again, await call("reload_core")

    (_, deleted_ns), (_, deleted_file), (again_error, again), (_, reloaded) = run_manager(url, flow)
    assert deleted_ns == {"deleted": True, "name": "basic-tool"}
    assert deleted_file == {"deleted": True, "filename": "arith.py"}
    assert again_error and "no file 'arith.py'" in again
    assert reloaded["removed"] == ["basic-tool"]
    assert sorted(p.name for p in gateway.tools_dir.iterdir()) == ["calc"]  # no leftovers
    assert gateway.call("basic-tool", "say_hello", name="x").status_code == 404


def test_manager_auth_health_and_legacy_sse(pair):
    _, url = pair
    assert httpx.get(f"{url}/health").json()["status"] == "ok"
    refused = httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith("Bearer")
    wrong = httpx.post(f"{url}/mcp", headers={"Authorization": "Bearer wrong-token-0000"}, json={})
    assert wrong.status_code == 401

    from mcp.client.session import ClientSession
    from mcp.client.sse import sse_client

    async def legacy() -> list[str]:
        async with sse_client(f"{url}/sse", headers={"Authorization": f"Bearer {TOKEN}"}) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                return [t.name for t in (await session.list_tools()).tools]

    names = asyncio.run(legacy())
    assert {"list_namespaces", "write_tool", "reload_core", "test_tool", "check_secrets"} <= set(names)
    assert len(names) == MANAGER_TOOLS


def test_the_watcher_makes_an_edit_live(make_gateway, store):
    debounce = 300
    env = {**store, "ENABLE_FS_WATCHER": "true", "FS_WATCHER_DEBOUNCE_MS": str(debounce)}
    gateway = make_gateway(EXAMPLES, env=env, args=MANAGER_ARGS)
    manager_url(gateway)
    gateway.wait_for(lambda: "tooldock manager: watching" in gateway.logs, 30, "the watcher")
    assert "tooldock: watching" not in gateway.logs  # one watcher: the manager's (serve --manager passes it on)
    folder = gateway.tools_dir / "calc"
    folder.mkdir()
    started = time.monotonic()
    (folder / "arith.py").write_text(CALC_V1)  # an edit by hand (or by an editor), not through the manager
    gateway.wait_for(lambda: gateway.call("calc", "add", a=1, b=1).status_code == 200, 120, "the new namespace")
    first = time.monotonic() - started
    started = time.monotonic()
    (folder / "arith.py").write_text(CALC_V2)
    gateway.wait_for(lambda: gateway.call("calc", "add", a=1, b=1).json() == {"result": 1002}, 60, "the edit")
    edit = time.monotonic() - started
    print(f"\nwatcher: new namespace live in {first:.2f}s, edit live in {edit:.2f}s (debounce {debounce} ms)")
    assert gateway.logs.count("tooldock manager: changed:") >= 2
    secrets_set(store, "CALC_KEY", "calc-key-5e6f7a8b9c")  # the store is watched too: no reload_core needed
    gateway.wait_for(lambda: "tooldock manager: changed: the secrets store; reloading" in gateway.logs, 30,
                     "the store's reload")
    assert "calc-key-5e6f7a8b9c" not in gateway.logs


def test_the_manager_speaks_every_protocol_version(pair):
    """The gateway's MCP stack, so the same versions: 2026-07-28 (SDK 2.x, stateless), 2025-03-26 json-only."""
    _, url = pair
    import httpx2
    from mcp.client import Client
    from mcp.client.streamable_http import streamable_http_client

    async def modern() -> tuple[str, list[str], object]:
        headers = {"Authorization": f"Bearer {TOKEN}"}
        async with httpx2.AsyncClient(headers=headers, timeout=60) as http:
            async with Client(streamable_http_client(f"{url}/mcp", http_client=http), mode="2026-07-28") as client:
                names = [t.name for t in (await client.list_tools()).tools]
                called = await client.call_tool("list_requirements", {"namespace": "basic-tool"})
                return client.protocol_version, names, called.structured_content

    version, names, called = asyncio.run(modern())
    assert version == "2026-07-28" and len(names) == MANAGER_TOOLS
    assert called == {"namespace": "basic-tool", "packages": []}

    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}},
    }
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json", "Accept": "application/json"}
    reply = httpx.post(f"{url}/mcp", json=init, headers=headers)
    assert reply.status_code == 200 and reply.json()["result"]["serverInfo"]["name"] == "tooldock-manager"
    session = {**headers, "Mcp-Session-Id": reply.headers["mcp-session-id"]}
    httpx.post(f"{url}/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=session)
    batch = [
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "health", "arguments": {}}},
    ]
    answers = httpx.post(f"{url}/mcp", json=batch, headers=session, timeout=60).json()
    assert [a["id"] for a in answers] == [2, 3] and len(answers[0]["result"]["tools"]) == MANAGER_TOOLS
    assert answers[1]["result"]["structuredContent"]["core_reachable"] is True


def test_the_manager_goes_when_its_gateway_is_terminated(make_gateway):
    import signal
    import subprocess

    gateway = make_gateway(EXAMPLES, args=MANAGER_ARGS)
    url = manager_url(gateway)
    assert httpx.get(f"{url}/health").status_code == 200
    gateway.proc.send_signal(signal.SIGTERM)
    gateway.proc.wait(30)
    children = subprocess.run(
        ["pgrep", "-f", f"tooldock.cli manager {gateway.tools_dir}"], capture_output=True, text=True
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/health", timeout=1)
        except httpx.HTTPError:
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"the manager still answers after its gateway stopped: {children.stdout}")


def test_the_manager_takes_only_an_unrestricted_admin_key(make_gateway, store, tmp_path):
    """The manager can write any namespace: an admin key without globs gets in, a key narrowed by scope or
    globs is refused with 403 naming the key (and logged), a revoked admin key is 401 at once."""
    from tooldock.keys import KeyStore

    keys = KeyStore(tmp_path / "keys")
    gateway = make_gateway(EXAMPLES, env={**store, "TOOLDOCK_KEYS_DIR": str(tmp_path / "keys")}, args=MANAGER_ARGS)
    url = manager_url(gateway)
    admin_record, admin = keys.create("ops", "admin")
    narrowed_record, narrowed = keys.create("ops-project", "admin", ("project",))
    tool_record, tool_narrowed = keys.create("ops-get", "admin", (), ("get_*",))
    _, writer = keys.create("droid", "write")
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }

    def post(key: str) -> httpx.Response:
        headers = {"Authorization": f"Bearer {key}", "Accept": "application/json, text/event-stream"}
        return httpx.post(f"{url}/mcp", headers=headers, json=init, timeout=30)

    accepted = post(admin)
    assert accepted.status_code == 200, accepted.text
    assert "tooldock-manager" in accepted.text
    for record, key in ((narrowed_record, narrowed), (tool_record, tool_narrowed)):
        refused = post(key)
        assert refused.status_code == 403, refused.text
        message = refused.json()["error"]["message"]
        assert f"API key {record.id}" in message and "may not use the manager" in message
        assert key not in refused.text
    refused = post(writer)
    assert refused.status_code == 403 and "scope write" in refused.json()["error"]["message"]
    keys.revoke(admin_record.id)
    assert post(admin).status_code == 401
    gateway.wait_for(lambda: f"key {narrowed_record.id} refused" in gateway.logs, 10, "the refusal's log line")
    assert "not an unrestricted admin key" in gateway.logs
    assert admin not in gateway.logs and narrowed not in gateway.logs


BROKEN_IMPORT = '''import not_a_module_anywhere
from fastmcp.tools import tool


@tool
def broken(x: int) -> int:
    """Never loads."""
    return x
'''
LATER = '''from fastmcp.tools import tool


@tool
def later(x: int) -> int:
    """Written after the reload."""
    return x
'''


def test_list_tools_says_what_the_gateway_serves_and_why_a_file_did_not_load(pair):
    _, url = pair

    async def flow(call):
        await call("write_tool", namespace="basic-tool", filename="broken.py", code=BROKEN_IMPORT)
        await call("reload_core")
        await call("write_tool", namespace="basic-tool", filename="later.py", code=LATER)
        return await call("list_tools", namespace="basic-tool")

    error, listed = run_manager(url, flow)
    by_name = {t["name"]: t for t in listed}
    assert not error and set(by_name) == {"say_hello", "broken", "later"}, listed
    assert by_name["say_hello"]["served"] is True and "problem" not in by_name["say_hello"]
    assert by_name["later"]["served"] is False  # written, not reloaded yet
    assert by_name["broken"]["served"] is False
    assert "not_a_module_anywhere" in by_name["broken"]["problem"] and "(line 1)" in by_name["broken"]["problem"]


HALF_GOOD = '''from fastmcp.tools import tool


@tool
def fine(x: int) -> int:
    """Served."""
    return x


@tool
def undocumented(x: int) -> int:
    return x
'''


def test_list_tools_gives_a_problem_to_the_tool_it_concerns(make_gateway, store, tmp_path):
    """A file served in part (one tool has no docstring, written by hand: write_tool refuses it): the
    problem is that tool's alone, with its line; its sibling is served and has none."""
    folder = tmp_path / "src" / "half"
    folder.mkdir(parents=True)
    (folder / "half.py").write_text(HALF_GOOD)
    url = manager_url(make_gateway(tmp_path / "src", env=store, args=MANAGER_ARGS))

    async def flow(call):
        return await call("list_tools", namespace="half")

    error, listed = run_manager(url, flow)
    by_name = {t["name"]: t for t in listed}
    assert not error and set(by_name) == {"fine", "undocumented"}, listed
    assert by_name["fine"]["served"] is True and "problem" not in by_name["fine"], by_name["fine"]
    assert by_name["undocumented"]["served"] is False
    assert "'undocumented' has no docstring" in by_name["undocumented"]["problem"]
    assert "(line 11)" in by_name["undocumented"]["problem"]  # its def


def test_the_manager_answers_carry_a_request_id(pair):
    _, url = pair
    echoed = httpx.post(f"{url}/mcp", json={}, headers={"X-Request-Id": "mgr-req-1"})
    assert echoed.status_code == 401 and echoed.headers["x-request-id"] == "mgr-req-1"
    made = httpx.get(f"{url}/health", headers={"X-Request-Id": "not safe"}).headers["x-request-id"]
    assert len(made) == 24 and made != "not safe"


def test_the_managers_calls_to_the_gateway_carry_its_request_id(make_gateway, store, tmp_path):
    """test_tool's call and reload_core's reload reach the gateway under the id of the manager request that
    made them: the gateway's audit line and log name the id the client sent the manager."""
    import httpx2
    from mcp.client.session import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    log_dir = tmp_path / "audit"
    gateway = make_gateway(EXAMPLES, env={**store, "TOOLDOCK_LOG_DIR": str(log_dir)}, args=MANAGER_ARGS)
    url = manager_url(gateway)

    async def main() -> None:
        headers = {"Authorization": f"Bearer {TOKEN}", "X-Request-Id": "mgr-call-42"}
        async with httpx2.AsyncClient(headers=headers, timeout=600) as http:
            async with streamable_http_client(f"{url}/mcp", http_client=http) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    tested = await session.call_tool(
                        "test_tool", {"namespace": "basic-tool", "tool_name": "say_hello", "input": {"name": "Ada"}}
                    )
                    assert not tested.is_error, tested
                    reloaded = await session.call_tool("reload_core", {})
                    assert not reloaded.is_error, reloaded

    asyncio.run(main())
    deadline = time.monotonic() + 10
    found: list[dict] = []
    while time.monotonic() < deadline and not found:
        for path in log_dir.glob("*.jsonl"):
            for line in path.read_text().splitlines():
                entry = json.loads(line) if line.strip() else {}
                if entry.get("tool") == "say_hello" and entry.get("front_end") == "rest":
                    found.append(entry)
        time.sleep(0.1)
    assert found and found[0]["request_id"] == "mgr-call-42", found
    assert "reload over HTTP from 127.0.0.1 (request mgr-call-42)" in gateway.logs, gateway.logs[-3000:]


def test_serve_manager_takes_its_tokens_from_files(make_gateway, store, tmp_path):
    """TOOLDOCK_BEARER_TOKEN_FILE and MANAGER_INTERNAL_TOKEN_FILE (compose and Docker secrets): the gateway
    and the manager both read them, nothing is generated, and neither value is printed."""
    bearer, internal = tmp_path / "bearer", tmp_path / "internal"
    bearer.write_text(TOKEN + "\n")
    internal.write_text("an-internal-token-from-a-file")
    env = {
        **store,
        "TOOLDOCK_BEARER_TOKEN": "",
        "TOOLDOCK_BEARER_TOKEN_FILE": str(bearer),
        "MANAGER_INTERNAL_TOKEN_FILE": str(internal),
    }
    gateway = make_gateway(EXAMPLES, env=env, args=MANAGER_ARGS)
    url = manager_url(gateway)

    async def reload(call):
        return await call("reload_core")

    error, reloaded = run_manager(url, reload)
    assert not error and "basic-tool" in reloaded["namespaces"], reloaded  # the reload token matched
    assert gateway.call("basic-tool", "say_hello", name="Ada").json() == {"result": "Hello, Ada!"}
    assert TOKEN not in gateway.logs and "an-internal-token-from-a-file" not in gateway.logs
    assert "bearer token is" not in gateway.logs  # none was generated


def test_json_logs_cover_the_managers_lines_too(make_gateway, store):
    gateway = make_gateway(EXAMPLES, env={**store, "TOOLDOCK_LOG_FORMAT": "json"}, args=MANAGER_ARGS)
    url = manager_url(gateway)
    gateway.wait_for(lambda: "tooldock manager: ready on" in gateway.logs, 30, "the manager's ready line")

    async def flow(call):
        return await call("health")

    error, _ = run_manager(url, flow)  # an MCP session opened and closed: the SDK logs both at INFO
    assert not error
    lines = [json.loads(line) for line in gateway.logs.splitlines() if line.strip()]  # every line is JSON
    assert any(e["message"].startswith("tooldock manager: ready on") for e in lines)
    # The SDK's MCPServer sets up a RichHandler on the root logger: its lines came out as rich's wrapped
    # columns, one JSON "message" per column row. Now the SDK's INFO lines are below the libraries' level.
    assert not any(".py:" in e["message"] and "INFO" in e["message"] for e in lines), gateway.logs[-3000:]
    assert "Created new transport" not in gateway.logs and "Terminating session" not in gateway.logs


IMPORTS_MISSING = '''import no_such_module_here
from fastmcp.tools import tool


@tool
def lookup(word: str) -> str:
    """Look a word up."""
    return no_such_module_here.find(word)
'''


def test_a_file_that_fails_to_import_is_named_by_reload_core_and_list_namespaces(pair):
    gateway, url = pair

    async def flow(call):
        await call("create_namespace", name="dict")
        await call("write_tool", namespace="dict", filename="lookup.py", code=IMPORTS_MISSING)
        await call("write_tool", namespace="dict", filename="arith.py", code=CALC_V1)
        return [await call("reload_core"), await call("list_namespaces")]

    (_, reloaded), (_, listed) = run_manager(url, flow)
    why = ("lookup.py:1: import failed: No module named 'no_such_module_here'; add the package to the namespace's "
           "requirements.txt")
    assert reloaded["failed"] == {} and reloaded["problems"] == {"dict": [why]}
    row = next(r for r in listed if r["name"] == "dict")
    assert row["loaded"] is True and row["state"] == "ready" and row["problems"] == [why]
