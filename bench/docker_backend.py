"""Docker backend benchmark, against the process backend in the same run.

    .venv/bin/python bench/docker_backend.py [--calls 2000] [--concurrency 8]

1. deploy -> first call: `tooldock deploy` of bench/tools/bench (build cache warm) until the running
   docker-backend gateway answers a call on it.
2. swap under load: 8 clients call the namespace while a new version is deployed; reports the swap time
   (deploy start -> first answer from the new version) and failed calls.
3. calls/s and latency of a trivial tool through the docker backend and through the process backend.
Needs a Docker engine (DOCKER_HOST, the default socket, or a local dockerd it starts). Loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import httpx
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build import ensure_docker  # noqa: E402
from run import TOKEN, rest_caller, run_load, start_gateway  # noqa: E402

HERE = Path(__file__).resolve().parent
TOOLDOCK = str(Path(sys.executable).parent / "tooldock")


def main(calls: int, concurrency: int) -> None:
    host, dockerd = ensure_docker()
    tmp = Path(tempfile.mkdtemp(prefix="tdb-"))
    env = {**os.environ, "DOCKER_HOST": host, "TOOLDOCK_SOCKET_DIR": str(tmp / "s"), "TOOLDOCK_BEARER_TOKEN": TOKEN}
    src = tmp / "src" / "bench"
    shutil.copytree(HERE / "tools" / "bench", src)
    procs = []
    try:
        subprocess.run([TOOLDOCK, "build", str(src), "--output", str(tmp / "oci")], env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # warm the build cache
        with open(tmp / "docker-gw.log", "w+b") as log_d, open(tmp / "process-gw.log", "w+b") as log_p:
            gw_docker, url_d = start_gateway(log_d, ["--backend", "docker"], env)
            procs.append(gw_docker)
            headers = {"Authorization": f"Bearer {TOKEN}", "X-Namespace": "bench"}

            started = time.perf_counter()
            subprocess.run([TOOLDOCK, "deploy", str(src)], env=env, check=True, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
            while httpx.post(f"{url_d}/tools/echo_number", json={"x": 1}, headers=headers).status_code != 200:
                time.sleep(0.02)
            cold = time.perf_counter() - started

            # Swap under load: a new version (one more tool) while clients call.
            (src / "extra.py").write_text("from fastmcp.tools import tool\n\n@tool\ndef version() -> str:\n"
                                          '    """Which build."""\n    return "v2"\n')
            stop, failures, total = threading.Event(), [], [0]

            def client() -> None:
                with httpx.Client(headers=headers, timeout=30) as http:
                    deadline = time.monotonic() + 60
                    while not stop.is_set() and time.monotonic() < deadline:
                        reply = http.post(f"{url_d}/tools/echo_number", json={"x": 7})
                        total[0] += 1
                        if reply.status_code != 200:
                            failures.append(reply.status_code)

            threads = [threading.Thread(target=client) for _ in range(8)]
            for t in threads:
                t.start()
            time.sleep(1)
            started = time.perf_counter()
            subprocess.Popen([TOOLDOCK, "deploy", str(src), "--drain", "20"], env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            while httpx.post(f"{url_d}/tools/version", json={}, headers=headers).status_code != 200:
                time.sleep(0.02)
            swap = time.perf_counter() - started
            time.sleep(1)
            stop.set()
            for t in threads:
                t.join(60)

            gw_process, url_p = start_gateway(log_p, [], env, tools=HERE / "tools")
            procs.append(gw_process)
            docker_load = asyncio.run(run_load("docker backend  REST", calls, concurrency, rest_caller(url_d)))
            process_load = asyncio.run(run_load("process backend REST", calls, concurrency, rest_caller(url_p)))
    finally:
        for proc in procs:
            proc.terminate()
            proc.wait(30)
        subprocess.run([TOOLDOCK, "stop", "bench"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(tmp, ignore_errors=True)
        if dockerd is not None:
            dockerd.terminate()
            dockerd.wait(30)

    console = Console(width=140)
    table = Table(title="docker backend: deploy and swap")
    for column in ("measure", "value"):
        table.add_column(column)
    table.add_row("tooldock deploy -> first successful call (warm build cache)", f"{cold:.2f} s")
    table.add_row("swap under load: deploy start -> new version served", f"{swap:.2f} s")
    table.add_row("calls during the swap run / failed", f"{total[0]} / {len(failures)}")
    console.print(table)
    table = Table(title=f"tools/call of a trivial tool, {calls} calls, {concurrency} concurrent clients")
    for column in ("path", "calls/s", "p50 ms", "p99 ms", "errors"):
        table.add_column(column, justify="left" if column == "path" else "right")
    for r in (docker_load, process_load):
        table.add_row(r.target, f"{r.rate:.0f}", f"{r.pct(0.5):.2f}", f"{r.pct(0.99):.2f}", str(r.errors))
    console.print(table)
    print(f"docker backend: {docker_load.rate / process_load.rate:.2f}x the process backend's calls/s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=8)
    args = parser.parse_args()
    main(args.calls, args.concurrency)
