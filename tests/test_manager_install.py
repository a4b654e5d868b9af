"""The manager's installer tools driven by the official MCP client (issue 12): `search_registry` against a
registry on loopback, `install_from_registry(mode="upstream")` putting a registry server behind a namespace
(secrets prepared, never passed through chat) until its tools answer through the gateway,
`install_pip_packages` into the manager's own environment from a package index on loopback, and
`generate_tool` as write_tool's alias."""

from __future__ import annotations

import base64
import copy
import contextlib
import functools
import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import EXAMPLES, MANAGER_ARGS, manager_url, run_manager, tooldock_cli
from fixtures.registry_server import FakeRegistry
from test_upstream_http import UPSTREAM_TOKEN, secrets_set, served  # noqa: F401  (served: a fixture)
from test_upstream_registry import ENV_SECRET, demo_entry, remote_entry

pytestmark = pytest.mark.slow


@pytest.fixture
def store(tmp_path: Path) -> dict[str, str]:
    env = {
        "TOOLDOCK_SECRETS_DIR": str(tmp_path / "store"),
        "TOOLDOCK_AGE_KEY_FILE": str(tmp_path / "age.key"),
    }
    tooldock_cli("secrets", "init", env=env)
    return env


def start(make_gateway, env: dict[str, str]):
    gateway = make_gateway(EXAMPLES, env=env, args=MANAGER_ARGS)
    return gateway, manager_url(gateway)


def test_search_registry_answers_the_seed_shape_and_says_when_the_registry_is_down(make_gateway, store):
    with FakeRegistry() as fake:
        gateway, url = start(make_gateway, {**store, "MCP_REGISTRY_URL": fake.url})

        async def flow(call):
            return await call("search_registry", query="time"), await call("search_registry", query="")

        (error, hits), (bad, refused) = run_manager(url, flow)
    assert not error and hits and hits[0]["name"] == "io.github.modelcontextprotocol/server-time"
    assert {"name", "description", "package", "package_type", "source_url", "packages", "remotes"} <= set(hits[0])
    assert hits[0]["package"] == "mcp-server-time" and hits[0]["package_type"] == "pypi"
    assert bad and "search query must be 1 to 200 characters" in refused

    async def down(call):
        return await call("search_registry", query="time")

    error, message = run_manager(url, down)  # the fake registry is gone now
    assert error and "cannot reach the MCP Registry" in message and "MCP_REGISTRY_URL" in message


def test_install_from_registry_upstream_serves_a_remote_server_once_the_user_set_its_secret(
    make_gateway, store, served, tmp_path  # noqa: F811
):
    entry = remote_entry(f"{served.url}/ns/multi-tool/mcp")
    with FakeRegistry([entry]) as fake:
        gateway, url = start(make_gateway, {**store, "MCP_REGISTRY_URL": fake.url})

        async def install(call):
            return await call(
                "install_from_registry", package="io.github.example/calc-remote", namespace="calc", mode="upstream"
            )

        error, result = run_manager(url, install)
        assert not error, result
        assert result["prefix"] == "calc-remote" and result["runs"] == f"{served.url}/ns/multi-tool/mcp"
        assert [s["key"] for s in result["secrets"]] == ["TOKEN"] and result["secrets"][0]["status"] == "placeholder"
        assert "tooldock secrets set TOKEN --namespace calc" in result["next_steps"]
        toml = (gateway.tools_dir / "calc" / "tools.toml").read_text()
        assert 'registry = "io.github.example/calc-remote"' in toml and "${secret:TOKEN}" in toml
        assert UPSTREAM_TOKEN not in toml

        # the user sets the secret in a terminal, then the LLM reloads and calls
        secrets_set(store, "TOKEN", UPSTREAM_TOKEN, "calc")

        async def use(call):
            reloaded = await call("reload_core")
            again = await call(
                "install_from_registry", package="io.github.example/calc-remote", namespace="calc", mode="upstream"
            )
            return reloaded, again

        (error, reloaded), (dup, again) = run_manager(url, use)
        assert not error and "calc" in reloaded["namespaces"], reloaded
        gateway.wait_for(lambda: gateway.namespace("calc")["state"] == "ready", what="the upstream to connect")
        assert gateway.call("calc", "calc-remote_add", a=1, b=2).json()["result"] == 3
        assert dup and "already a server of namespace 'calc'" in again
    assert UPSTREAM_TOKEN not in gateway.logs


