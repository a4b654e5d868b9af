"""Spreading calls over a namespace's workers (issue 57, discovery by DNS): calls/s through one namespace
served by 1 and by 2 workers over TCP with mutual TLS, on loopback.

    .venv/bin/python bench/discovery.py [--calls 2000] [--concurrency 1 16] [--rounds 3] [--work-ms 2]

Two workers listen on one port at 127.0.0.1 and 127.0.0.2, as a name's addresses would. This process holds
the namespace as a gateway does (runtime/backends/pool.py: the network backend's WorkerPool, given a
resolver that answers one or both addresses) and sends calls through it from N concurrent tasks: `echo`,
which does nothing (the path alone), and `spin`, which keeps a CPU busy for `--work-ms` milliseconds (a
tool that works, which is where a second worker can help). The rows are the median of a few runs taken in
turn. Everything runs on 127.0.0.x; every load loop is bounded by a call count and a time limit. On a
machine with few cores the load generator and both workers share them: read the ratio with the core count
the title gives.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import socket
import subprocess
import sys
import tempfile
import time
from contextlib import asynccontextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine
from run import Result, run_load

from tooldock import cluster
from tooldock.runtime.backends.network import NetworkBackend
from tooldock.runtime.backends.pool import WorkerPool
from tooldock.runtime.settings import Settings
from tooldock.runtime.workerclient import SecretEnv
from tooldock.worker.tls import TLSFiles

NAMESPACE = "bench"
HOSTS = ("127.0.0.1", "127.0.0.2")
TOOLS = '''import time

from fastmcp.tools import tool


@tool
def echo(x: int) -> int:
    """Return x.

    Args:
        x: Any integer.
    """
    return x


@tool
def spin(x: int, ms: float) -> int:
    """Keep a CPU busy for `ms` milliseconds, then return x.

    Args:
        x: Any integer.
        ms: How long to work.
    """
    until = time.perf_counter() + ms / 1000
    while time.perf_counter() < until:
        pass
    return x
'''


class Answer:
    """A resolver that answers the addresses it was given (the name is the bench's own)."""

    def __init__(self, *addresses: str) -> None:
        self.addresses = list(addresses)

    async def resolve(self, host: str, port: int) -> list[str]:
        return list(self.addresses)


def start_worker(host: str, port: int, tls_dir: Path, folder: Path, log) -> subprocess.Popen:
    args = [sys.executable, "-m", "tooldock.worker", "--namespace", NAMESPACE, "--dir", str(folder),
            "--listen", f"{host}:{port}", "--tls-dir", str(tls_dir)]
    return subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)


def wait_ready(logs: list[Path], procs: list[subprocess.Popen]) -> None:
    deadline = time.monotonic() + 120
    while not all(re.search(r"worker ready on", log.read_text(errors="replace")) for log in logs):
        if any(p.poll() is not None for p in procs) or time.monotonic() > deadline:
            raise SystemExit("a worker did not start:\n" + "\n".join(log.read_text() for log in logs))
        time.sleep(0.05)


async def make_pool(settings: Settings, tls: TLSFiles, port: int, hosts: tuple[str, ...]) -> WorkerPool:
    backend = NetworkBackend(settings, {NAMESPACE: f"tls://bench-workers.test:{port}"}, tls, 2.0, Answer(*hosts))
    pool = backend.create((await backend.discover()).namespaces[0], SecretEnv())
    await pool.start(60)
    deadline = time.monotonic() + 30
    while len([w for w in pool.status()["workers"] if w["state"] == "ready"]) < len(hosts):
        if time.monotonic() > deadline:
            raise SystemExit(f"not every worker got ready: {pool.status()}")
        await asyncio.sleep(0.05)
    return pool


def pool_caller(pool: WorkerPool, tool: str, work_ms: float):
    arguments = {"ms": work_ms} if tool == "spin" else {}

    @asynccontextmanager
    async def caller():
        async def call(x: int) -> bool:
            reply = await pool.call(tool, {"x": x, **arguments})
            return reply["structuredContent"] == {"result": x}

        yield call

    return caller


async def measure(calls: int, levels: list[int], rounds: int, work_ms: float) -> list[tuple[str, int, Result]]:
    tmp = Path(tempfile.mkdtemp(prefix="tooldock-bench-discovery-"))
    ca = tmp / "ca"
    cluster.init(ca)
    worker_dir, _ = cluster.issue(ca, "worker")
    gateway_dir, _ = cluster.issue(ca, "gateway")
    folder = tmp / "tools" / NAMESPACE
    folder.mkdir(parents=True)
    (folder / "tools.py").write_text(TOOLS)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    logs = [tmp / f"worker-{host}.log" for host in HOSTS]
    handles = [open(log, "w+b") for log in logs]
    procs = [start_worker(host, port, worker_dir, folder, handle) for host, handle in zip(HOSTS, handles, strict=True)]
    settings = Settings(bearer_token="b" * 20, state_dir=tmp / "state")
    rows: list[tuple[str, int, Result]] = []
    try:
        wait_ready(logs, procs)
        tls = TLSFiles(gateway_dir)
        pools = {"1 worker": await make_pool(settings, tls, port, HOSTS[:1]),
                 "2 workers": await make_pool(settings, tls, port, HOSTS)}
        for tool in ("echo", "spin"):
            callers = {f"{tool:<5} {name}": pool_caller(pool, tool, work_ms) for name, pool in pools.items()}
            for name, caller in callers.items():  # warm-up
                await run_load(name, 100, 4, caller)
            for concurrency in levels:
                runs: dict[str, list[Result]] = {name: [] for name in callers}
                for _ in range(rounds):
                    for name, caller in callers.items():
                        runs[name].append(await run_load(name, calls, concurrency, caller))
                for name, found in runs.items():
                    rows.append((name, concurrency, sorted(found, key=lambda r: r.rate)[len(found) // 2]))
        for pool in pools.values():
            await pool.release()
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(20)
        for handle in handles:
            handle.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="measured calls per run")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16], help="concurrent callers")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each row, taken in turn; the median is shown")
    parser.add_argument("--work-ms", type=float, default=2.0, help="CPU time a `spin` call takes, in ms")
    args = parser.parse_args()
    import uvloop  # the gateway's event loop

    rows = uvloop.run(measure(args.calls, args.concurrency, args.rounds, args.work_ms))
    title = (f"tools/call over TCP + TLS, one namespace (spin: {args.work_ms:g} ms of CPU): "
             f"median of {args.rounds} runs of {args.calls} calls")
    table = Table(title=f"{title} ({machine.describe()})")
    for column in ("tool, namespace served by", "concurrent", "calls/s", "p50 ms", "p99 ms", "errors", "vs 1 worker"):
        table.add_column(column, justify="left" if column.startswith("tool") else "right")
    for index, (name, concurrency, result) in enumerate(rows):
        base = rows[index - 1][2] if name.endswith("2 workers") else result
        table.add_row(name, str(concurrency), f"{result.rate:.0f}", f"{result.pct(0.5):.3f}", f"{result.pct(0.99):.3f}",
                      str(result.errors), f"{result.rate / base.rate:.2f}x" if base.rate else "-")
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
