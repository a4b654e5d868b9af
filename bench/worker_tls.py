"""The cost of the network hop (issue 57): the worker protocol over TCP with mutual TLS 1.3 against the unix
socket, to the same worker process (it listens on both), with the same load generator.

    .venv/bin/python bench/worker_tls.py [--calls 2000] [--concurrency 1 16] [--rounds 3]

Two levels, each row measured in this run:
- protocol: this process holds one worker connection (runtime/workerclient.py, as a gateway does) and
  sends `tools.call echo_number` on it from N concurrent tasks: the transport alone;
- gateway REST: `POST /tools/echo_number` through a gateway on `--backend network` whose TOOLDOCK_WORKERS
  names the worker as `unix:PATH` or `tls://HOST:PORT` (two gateways, loaded one after the other).
Each row is the median of a few runs taken in turn with its other transport's, so that other load on the
machine falls on both; the load generator runs on uvloop, as the gateway does.

Everything runs on 127.0.0.1; every load loop is bounded by a call count and a time limit.
"""

from __future__ import annotations

import argparse
import os
import re
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
from run import HERE, Result, rest_caller, run_load, start_gateway

from tooldock import cluster
from tooldock.runtime.workerclient import WorkerConnection
from tooldock.worker.tls import TLSFiles

NAMESPACE = "bench"


def start_worker(tmp: Path, tls_dir: Path, log) -> tuple[subprocess.Popen, Path, str]:
    """One worker on a unix socket and on TCP over mutual TLS at once."""
    sock = tmp / "worker.sock"
    args = [sys.executable, "-m", "tooldock.worker", "--namespace", NAMESPACE, "--dir", str(HERE / "tools" / NAMESPACE),
            "--socket", str(sock), "--listen", "127.0.0.1:0", "--tls-dir", str(tls_dir)]
    proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        found = re.search(r"worker ready on .* and (tls://\S+)", Path(log.name).read_text(errors="replace"))
        if found:
            return proc, sock, found.group(1)
        if proc.poll() is not None:
            raise SystemExit(f"worker exited:\n{Path(log.name).read_text()}")
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("worker did not start within 120 s")


def protocol_caller(address: Path | str, tls: TLSFiles):
    """Each load task's calls go on one connection, shared by all tasks (multiplexed, as a gateway does)."""
    shared: dict[str, WorkerConnection] = {}

    @asynccontextmanager
    async def caller():
        if "conn" not in shared:
            shared["conn"] = await WorkerConnection.open(NAMESPACE, address, None, tls)
        conn = shared["conn"]

        async def call(x: int) -> bool:
            reply = await conn.request("tools.call", tool="echo_number", arguments={"x": x})
            return reply["structuredContent"] == {"result": x}

        yield call

    return caller


def median(results: list[Result]) -> Result:
    return sorted(results, key=lambda r: r.rate)[len(results) // 2]


async def interleaved(calls: int, concurrency: int, rounds: int, callers: dict[str, object]) -> list[Result]:
    """`rounds` runs of each caller, taken in turn (so a burst of load on the machine hits both), and the
    median run of each."""
    runs: dict[str, list[Result]] = {name: [] for name in callers}
    for _ in range(rounds):
        for name, caller in callers.items():
            runs[name].append(await run_load(name, calls, concurrency, caller))
    return [median(found) for found in runs.values()]


async def measure(calls: int, levels: list[int], rounds: int) -> list[tuple[str, int, Result]]:
    tmp = Path(tempfile.mkdtemp(prefix="tooldock-bench-tls-"))
    ca = tmp / "ca"
    cluster.init(ca)
    worker_dir, _ = cluster.issue(ca, "worker")
    gateway_dir, _ = cluster.issue(ca, "gateway")
    tls = TLSFiles(gateway_dir)
    rows: list[tuple[str, int, Result]] = []
    with open(tmp / "worker.log", "w+b") as wlog, open(tmp / "gw-unix.log", "w+b") as ulog, \
            open(tmp / "gw-tls.log", "w+b") as tlog:
        worker, sock, address = start_worker(tmp, worker_dir, wlog)
        procs = [worker]
        try:
            callers = {"unix socket": protocol_caller(sock, tls), "TCP + TLS": protocol_caller(address, tls)}
            await interleaved(200, 4, 1, callers)  # warm-up: the worker's first calls, the connections made
            for concurrency in levels:
                for result in await interleaved(calls, concurrency, rounds, callers):
                    rows.append((f"protocol     {result.target}", concurrency, result))
            env = {**os.environ, "TOOLDOCK_TLS_DIR": str(gateway_dir), "TOOLDOCK_STATE_DIR": str(tmp / "state")}
            gateways = {}
            for name, where, log in (("unix socket", f"unix:{sock}", ulog), ("TCP + TLS", address, tlog)):
                listed = {**env, "TOOLDOCK_WORKERS": f"{NAMESPACE}={where}"}
                proc, url = start_gateway(log, ["--backend", "network"], listed, tools=tmp)
                procs.append(proc)
                gateways[name] = url
            rest = {name: rest_caller(url) for name, url in gateways.items()}
            await interleaved(200, 4, 1, rest)
            for concurrency in levels:
                for result in await interleaved(calls, concurrency, rounds, rest):
                    rows.append((f"gateway REST {result.target}", concurrency, result))
        finally:
            for proc in reversed(procs):
                proc.terminate()
                proc.wait(20)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000, help="measured calls per run")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16], help="concurrent callers")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each row, taken in turn; the median is shown")
    args = parser.parse_args()
    import uvloop  # the gateway's and the worker's event loop (and TLS implementation): the client's too

    rows = uvloop.run(measure(args.calls, args.concurrency, args.rounds))
    title = f"tools/call echo_number, one worker, loopback: median of {args.rounds} runs of {args.calls} calls"
    table = Table(title=f"{title} ({machine.describe()})")
    for column in ("path", "concurrent", "calls/s", "p50 ms", "p99 ms", "errors", "calls/s vs socket"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for index, (path, concurrency, result) in enumerate(rows):
        base = rows[index - 1][2] if "TLS" in path else result
        table.add_row(path, str(concurrency), f"{result.rate:.0f}", f"{result.pct(0.5):.3f}", f"{result.pct(0.99):.3f}",
                      str(result.errors), f"{result.rate / base.rate:.2f}x" if base.rate else "-")
    Console(width=150).print(table)


if __name__ == "__main__":
    main()
