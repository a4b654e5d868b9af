"""`install_from_repo(mode="upstream")` (issue 12): a repository's MCP server served as it is behind a
namespace, driven by the official MCP client. The repository is made by the test: a zero-dependency
Node server with a `bin`, run by the real `npx` from `git+file://...#<commit>` (the npm registry pointed
at a closed loopback port: nothing is fetched from outside), and a Python server in a monorepo folder, run
by the real `uvx` from `#subdirectory=` (its build backend in its tree, the index a closed loopback port);
repositories that cannot run this way get an error saying what to do."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
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


CLOCK = Path(__file__).parent / "fixtures" / "clock_server"


def test_a_python_server_in_a_monorepo_folder_runs_with_uvx_and_the_root_names_the_folders(
    make_gateway,
    store,  # noqa: F811
    tmp_path,
):
    """`subfolder` picks the server of a monorepo: uvx builds and runs `#subdirectory=src/clock` of the
    analyzed commit (its build backend is in the tree and the index is a closed loopback port: nothing is
    fetched). The root alone names the folders that have a server; npm folders and bad paths are refused."""
    files = {f"src/clock/{p.relative_to(CLOCK)}": p.read_text() for p in CLOCK.rglob("*") if p.is_file()}
    files |= {
        "package.json": '{"name": "mono", "private": true, "workspaces": ["src/*"]}',
        "src/shout/package.json": PACKAGE_JSON,
        "src/shout/server.js": SERVER_JS,
        "docs/notes.md": "# notes\n",
    }
    url = git_repo(tmp_path / "mono", files)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path / "mono", capture_output=True, text=True)
    env = {
        **store,
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",  # uvx, from the test's venv
        "UV_INDEX_URL": "http://127.0.0.1:9/",  # a closed port: nothing is fetched from outside
        "UV_CACHE_DIR": str(tmp_path / "uv-cache"),
    }
    gateway, manager = start(make_gateway, env)

    async def flow(call):
        up = {"repo_url": url, "mode": "upstream"}
        return [
            await call("install_from_repo", namespace="mono", **up),
            await call("install_from_repo", namespace="mono", subfolder="src/clock", **up),
            await call("install_from_repo", namespace="shout", subfolder="src/shout", **up),
            await call("install_from_repo", namespace="docs", subfolder="docs", **up),
            await call("install_from_repo", namespace="up", subfolder="../mono", **up),
            await call("install_from_repo", namespace="file", subfolder="src/clock/clock_server.py", **up),
            await call("install_from_repo", namespace="gone", subfolder="src/nope", **up),
            await call("install_from_repo", repo_url=url, namespace="tr", subfolder="src/clock"),
            await call("reload_core"),
        ]

    results = run_manager(manager, flow)
    (e0, root), (e1, clock), (e2, shout), (e3, docs), (e4, up), (e5, file), (e6, gone), (e7, tr), (e8, _) = results
    assert e0 and "these folders do: src/clock, src/shout" in root and "subfolder=" in root, root
    assert not e1, clock
    spec = f"git+{url}@{commit.stdout.strip()}#subdirectory=src/clock"
    assert shlex.split(clock["runs"]) == ["uvx", "--from", spec, "mcp-server-clock"]
    assert clock["subfolder"] == "src/clock" and clock["prefix"] == "clock"
    assert e2 and "npm cannot run a package from a folder of a git repository" in shout
    assert e3 and "cannot tell how to run docs/" in docs
    assert e4 and "stay inside it (no '..')" in up
    assert e5 and "is a file" in file
    assert e6 and "src/nope is not in the repository" in gone
    assert e7 and "subfolder is for mode='upstream'" in tr
    assert not e8
    assert sorted(p.name for p in gateway.tools_dir.iterdir() if p.name in {"shout", "docs", "up", "file"}) == []
    gateway.wait_for(lambda: gateway.namespace("mono")["state"] == "ready", 180, "uvx to build and start the server")
    assert gateway.call("mono", "clock_chime", hour=3).json()["result"] == "dong dong dong "
