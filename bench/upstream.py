"""Upstream namespaces: `tools/call` through an upstream namespace against calling the same upstream server
directly, and the context a client receives with `active_toolsets` narrowed against all tools active.

    .venv/bin/python bench/upstream.py [--calls 2000] [--concurrency 8]

The upstream server is the FastMCP peer of bench/run.py (streamable HTTP on 127.0.0.1): the direct row
calls it with the same client as the row through ToolDock, which fronts it as an HTTP upstream. The context
figure uses bench/upstream_many.py (60 tools, stdio). Everything runs on 127.0.0.1, every loop is bounded.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path

import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from run import TOKEN, mcp_caller, run_load, start_gateway, start_peer

HERE = Path(__file__).resolve().parent
NARROW = ["issue_*", "*_issue"]  # the issue tools: 6 of 60


def write_tools(root: Path, peer_url: str) -> Path:
    tools = root / "tools"
    many = f"{json.dumps(sys.executable)[1:-1]} {HERE / 'upstream_many.py'}"
    for name, toml in {
        "up": f'active_toolsets = ["peer_*"]\n[[servers]]\nnamespace = "peer"\nurl = "{peer_url}/mcp"\n',
        "narrow": f"active_toolsets = {json.dumps(NARROW)}\n[[servers]]\nnamespace = \"\"\ncommand = \"{many}\"\n",
        "all": f'active_toolsets = ["*"]\n[[servers]]\nnamespace = ""\ncommand = "{many}"\n',
    }.items():
        (tools / name).mkdir(parents=True)
        (tools / name / "tools.toml").write_text(toml)
    return tools


async def listed_bytes(url: str, namespace: str) -> tuple[int, int]:
    """(tools listed, bytes of the tools/list result) as an MCP session of that namespace receives them."""
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": namespace}
    async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
        async with streamable_http_client(url + "/mcp", http_client=http) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                tools = (await session.list_tools()).tools
                data = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]
                return len(tools), len(json.dumps(data, separators=(",", ":")).encode())


async def main(calls: int, concurrency: int) -> None:
    peer, peer_url = start_peer()
    try:
        with tempfile.TemporaryDirectory() as tmp, open(Path(tmp) / "gateway.log", "w+b") as log:
            gateway, gw_url = start_gateway(log, tools=write_tools(Path(tmp), peer_url))
            try:
                headers = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": "up"}
                results = [
                    await run_load("direct: FastMCP over streamable HTTP", calls, concurrency,
                                   mcp_caller(peer_url + "/mcp", {})),
                    await run_load("through ToolDock: upstream namespace", calls, concurrency,
                                   mcp_caller(gw_url + "/mcp", headers, "peer_echo_number")),
                ]
                narrow, every = await listed_bytes(gw_url, "narrow"), await listed_bytes(gw_url, "all")
            finally:
                gateway.terminate()
                gateway.wait(20)
    finally:
        peer.terminate()
        peer.wait(20)
    table = Table(title=f"tools/call of a trivial tool, {calls} calls, {concurrency} concurrent MCP sessions, loopback")
    for column in ("path", "calls/s", "p50 ms", "p99 ms", "errors"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for r in results:
        table.add_row(r.target, f"{r.rate:.0f}", f"{r.pct(0.5):.2f}", f"{r.pct(0.99):.2f}", str(r.errors))
    console = Console(width=140)
    console.print(table)
    direct, through = results
    print(f"through ToolDock: {through.rate / direct.rate:.2f}x the direct calls/s, "
          f"p50 +{through.pct(0.5) - direct.pct(0.5):.2f} ms")
    context = Table(title="tools/list an MCP session receives from a 60-tool upstream (bytes of tool definitions)")
    for column in ("active_toolsets", "tools listed", "bytes"):
        context.add_column(column, justify="left" if column == "active_toolsets" else "right")
    context.add_row(json.dumps(NARROW), str(narrow[0]), f"{narrow[1]:,}")
    context.add_row('["*"]', str(every[0]), f"{every[1]:,}")
    console.print(context)
    print(f"narrowed: {narrow[1] / every[1]:.0%} of the bytes (toolman_activate's catalog included in both)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="measured calls per target")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent MCP sessions per target")
    args = parser.parse_args()
    asyncio.run(main(args.calls, args.concurrency))
