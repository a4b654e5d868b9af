"""ToolDock on Docker Swarm (issue 57): calls/s and p99 of `POST /tools/echo_number` through the published port
for 1 and 2 gateway replicas and 1 and 2 replicas of the namespace, all on one swarm of this machine.

    .venv/bin/python bench/swarm.py [--calls 1500] [--concurrency 16] [--publish edge|mesh]

Needs a Docker engine (DOCKER_HOST) that is a swarm manager, or is not in a swarm (then `docker swarm init
--advertise-addr 127.0.0.1` is run and the swarm left at the end), and Debian's docker-registry (started on a
free loopback port for the run). The stack is `tooldock swarm up` of bench/tools (its `bench` namespace); each
row changes the replicas and runs `tooldock swarm up` again, then loads the port. `--publish` defaults to
`mesh` where the kernel has IPVS, else `edge` (HAProxy in host mode). The network hop itself (TCP + mutual TLS
against the unix socket, same worker) is bench/worker_tls.py's.

Everything runs on 127.0.0.1; every load loop is bounded by a call count and a time limit.
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
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
import machine
from run import HERE, TOKEN, Result, rest_caller, run_load

STACK = "tdbench"
TOOLDOCK = str(Path(sys.executable).parent / "tooldock")


def docker(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["docker", *args], capture_output=True, text=True)
    if check and proc.returncode != 0:
        raise SystemExit(f"docker {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_registry(tmp: Path) -> tuple[subprocess.Popen, str]:
    if shutil.which("docker-registry") is None:
        raise SystemExit("needs Debian's docker-registry (apt-get install docker-registry)")
    port = free_port()
    (tmp / "registry.yml").write_text(
        f"version: 0.1\nstorage:\n  filesystem:\n    rootdirectory: {tmp / 'registry'}\n"
        f"http:\n  addr: 127.0.0.1:{port}\nlog:\n  level: warn\n"
    )
    proc = subprocess.Popen(["docker-registry", "serve", str(tmp / "registry.yml")], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/v2/", timeout=2).status_code == 200:
                return proc, f"127.0.0.1:{port}"
        except httpx.HTTPError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("docker-registry did not start")


def up(tools: Path, registry: str, replicas: int, port: int, publish: str, state: Path) -> float:
    env = {**os.environ, "TOOLDOCK_BEARER_TOKEN": TOKEN}
    started = time.monotonic()
    proc = subprocess.run([TOOLDOCK, "swarm", "up", str(tools), "--registry", registry, "--replicas", str(replicas),
                           "--port", str(port), "--publish", publish, "--stack", STACK, "--state-dir", str(state),
                           "--timeout", "400"], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"tooldock swarm up failed:\n{proc.stderr[-3000:]}")
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=1500)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--publish", choices=["mesh", "edge"],
                        default="mesh" if Path("/proc/sys/net/ipv4/vs").is_dir() else "edge")
    args = parser.parse_args()
    console = Console(stderr=True)
    made_swarm = False
    if docker("info", "--format", "{{.Swarm.LocalNodeState}}").stdout.strip() != "active":
        docker("swarm", "init", "--advertise-addr", "127.0.0.1")
        made_swarm = True
    rows: list[tuple[int, int, Result, float]] = []
    with tempfile.TemporaryDirectory(prefix="tooldock-bench-swarm-") as tmp_name:
        tmp = Path(tmp_name)
        registry_proc, registry = start_registry(tmp)
        tools = tmp / "tools"
        shutil.copytree(HERE / "tools", tools, ignore=shutil.ignore_patterns("__pycache__"))
        port = free_port()
        try:
            for gateways, workers in ((1, 1), (2, 1), (1, 2), (2, 2)):
                (tools / "bench" / "tooldock.yaml").write_text(f"replicas: {workers}\n")
                took = up(tools, registry, gateways, port, args.publish, tmp / "state")
                console.print(f"swarm up: {gateways} gateway(s), {workers} worker(s) in {took:.0f} s")
                url = f"http://127.0.0.1:{port}"
                time.sleep(3)  # every gateway connected to every worker task (DNS every 2 s)
                result = asyncio.run(run_load(f"{gateways}x{workers}", args.calls, args.concurrency,
                                              rest_caller(url)))
                rows.append((gateways, workers, result, took))
        finally:
            subprocess.run([TOOLDOCK, "swarm", "down", "--stack", STACK, "--state-dir", str(tmp / "state"),
                            "--volumes"], capture_output=True)
            registry_proc.terminate()
            if made_swarm:
                docker("swarm", "leave", "--force", check=False)
    table = Table(title=f"REST through the published port ({args.publish}), {args.concurrency} concurrent, "
                        f"{machine.describe()}")
    for column in ("gateways", "namespace replicas", "calls/s", "p50 ms", "p99 ms", "errors"):
        table.add_column(column, justify="right")
    for gateways, workers, result, _ in rows:
        table.add_row(str(gateways), str(workers), f"{result.rate:.0f}", f"{result.pct(0.5):.1f}",
                      f"{result.pct(0.99):.1f}", str(result.errors))
    Console().print(table)


if __name__ == "__main__":
    main()