def test_install_from_registry_upstream_asks_for_missing_inputs_and_refuses_tool_namespaces(
    make_gateway, store, tmp_path
):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    from test_upstream import DEMO

    (bin_dir / "uvx").write_text(f'#!/bin/sh\nshift\nexec {DEMO} "$@"\n')
    (bin_dir / "uvx").chmod(0o755)
    with FakeRegistry([demo_entry()]) as fake:
        env = {**store, "MCP_REGISTRY_URL": fake.url, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
        gateway, url = start(make_gateway, env)

        async def flow(call):
            args = {"package": "demo-server", "namespace": "demo", "mode": "upstream"}
            return (
                await call("install_from_registry", **args),
                await call("install_from_registry", **{**args, "namespace": "basic-tool"}, env={"DEMO_MODE": "m"}),
                await call("install_from_registry", **args, env={"DEMO_MODE": "${secret:X}"}),
                await call("install_from_registry", **args, env={"DEMO_MODE": "m"}, prefix="d"),
            )

        (e1, missing), (e2, tools_ns), (e3, secret_in_env), (e4, ok) = run_manager(url, flow)
        assert e1 and "needs values nobody gave: DEMO_MODE (environmentVariables: which mode)" in missing
        assert 'env={"DEMO_MODE": "..."}' in missing
        assert e2 and "holds tool files" in tools_ns
        assert e3 and "secrets are set by the user in a terminal" in secret_in_env
        assert not e4 and ok["runs"] == "uvx demo-server==1.2.3 --flavor registry" and ok["runtime"] == "uvx"
        assert [s["key"] for s in ok["secrets"]] == ["SECRET_VALUE"]
        assert not (gateway.tools_dir / "basic-tool" / "tools.toml").exists()
        secrets_set(store, "SECRET_VALUE", ENV_SECRET, "demo")

        async def reload(call):
            return await call("reload_core")

        error, reloaded = run_manager(url, reload)
        assert not error and "demo" in reloaded["namespaces"], reloaded
        gateway.wait_for(lambda: gateway.namespace("demo")["state"] == "ready", what="the upstream to start")
    # (a str result of an SDK server arrives as its structured content, {"result": ...})
    assert gateway.call("demo", "d_getenv", name="DEMO_MODE").json()["result"] == {"result": "m"}
    # the server has the value: what it answers is exactly it, masked by the gateway
    assert gateway.call("demo", "d_getenv", name="SECRET_VALUE").json()["result"] == {"result": "***"}


def _wheel(folder: Path) -> Path:
    """A tiny pure-Python wheel, `tdprobe 1.0` (module `tdprobe` with VALUE = 42), made by hand."""
    name, files = "tdprobe-1.0", {"tdprobe.py": b"VALUE = 42\n"}
    info = f"{name}.dist-info"
    files[f"{info}/METADATA"] = b"Metadata-Version: 2.1\nName: tdprobe\nVersion: 1.0\n"
    files[f"{info}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    record = "".join(
        f"{path},sha256={base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b'=').decode()},{len(data)}\n"
        for path, data in files.items()
    )
    files[f"{info}/RECORD"] = (record + f"{info}/RECORD,,\n").encode()
    wheel = folder / "files" / f"{name}-py3-none-any.whl"
    wheel.parent.mkdir(parents=True)
    with zipfile.ZipFile(wheel, "w") as zf:
        for path, data in files.items():
            zf.writestr(path, data)
    page = folder / "simple" / "tdprobe" / "index.html"
    page.parent.mkdir(parents=True)
    page.write_text(f'<html><body><a href="/files/{wheel.name}">{wheel.name}</a></body></html>\n')
    return wheel


@contextlib.contextmanager
def package_index(root: Path):
    handler = functools.partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a: None  # type: ignore[method-assign]
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/simple"
    finally:
        server.shutdown()
        server.server_close()


def test_install_pip_packages_goes_into_the_managers_own_environment(make_gateway, store, tmp_path):
    _wheel(tmp_path / "index")
    with package_index(tmp_path / "index") as index:
        state = tmp_path / "state"
        env = {**store, "UV_DEFAULT_INDEX": index, "UV_INDEX_URL": index, "TOOLDOCK_STATE_DIR": str(state)}
        gateway, url = start(make_gateway, env)

        async def flow(call):
            return (
                await call("install_pip_packages", packages=["tdprobe==1.0"]),
                await call("install_pip_packages", packages=["--index-url=http://evil/simple"]),
                await call("install_pip_packages", packages=[]),
            )

        (error, installed), (e2, option), (e3, empty) = run_manager(url, flow)
    assert not error and installed["installed"] is True and installed["packages"] == ["tdprobe==1.0"]
    own = Path(installed["environment"])
    assert own == state / "manager" / "env"
    probe = subprocess.run([own / "bin" / "python", "-c", "import tdprobe; print(tdprobe.VALUE)"], capture_output=True)
    assert probe.stdout.strip() == b"42"
    gateway_python = subprocess.run([sys.executable, "-c", "import tdprobe"], capture_output=True)
    assert gateway_python.returncode != 0  # the gateway's interpreter never got it
    assert e2 and "pip options are not accepted" in option
    assert e3 and "list of 1 to 20 specifiers" in empty


def test_generate_tool_is_write_tools_alias_and_manager_calls_are_audited(make_gateway, store, tmp_path):
    gateway, url = start(make_gateway, {**store, "TOOLDOCK_LOG_DIR": str(tmp_path / "audit")})
    code = 'from fastmcp.tools import tool\n\n\n@tool\ndef ping() -> str:\n    """Pong."""\n    return "pong"\n'

    async def flow(call):
        await call("create_namespace", name="translated")
        return await call("generate_tool", namespace="translated", filename="ping.py", code=code)

    assert run_manager(url, flow) == (False, {"written": True, "filename": "ping.py", "tools_found": ["ping"]})
    assert (gateway.tools_dir / "translated" / "ping.py").read_text() == code
    deadline = time.monotonic() + 10
    lines: list[dict] = []
    while time.monotonic() < deadline and not any(l.get("tool") == "generate_tool" for l in lines):
        time.sleep(0.1)
        lines = [json.loads(l) for f in (tmp_path / "audit").glob("*.jsonl") for l in f.read_text().splitlines()]
    line = next(l for l in lines if l.get("tool") == "generate_tool")
    assert line["front_end"] == "manager" and line["status"] == "ok" and "arguments" not in line
    assert any(l.get("tool") == "create_namespace" for l in lines)



TS_SERVER = """import { McpServer } from "@modelcontextprotocol/sdk/server/mcp.js";
import { z } from "zod";

const server = new McpServer({ name: "weather", version: "1.0.0" });

server.tool(
  "celsius_to_fahrenheit",
  "Convert a temperature from Celsius to Fahrenheit",
  { celsius: z.number().describe("Temperature in Celsius") },
  async ({ celsius }) => ({ content: [{ type: "text", text: String(celsius * 9 / 5 + 32) }] }),
);

server.tool(
  "forecast",
  "Get the forecast for a city",
  { city: z.string().describe("City name"), days: z.number().optional() },
  async ({ city, days }) => {
    const res = await fetch(`https://api.weatherapi.io/v1/forecast?q=${city}`, {
      headers: { Authorization: `Bearer ${process.env.WEATHER_API_KEY}` },
    });
    return { content: [{ type: "text", text: await res.text() }] };
  },
);
"""

TRANSLATED = '''"""Weather tools, translated from the TypeScript server."""
from fastmcp.tools import tool
import six


@tool
def celsius_to_fahrenheit(celsius: float) -> float:
    """Convert a temperature from Celsius to Fahrenheit.

    Args:
        celsius: Temperature in Celsius.
    """
    return celsius * 9 / 5 + 32
'''


def git_repo(folder: Path, files: dict[str, str]) -> str:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
           "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com"}
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "server"]):
        subprocess.run(["git", *args], cwd=folder, check=True, env=env)
    return f"file://{folder}"


