"""ToolDock gateway benchmark: `tools/call` of a trivial tool through the gateway's REST and MCP paths,
against the same tool served directly by FastMCP over streamable HTTP, all measured in this run.

    .venv/bin/python bench/run.py [--calls 2000] [--concurrency 8]

Everything runs on 127.0.0.1; every load loop is bounded by a call count and a time limit.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import httpx2
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
TOKEN = "bench-token-0123456789"
MAX_SECONDS_PER_TARGET = 120


@dataclass
class Result:
    target: str
    latencies: list[float]
    errors: int
    wall: float

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall else 0.0

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000 if ordered else float("nan")


def start_gateway(log, args: list[str] | None = None, env: dict[str, str] | None = None,
                  tools: Path | None = None) -> tuple[subprocess.Popen, str]:
    env = {**(env or os.environ), "TOOLDOCK_BEARER_TOKEN": TOKEN}
    tooldock = str(Path(sys.executable).parent / "tooldock")
    proc = subprocess.Popen([tooldock, "serve", str(tools or HERE / "tools"), "--port", "0", "--log-level", "warning",
                             *(args or [])], env=env, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        text = Path(log.name).read_text(errors="replace")
        found = re.search(r"tooldock: ready on (http://127\.0\.0\.1:\d+)", text)
        if found:
            return proc, found.group(1)
        if proc.poll() is not None:
            raise SystemExit(f"gateway exited:\n{text}")
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("gateway did not start within 300 s")


def tree_cpu(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) used so far by process `pid` itself, and by its descendants (a gateway's
    workers and fork servers), read from /proc. The descendants' figure counts the ones that have exited
    too (their CPU is in their parent's `cutime`/`cstime` once reaped), so it never goes down when a worker
    is replaced or a fork server exits during a measurement."""
    parents: dict[int, int] = {}
    own: dict[int, float] = {}
    reaped: dict[int, float] = {}
    tick = os.sysconf("SC_CLK_TCK")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:  # gone meanwhile
                continue
            parents[int(entry.name)] = int(fields[1])
            own[int(entry.name)] = (int(fields[11]) + int(fields[12])) / tick
            reaped[int(entry.name)] = (int(fields[13]) + int(fields[14])) / tick
    tree = {pid}
    while found := {p for p, parent in parents.items() if parent in tree} - tree:  # pids are not in tree order
        tree |= found
    return own.get(pid, 0.0), sum(own.get(p, 0.0) + reaped.get(p, 0.0) for p in tree - {pid}) + reaped.get(pid, 0.0)


def start_peer(*args: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, str(HERE / "peer_fastmcp.py"), *args], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    port = proc.stdout.readline().strip()
    if not port.isdigit():
        proc.kill()
        raise SystemExit("FastMCP peer did not start")
    return proc, f"http://127.0.0.1:{port}"


async def run_load(target: str, calls: int, concurrency: int, make_caller) -> Result:
    latencies: list[float] = []
    errors = 0
    remaining = calls
    deadline = time.monotonic() + MAX_SECONDS_PER_TARGET

    async def worker(index: int) -> None:
        nonlocal remaining, errors
        async with make_caller() as call:
            for _ in range(5):  # warm-up, not measured
                await call(index)
            await barrier.wait()
            while remaining > 0 and time.monotonic() < deadline:
                remaining -= 1
                started = time.perf_counter()
                try:
                    ok = await call(index)
                except Exception:
                    ok = False
                if ok:
                    latencies.append(time.perf_counter() - started)
                else:
                    errors += 1

    barrier = asyncio.Barrier(concurrency + 1)
    tasks = [asyncio.create_task(worker(i)) for i in range(concurrency)]
    await barrier.wait()
    started = time.perf_counter()
    await asyncio.gather(*tasks)
    return Result(target, latencies, errors, time.perf_counter() - started)


def rest_caller(url: str):
    class Caller:
        async def __aenter__(self):
            self.client = httpx.AsyncClient(base_url=url, headers={
                "Authorization": f"Bearer {TOKEN}", "X-Namespace": "bench"}, timeout=30)
            return self.call

        async def call(self, x: int) -> bool:
            reply = await self.client.post("/tools/echo_number", json={"x": x})
            return reply.status_code == 200 and reply.json()["result"] == x

        async def __aexit__(self, *exc):
            await self.client.aclose()

    return Caller


def mcp_caller(url: str, headers: dict[str, str], tool: str = "echo_number"):
    class Caller:
        async def __aenter__(self):
            self.http = httpx2.AsyncClient(headers=headers, timeout=30)
            self.transport = streamable_http_client(url, http_client=self.http)
            read, write = await self.transport.__aenter__()
            self.session = ClientSession(read, write)
            await self.session.__aenter__()
            await self.session.initialize()
            return self.call

        async def call(self, x: int) -> bool:
            heard: list[float] = []

            async def on_progress(progress: float, total: float | None, message: str | None) -> None:
                heard.append(progress)

            progress = on_progress if tool == "echo_progress" else None
            result = await self.session.call_tool(tool, {"x": x}, progress_callback=progress)
            ok = not result.is_error and result.structured_content == {"result": x}
            return ok and (progress is None or heard == [1.0])

        async def __aexit__(self, *exc):
            await self.session.__aexit__(None, None, None)
            await self.transport.__aexit__(None, None, None)
            await self.http.aclose()

    return Caller


async def main(calls: int, concurrency: int) -> list[Result]:
    with tempfile.NamedTemporaryFile("w+b", suffix=".log") as log:
        gateway, gw_url = start_gateway(log)
        try:
            peer, peer_url = start_peer()
        except BaseException:
            gateway.kill()
            raise
        try:
            gw_headers = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": "bench"}
            return [
                await run_load("ToolDock REST  POST /tools/{name}", calls, concurrency, rest_caller(gw_url)),
                await run_load("ToolDock MCP   POST /mcp", calls, concurrency, mcp_caller(gw_url + "/mcp", gw_headers)),
                await run_load("FastMCP direct POST /mcp (peer)", calls, concurrency, mcp_caller(peer_url + "/mcp", {})),
                # A Context tool reporting progress: the relay through the worker's in-memory session.
                await run_load("ToolDock MCP   Context tool + progress", calls, concurrency,
                               mcp_caller(gw_url + "/mcp", gw_headers, "echo_progress")),
                await run_load("FastMCP direct Context tool + progress (peer)", calls, concurrency,
                               mcp_caller(peer_url + "/mcp", {}, "echo_progress")),
            ]
        finally:
            for proc in (gateway, peer):
                proc.terminate()
                proc.wait(20)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="measured calls per target")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent clients per target")
    args = parser.parse_args()
    results = asyncio.run(main(args.calls, args.concurrency))
    table = Table(title=f"tools/call of a trivial tool, {args.calls} calls, {args.concurrency} concurrent clients, loopback")
    for column in ("path", "calls/s", "p50 ms", "p99 ms", "errors"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for r in results:
        table.add_row(r.target, f"{r.rate:.0f}", f"{r.pct(0.5):.2f}", f"{r.pct(0.99):.2f}", str(r.errors))
    Console(width=140).print(table)
    for r, peer in ((results[0], results[2]), (results[1], results[2]), (results[3], results[4])):
        print(f"{r.target:<40}: {r.rate / peer.rate:.2f}x the peer's calls/s, "
              f"p50 {r.pct(0.5) / peer.pct(0.5):.2f}x the peer's")
