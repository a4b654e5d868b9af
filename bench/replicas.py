"""Gateway replicas and the shared state store (issue 56): MCP `tools/call` of a trivial tool, on a 2025-11-25
session and as 2026-07-28 requests, for one replica with its state in memory, one replica with its state in
Redis, one and two replicas on one Redis behind haproxy (the same hop: those two rows compare replica
counts), and `tooldock serve --replicas 2` (two processes on one port, sharing one worker per namespace,
against one replica on Redis); each for a namespace without a rate limit and one with a limit too high to
refuse anything (every call takes a token: a replica takes them from Redis in batches when busy). wrk drives the
load (bench/mcp_wrk.py; its CPU per call is in the table, to show it is not the bottleneck), every answer is
checked, and Redis's own count of the commands it ran gives the store round trips per call. The servers' CPU
per call (every gateway, worker, haproxy and Redis process, from /proc) shows what a second replica costs, and
"cores busy" (theirs and wrk's CPU seconds per second) whether a core was left for it to use.

    .venv/bin/python bench/replicas.py [--seconds 4] [--concurrency 1 16]

Everything runs on 127.0.0.1 (Debian's redis-server and haproxy, started and stopped here); every run is
bounded by its seconds. haproxy balances round robin with no stickiness: a 2025-era session's requests go
to both replicas, each adopting the session from the store once.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine
import mcp_wrk
from mcp_http import ENVELOPE, call_headers
from run import HERE, TOKEN, start_gateway, tree_cpu

TOOL = "echo_number"
SENT = ("evalsha", "eval", "script", "publish", "subscribe", "unsubscribe", "ping", "hello", "client", "select",
        "get", "set", "del", "xadd", "xrange", "xrevrange", "xread", "pexpire")  # every command the store sends
LIMITED = "limits: {rate: 1000000, burst: 1000000}\n"  # every call takes a token; none is refused


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for(port: int, what: str) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"{what} did not start on port {port}")


class Redis:
    def __init__(self, folder: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for(self.port, "redis-server")
        self.url = f"redis://127.0.0.1:{self.port}/0"

    def round_trips(self) -> int:
        """Requests the gateways have sent Redis so far: INFO commandstats' calls of the commands the state
        store sends (total_commands_processed would also count the commands its Lua script runs inside one
        EVALSHA: TIME, HMGET, HSET, PEXPIRE)."""
        out = subprocess.run(["redis-cli", "-p", str(self.port), "INFO", "commandstats"], capture_output=True,
                             text=True, timeout=10, check=True).stdout
        total = 0
        for line in out.splitlines():
            name, _, stats = line.removeprefix("cmdstat_").partition(":")
            if name.split("|")[0] in SENT:
                total += int(stats.split(",")[0].removeprefix("calls="))
        return total

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


def haproxy(folder: Path, backends: list[str]) -> tuple[subprocess.Popen, str]:
    port = free_port()
    servers = "\n".join(f"  server r{n} {url.removeprefix('http://')}" for n, url in enumerate(backends))
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "haproxy.cfg"
    config.write_text(
        "global\n  maxconn 4096\n"
        "defaults\n  mode http\n  timeout connect 2s\n  timeout client 60s\n  timeout server 60s\n"
        f"frontend gateway\n  bind 127.0.0.1:{port}\n  default_backend replicas\n"
        # Round robin, no stickiness: a session's requests go to both replicas (each adopts it once).
        f"backend replicas\n  balance roundrobin\n{servers}\n"
    )
    proc = subprocess.Popen(["haproxy", "-f", str(config), "-db"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    wait_for(port, "haproxy")
    return proc, f"http://127.0.0.1:{port}"


@dataclass
class Row:
    target: str
    kind: str
    namespace: str
    concurrency: int
    calls: int
    errors: int
    rate: float
    p50: float
    p99: float
    wrk_cpu_us: float
    store_per_call: float | None
    server_cpu_us: float  # every gateway, worker, haproxy and Redis process of the run, per call
    cores_busy: float  # those processes' and wrk's CPU seconds per second of the run


def servers_cpu(pids: list[int]) -> float:
    """CPU seconds used so far by these processes and their descendants (gateways' workers)."""
    return sum(sum(tree_cpu(pid)) for pid in pids)


async def measure(target: str, url: str, namespace: str, modern: bool, concurrency: int, seconds: float,
                  redis: Redis | None, pids: list[int]) -> Row:
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": namespace}
    every = {**headers, **await call_headers(f"{url}/mcp", headers, TOOL, modern)}
    meta = ENVELOPE if modern else None
    await asyncio.to_thread(mcp_wrk.run, f"{url}/mcp", every, concurrency, 1, TOOL, meta)  # warm-up
    before = redis.round_trips() if redis else 0
    cpu_before = servers_cpu(pids)
    got = await asyncio.to_thread(mcp_wrk.run, f"{url}/mcp", every, concurrency, seconds, TOOL, meta)
    server_cpu = servers_cpu(pids) - cpu_before
    per_call = ((redis.round_trips() - before) / got["calls"]) if redis and got["calls"] else None
    return Row(target, "2026-07-28" if modern else "session", namespace, concurrency, int(got["calls"]),
               int(got["errors"]), got["calls"] / got["wall"] if got["wall"] else 0.0, got["p50"], got["p99"],
               got["cpu"] / got["calls"] * 1e6 if got["calls"] else 0.0, per_call,
               server_cpu / got["calls"] * 1e6 if got["calls"] else 0.0,
               (server_cpu + got["cpu"]) / got["wall"] if got["wall"] else 0.0)


async def main(seconds: float, levels: list[int]) -> list[Row]:
    for tool in ("redis-server", "redis-cli", "haproxy", "wrk"):
        if shutil.which(tool) is None:
            raise SystemExit(f"bench/replicas.py needs {tool} (Debian: apt-get install redis-server haproxy wrk)")
    rows: list[Row] = []
    with tempfile.TemporaryDirectory(prefix="tooldock-replicas-") as tmp:
        folder = Path(tmp)
        tools = folder / "tools"
        shutil.copytree(HERE / "tools" / "bench", tools / "bench")
        shutil.copytree(HERE / "tools" / "bench", tools / "limited")
        (tools / "limited" / "tooldock.yaml").write_text(LIMITED)
        redis = Redis(folder)
        started: list[subprocess.Popen] = []
        try:
            def gateway(name: str, state: str | None, args: list[str] | None = None) -> str:
                env = {**os.environ, "TOOLDOCK_STATE_KEY": "b" * 43}
                env.pop("TOOLDOCK_STATE_URL", None)
                if state:
                    env["TOOLDOCK_STATE_URL"] = state
                log = open(folder / f"{name}.log", "w")
                proc, url = start_gateway(log, args=args, env=env, tools=tools)
                started.append(proc)
                return url

            memory = gateway("memory", None)
            shared = gateway("redis", redis.url)
            second = gateway("redis-2", redis.url)
            balancer, balanced = haproxy(folder, [shared, second])
            alone_balancer, alone = haproxy(folder / "one", [shared])  # the same hop, one replica behind it
            started += [balancer, alone_balancer]
            one_port = gateway("one-port", redis.url, ["--replicas", "2"])  # the kernel spreads connections
            targets = [("1 replica, memory", memory, None), ("1 replica, Redis", shared, redis),
                       ("1 replica, Redis, haproxy", alone, redis), ("2 replicas, Redis, haproxy", balanced, redis),
                       ("serve --replicas 2", one_port, redis)]
            for level in levels:
                for modern in (False, True):
                    for namespace in ("bench", "limited"):
                        for target, url, store in targets:
                            pids = [proc.pid for proc in started] + [redis.proc.pid]
                            row = await measure(target, url, namespace, modern, level, seconds, store, pids)
                            print(f"  {target}: {row.kind} {namespace} c={level}: {row.rate:,.0f}/s", file=sys.stderr)
                            rows.append(row)
        finally:
            for proc in started:
                proc.terminate()
            for proc in started:
                try:
                    proc.wait(15)
                except subprocess.TimeoutExpired:
                    proc.kill()
            redis.stop()
    return rows


def table(rows: list[Row]) -> Table:
    out = Table(title=f"MCP tools/call through replicas and the state store ({machine.describe()})")
    for column in ("target", "requests", "namespace", "conc.", "calls/s", "p50 ms", "p99 ms", "errors",
                   "wrk CPU/call", "servers' CPU/call", "cores busy", "Redis cmds/call", "vs 1 replica, memory",
                   "vs 1 replica, same hop"):
        out.add_column(column, justify="left" if column in ("target", "requests", "namespace") else "right")
    base = {(r.kind, r.namespace, r.concurrency): r.rate for r in rows if r.target == "1 replica, memory"}
    one = {(r.kind, r.namespace, r.concurrency): r.rate for r in rows if r.target == "1 replica, Redis, haproxy"}
    direct = {(r.kind, r.namespace, r.concurrency): r.rate for r in rows if r.target == "1 replica, Redis"}
    for r in rows:
        same = {"2 replicas, Redis, haproxy": one, "serve --replicas 2": direct}.get(r.target, {})
        peer = same.get((r.kind, r.namespace, r.concurrency))
        versus = f"{r.rate / peer:.2f}x" if peer else ""
        ratio = r.rate / base[(r.kind, r.namespace, r.concurrency)] if base.get((r.kind, r.namespace,
                                                                                  r.concurrency)) else 0.0
        out.add_row(r.target, r.kind, r.namespace + (" (rate limit)" if r.namespace == "limited" else ""),
                    str(r.concurrency), f"{r.rate:,.0f}", f"{r.p50:.2f}", f"{r.p99:.2f}", str(r.errors),
                    f"{r.wrk_cpu_us:.0f} us", f"{r.server_cpu_us:.0f} us", f"{r.cores_busy:.2f}",
                    "—" if r.store_per_call is None else f"{r.store_per_call:.2f}",
                    f"{ratio:.2f}x", versus)
    return out


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    args = parser.parse_args()
    Console(width=220).print(table(asyncio.run(main(args.seconds, args.concurrency))))