def test_the_seeds_translation_workflow_end_to_end(make_gateway, store, tmp_path):
    """Seed 000's ten steps, with pre-written Python standing in for the LLM's translation."""
    url_of_repo = git_repo(tmp_path / "weather-server", {
        "package.json": '{"name": "weather", "dependencies": {"@modelcontextprotocol/sdk": "^1.0.0", "zod": "^3"}}',
        "src/index.ts": TS_SERVER,
    })
    gateway, url = start(make_gateway, store)

    async def flow(call):
        steps = {"analyze": await call("install_from_repo", repo_url=url_of_repo, namespace="weather")}
        steps["read"] = await call("read_repo_file", repo_url=url_of_repo, path="src/index.ts")
        steps["create"] = await call("create_namespace", name="weather")
        steps["req"] = await call("add_requirement", namespace="weather", package="six==1.16.0")
        steps["write"] = await call("generate_tool", namespace="weather", filename="convert.py", code=TRANSLATED)
        steps["install"] = await call("install_requirements", namespace="weather")
        steps["reload"] = await call("reload_core")
        steps["test"] = await call("test_tool", namespace="weather", tool_name="celsius_to_fahrenheit",
                                   input={"celsius": 100})
        steps["secrets"] = await call("check_secrets", namespace="weather")
        return steps

    steps = run_manager(url, flow)
    error, analysis = steps["analyze"]
    assert not error, analysis
    assert analysis["language"] == "typescript" and analysis["namespace"] == "weather"
    found = {t["name"]: t for t in analysis["tools_found"]}
    assert set(found) == {"celsius_to_fahrenheit", "forecast"}
    assert [p["name"] for p in found["forecast"]["parameters"]] == ["city", "days"]
    assert "api.weatherapi.io" in analysis["apis_called"]
    assert "WEATHER_API_KEY" in analysis["secrets_needed"]
    assert steps["read"] == (False, {"path": "src/index.ts", "content": TS_SERVER})
    for step in ("create", "req", "write", "install", "reload", "secrets"):
        assert not steps[step][0], (step, steps[step])
    assert steps["test"] == (False, {"success": True, "result": 212.0})
    assert gateway.call("weather", "celsius_to_fahrenheit", celsius=0).json() == {"result": 32.0}


