"""`install_from_repo(mode="upstream")` (issue 12): a repository's MCP server served as it is behind a
namespace, driven by the official MCP client. The repository is made by the test: a zero-dependency
Node server with a `bin`, run by the real `npx` from `git+file://...#<commit>` (the npm registry pointed
at a closed loopback port: nothing is fetched from outside). Python repositories are checked by the
command written for them; repositories that cannot run this way get an error saying what to do."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from conftest import run_manager
from test_manager_install import git_repo, start, store  # noqa: F401  (store: a fixture)
from test_upstream_http import secrets_set

pytestmark = pytest.mark.slow

SERVER_JS = """#!/usr/bin/env node
// A zero-dependency MCP server over stdio (newline-delimited JSON-RPC) with one tool.
const readline = require("readline");
const send = (msg) => process.stdout.write(JSON.stringify(msg) + "\\n");
const TOOLS = [{name: "shout", description: "Upper-case a text.",
  inputSchema: {type: "object", properties: {text: {type: "string"}}, required: ["text"]}}];
readline.createInterface({input: process.stdin}).on("line", (line) => {
  const msg = JSON.parse(line);
  if (msg.id === undefined) return;
  const reply = (result) => send({jsonrpc: "2.0", id: msg.id, result});
  if (msg.method === "initialize") reply({protocolVersion: "2025-06-18", capabilities: {tools: {}},
    serverInfo: {name: "shout-mcp", version: "1.0.0"}});
  else if (msg.method === "tools/list") reply({tools: TOOLS});
  else if (msg.method === "tools/call") {
    const mark = process.env.SHOUT_TOKEN ? "!" : "?";  // says whether the secret arrived, never its value
    reply({content: [{type: "text", text: String(msg.params.arguments.text).toUpperCase() + mark}]});
  } else if (msg.method === "ping") reply({});
  else send({jsonrpc: "2.0", id: msg.id, error: {code: -32601, message: "Method not found"}});
});
"""
PACKAGE_JSON = '{"name": "shout-mcp-server", "version": "1.0.0", "bin": {"shout-mcp-server": "server.js"}}'


def _npm_offline(tmp_path: Path) -> dict[str, str]:
    if shutil.which("npx") is None:
        message = "npx is not installed (Debian: apt-get install npm)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return {
        "npm_config_registry": "http://127.0.0.1:9/",  # a closed port: nothing is fetched from outside
        "npm_config_cache": str(tmp_path / "npm-cache"),
        "npm_config_update_notifier": "false",
    }


def test_a_node_repository_runs_behind_a_namespace_pinned_to_its_commit(make_gateway, store, tmp_path):  # noqa: F811
    repo = tmp_path / "shout-mcp-server"
    url = git_repo(repo, {"package.json": PACKAGE_JSON, "server.js": SERVER_JS})
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout.strip()
    gateway, manager = start(make_gateway, {**store, **_npm_offline(tmp_path)})

    async def install(call):
        return (
            await call("install_from_repo", repo_url=url, namespace="shout", mode="upstream", secrets=["SHOUT_TOKEN"]),
            await call("install_from_repo", repo_url=url, namespace="other", mode="upstream", secrets=["NOT_READ"]),
            await call("install_from_repo", repo_url=url, namespace="shout", mode="sideways"),
        )

    (error, result), (e2, unknown), (e3, mode) = run_manager(manager, install)
    assert not error, result
    assert result["commit"] == commit and result["prefix"] == "shout" and result["runtime"] == "npx"
    assert shlex.split(result["runs"]) == ["npx", "-y", f"git+{url}#{commit}"]
    assert result["secrets_needed"] == ["SHOUT_TOKEN"] and result["secrets"][0]["status"] == "placeholder"
    assert "tooldock secrets set SHOUT_TOKEN --namespace shout" in result["next_steps"]
    toml = (gateway.tools_dir / "shout" / "tools.toml").read_text()
    assert 'active_toolsets = ["shout_*"]' in toml and '"SHOUT_TOKEN" = "${secret:SHOUT_TOKEN}"' in toml
    assert e2 and "found no NOT_READ in the code" in unknown
    assert e3 and "Input should be 'translate' or 'upstream'" in mode

    secrets_set(store, "SHOUT_TOKEN", "s3cr3t-value-never-shown", "shout")

    async def use(call):
        return await call("reload_core"), await call(
            "install_from_repo", repo_url=url, namespace="shout", mode="upstream"
        )

    (error, reloaded), (dup, again) = run_manager(manager, use)
    assert not error and "shout" in reloaded["namespaces"], reloaded
    gateway.wait_for(lambda: gateway.namespace("shout")["state"] == "ready", 120, "npx to start the server")
    assert gateway.call("shout", "shout_shout", text="hey").json()["result"] == "HEY!"
    assert dup and "already a server of namespace 'shout'" in again
    assert "s3cr3t-value-never-shown" not in gateway.logs


def test_python_repositories_run_with_uvx_and_others_are_refused_with_what_to_do(make_gateway, store, tmp_path):  # noqa: F811
    pyproject = (
        '[project]\nname = "mcp-server-clock"\nversion = "1.0"\n[project.scripts]\nmcp-server-clock = "clock:main"\n'
    )
    python = git_repo(tmp_path / "clock", {"pyproject.toml": pyproject, "clock.py": "def main():\n    pass\n"})
    two = '{"name": "kit", "bin": {"kit-a": "a.js", "kit-b": "b.js"}}'
    several = git_repo(tmp_path / "kit", {"package.json": two, "a.js": "", "b.js": ""})
    go = git_repo(tmp_path / "gosrv", {"go.mod": "module example.com/gosrv\n", "main.go": "package main\n"})
    gateway, manager = start(make_gateway, store)
    (gateway.tools_dir / "tooly").mkdir()
    (gateway.tools_dir / "tooly" / "t.py").write_text("from fastmcp.tools import tool\n")

    async def flow(call):
        return [
            await call("install_from_repo", repo_url=python, namespace="clock", mode="upstream", prefix="clk"),
            await call("install_from_repo", repo_url=several, namespace="kit", mode="upstream"),
            await call("install_from_repo", repo_url=go, namespace="gosrv", mode="upstream"),
            await call("install_from_repo", repo_url=python, namespace="tooly", mode="upstream"),
            await call("install_from_repo", repo_url=python, namespace="clock2", mode="upstream", prefix="no spaces"),
        ]

    (ok, clock), (e1, kit), (e2, gosrv), (e3, tooly), (e4, prefix) = run_manager(manager, flow)
    commit = clock["commit"]
    assert not ok and shlex.split(clock["runs"]) == ["uvx", "--from", f"git+{python}@{commit}", "mcp-server-clock"]
    assert clock["prefix"] == "clk" and clock["runtime"] == "uvx"
    written = tomllib.loads((gateway.tools_dir / "clock" / "tools.toml").read_text())
    assert written["servers"] == [{"namespace": "clk", "command": clock["runs"]}]
    assert e1 and "several programs (kit-a, kit-b)" in kit
    assert e2 and "cannot tell how to run this repository" in gosrv and "mode='translate'" in gosrv
    assert e3 and "holds tool files" in tooly
    assert e4 and "prefix 'no spaces' must be letters" in prefix
    assert not (gateway.tools_dir / "kit").exists() and not (gateway.tools_dir / "gosrv").exists()