def test_install_from_registry_translate_analyzes_the_published_package(make_gateway, store, tmp_path):
    """The seed's mode: the npm package's tarball (from a registry on loopback, NPM_REGISTRY_URL) is unpacked,
    never run, and analyzed; read_repo_file reads it by the repo_url the analysis answered."""
    from test_analysis_fetch import SERVER_TS, Registry, tgz

    npm = Registry()
    npm.npm("@acme/hello-server", "1.0.0", tgz([("package/package.json", None, '{"name": "@acme/hello-server"}'),
                                                 ("package/src/index.ts", None, SERVER_TS)]))
    entry = copy.deepcopy(demo_entry())
    entry["server"].update(name="io.github.acme/hello", version="1.0.0")
    entry["server"]["packages"] = [{"registryType": "npm", "identifier": "@acme/hello-server", "version": "1.0.0",
                                    "transport": {"type": "stdio"}}]
    with FakeRegistry([entry]) as fake:
        gateway, url = start(make_gateway, {**store, "MCP_REGISTRY_URL": fake.url, "NPM_REGISTRY_URL": npm.url})

        async def flow(call):
            analysis = await call("install_from_registry", package="@acme/hello-server", namespace="hello")
            read = await call("read_repo_file", repo_url=analysis[1].get("repo_url", ""), path="src/index.ts")
            return analysis, read

        (error, analysis), (read_error, read) = run_manager(url, flow)
    assert not error, analysis
    assert analysis["namespace"] == "hello" and analysis["source"]["kind"] == "npm"
    assert analysis["repo_url"] == "npm:@acme/hello-server@1.0.0" and analysis["language"] == "typescript"
    assert [t["name"] for t in analysis["tools_found"]] == ["hello"]
    assert not read_error and read == {"path": "src/index.ts", "content": SERVER_TS}
    assert not (gateway.tools_dir / "hello").exists()  # translation starts; nothing is written yet


def test_a_second_server_cannot_take_a_prefix_the_namespace_already_uses(tmp_path):
    """Two servers with one prefix would list the same names, and the first would answer for both."""
    from tooldock.errors import AlreadyExists
    from tooldock.manager import installer
    from tooldock.manager.workspace import Workspace
    from tooldock.secrets.store import SecretStore

    ws, folder = Workspace(tmp_path), tmp_path / "mixed"
    store = SecretStore(tmp_path / "secrets", tmp_path / "age.key")

    def table(prefix: str, command: str) -> str:
        return installer.server_table({"namespace": prefix, "command": command}, {})

    installer.add_server(ws, store, folder, "time", table("time", "uvx mcp-server-time"), [])
    before = (folder / "tools.toml").read_text()
    with pytest.raises(AlreadyExists, match="prefix 'time' is taken by time .* give this server another one"):
        installer.add_server(ws, store, folder, "time", table("time", "uvx other-clock"), [])
    assert (folder / "tools.toml").read_text() == before  # nothing written
    installer.add_server(ws, store, folder, "clock", table("clock", "uvx other-clock"), [])
    assert (folder / "tools.toml").read_text().count("[[servers]]") == 2


def test_list_tools_and_test_tool_reach_upstream_namespaces_and_large_results_come_back_cut(make_gateway, tmp_path):
    """An upstream namespace has no tool files: list_tools lists its catalog from the gateway (active or
    not), and test_tool activates an inactive tool on a session of its own (REST callers still see only
    active_toolsets). A result too large for an MCP answer comes back as its start."""
    from test_upstream import ONE_DEMO

    gateway, url = start(make_gateway, {})
    (gateway.tools_dir / "demo").mkdir()
    (gateway.tools_dir / "demo" / "tools.toml").write_text(ONE_DEMO)
    (gateway.tools_dir / "big").mkdir()
    (gateway.tools_dir / "big" / "big.py").write_text(
        'from fastmcp.tools import tool\n\n\n@tool\ndef huge(size: int) -> str:\n    """Return size x-es."""\n'
        '    return "x" * size\n'
    )

    async def reload(call):
        return await call("list_tools", namespace="demo"), await call("reload_core")

    (early, not_yet), (error, _) = run_manager(url, reload)
    assert early and "does not serve namespace 'demo' yet: call reload_core()" in not_yet and not error
    gateway.wait_for(lambda: gateway.namespace("demo")["state"] == "ready", what="the upstream")

    async def flow(call):
        return (
            await call("list_tools", namespace="demo"),
            await call("test_tool", namespace="demo", tool_name="demo_wordy", input={"text": "quiet"}),
            await call("test_tool", namespace="demo", tool_name="demo_fail", input={"reason": "testing"}),
            await call("test_tool", namespace="demo", tool_name="demo_nope", input={}),
            await call("test_tool", namespace="big", tool_name="huge", input={"size": 400_000}),
            await call("test_tool", namespace="big", tool_name="huge", input={"size": 10}),
        )

    (e1, listed), (e2, wordy), (e3, failed), (e4, unknown), (e5, big), (e6, small) = run_manager(url, flow)
    assert not e1, listed
    by_name = {t["name"]: t for t in listed}
    assert by_name["demo_add"]["active"] is True and by_name["demo_wordy"]["active"] is False
    assert by_name["demo_add"]["description"] == "Add two numbers (first)." and by_name["demo_add"]["filename"] == "tools.toml"
    assert not e2 and wordy == {"success": True, "result": {"result": "quiet"}}, wordy
    assert not e3 and failed == {"success": False, "error": "Error executing tool fail", "code": "tool_error"}
    assert not e4 and unknown["success"] is False and "unknown name(s): 'demo_nope'" in unknown["error"]
    assert gateway.call("demo", "demo_wordy", text="x").status_code == 409  # REST: still inactive
    assert not e5 and big["truncated"] is True and big["result_bytes"] == 400_002
    assert big["result_preview"] == '"' + "x" * 3999 and "result" not in big
    assert not e6 and small == {"success": True, "result": "x" * 10}
